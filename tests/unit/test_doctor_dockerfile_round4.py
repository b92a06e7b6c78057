"""`envman doctor --dockerfile`, round four: no false alarm on the lines PyTorch's, NVIDIA's, JAX's and TensorFlow's
install pages use (tests/fixtures/dockerfiles/near: healthy near-misses, zero findings above info), and a bound on
the work a Dockerfile may ask of the reader (issue 39, cause 9: 40 self-doubling ARGs grew one process to 24 GB; a
1 MB RUN line took 23 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.cli.main import main
from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.dockerfile import MAX_VALUE, DockerfileTooLarge, parse_dockerfile, substitute
from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.dockerfile_facts import dockerfile_facts

FIX = Path(__file__).resolve().parent.parent / "fixtures"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX / "matrix")), FIX / "matrix")
NEAR = sorted((FIX / "dockerfiles" / "near").glob("*.Dockerfile"))
TARGETS = {
    "h100": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}],
    "rtx4090": [{"index": 0, "name": "NVIDIA GeForce RTX 4090", "cc": "8.9"}],
    "a100": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "cc": "8.0"}],
}


def judge(text: str, gpus: list) -> tuple[dict, list]:
    facts = dockerfile_facts(parse_dockerfile(text), K, gpus)
    return facts, run_checks(facts, K)


def above_info(found: list) -> list[tuple[str, str]]:
    return [(f.severity, f.check) for f in found if f.severity in ("error", "warn")]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))


def test_the_near_misses_say_where_their_pattern_comes_from():
    assert len(NEAR) >= 8
    for p in NEAR:
        assert p.read_text(encoding="utf-8").startswith("# NEAR-MISS: "), p.name


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("path", NEAR, ids=lambda p: p.stem)
def test_install_page_dockerfiles_get_no_finding_above_info(path, target):
    _, found = judge(path.read_text(encoding="utf-8"), TARGETS[target])
    assert above_info(found) == []


def test_companions_from_the_same_variant_index_are_that_variant():
    facts, found = judge("FROM python:3.10-slim\nRUN pip install torch==2.1.2 torchvision==0.16.2 torchaudio==2.1.2 "
                         "--index-url https://download.pytorch.org/whl/cu118\n", TARGETS["h100"])
    assert facts["pip"]["torchvision"] == "0.16.2+cu118" and facts["pip"]["torchaudio"] == "2.1.2+cu118"
    assert [f for f in found if f.check == "companion-mismatch"] == []
    # the class still holds where it is true: torchvision from PyPI (its cu121 default) beside a cu118 torch
    _, mixed = judge("FROM python:3.10-slim\nRUN pip install torch==2.1.2 --index-url "
                     "https://download.pytorch.org/whl/cu118\nRUN pip install torchvision==0.16.2\n", TARGETS["h100"])
    assert above_info(mixed) == [("error", "companion-mismatch")]


def test_tensorflow_and_cuda_brings_every_library_it_opens():
    facts, found = judge("FROM python:3.11-slim\nRUN pip install 'tensorflow[and-cuda]'\n", TARGETS["rtx4090"])
    assert {"nvidia-cublas-cu12", "nvidia-cufft-cu12", "nvidia-cusolver-cu12"} <= set(facts["pip"])
    assert above_info(found) == []


# --- bounds ---------------------------------------------------------------------------------------------------


def doubling(n: int, op: str = "ARG") -> str:
    head = "" if op == "ARG" else "FROM python:3.11\n"
    body = f"{op} A0=xxxxxxxx\n" + "".join(f"{op} A{i}=${{A{i - 1}}}${{A{i - 1}}}\n" for i in range(1, n + 1))
    return head + body + ("FROM python:3.11\n" if op == "ARG" else "") + f"RUN echo $A{n}\n"


@pytest.mark.parametrize("op", ["ARG", "ENV"])
def test_self_doubling_values_are_refused_at_the_line_that_passes_the_bound(op):
    with pytest.raises(DockerfileTooLarge) as e:
        parse_dockerfile(doubling(40, op))
    assert str(e.value) == f"line {19 if op == 'ARG' else 20}: $A17 expands this value past 1 MiB"


def test_many_lines_each_under_the_bound_are_refused_in_all():
    text = "FROM python:3.11\nARG X=" + "y" * (1 << 19) + "\n" + "RUN echo $X\n" * 100
    with pytest.raises(DockerfileTooLarge) as e:
        parse_dockerfile(text)
    assert str(e.value) == "line 35: ARG/ENV substitution expands past 16 MiB in all"


_BOUNDED = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: the 40-ARG file once took 24 GB
from envman.portable.dockerfile import DockerfileTooLarge, parse_dockerfile
text = open(sys.argv[1], encoding="utf-8").read()
t = time.monotonic()
try:
    parse_dockerfile(text)
    print("parsed", round(time.monotonic() - t, 2))
except DockerfileTooLarge as e:
    print("refused", round(time.monotonic() - t, 2), e)
"""

PATHOLOGICAL = {
    "doubling-args": doubling(40),
    # 250 000 `A=1` words in front of one command: a list sliced once per word made this 205 s
    "run-assignments": "FROM python:3.11\nRUN " + "A=1 " * 250_000 + "pip install x\n",
    "run-1mb": "FROM python:3.11\nRUN echo " + "a" * (1 << 20) + "\n",
    "run-and-chain": "FROM python:3.11\nRUN " + " && ".join("true" for _ in range(150_000)) + "\n",
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_dockerfiles_finish_in_bounded_memory(tmp_path, name):
    p = tmp_path / "Dockerfile"
    p.write_text(PATHOLOGICAL[name], encoding="utf-8")
    # a generous guard (the machine is shared): linear work finishes in about a second, the old parse took minutes
    r = subprocess.run([sys.executable, "-c", _BOUNDED, str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    word, secs = r.stdout.split()[:2]
    assert word == ("refused" if name == "doubling-args" else "parsed") and float(secs) < 20


def test_the_command_line_refuses_it_with_one_error_and_a_hint(capsys, tmp_path):
    p = tmp_path / "Dockerfile"
    p.write_text(doubling(40), encoding="utf-8")
    code = main(["doctor", "--dockerfile", str(p), "--target", "h100"])
    err = capsys.readouterr().err
    assert code == 1 and err.splitlines() == [
        f"error: Dockerfile {p}: line 19: $A17 expands this value past 1 MiB: envman reads no Dockerfile that asks "
        "for this much work",
        "hint: no real Dockerfile expands an ARG past 1 MiB; look for ARGs defined from themselves (ARG A1=${A0}${A0}) "
        "and pass the Dockerfile you mean to build",
    ]


_NAMES = st.sampled_from(["A", "B", "C", "D"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_NAMES, st.lists(st.one_of(_NAMES.map(lambda n: "${" + n + "}"), st.text(max_size=50)),
                                           max_size=6)), max_size=40))
def test_any_arg_chain_is_bounded_or_refused(chain):
    values: dict[str, str] = {}
    try:
        for name, parts in chain:
            values[name] = substitute("".join(parts), values)
            assert len(values[name]) <= MAX_VALUE
    except DockerfileTooLarge as e:
        assert "expands this value past 1 MiB" in str(e)


# --- --target names another vendor's accelerator --------------------------------------------------------------


@pytest.mark.parametrize("name, vendor, stack", [("mi300x", "AMD", "ROCm"), ("MI250", "AMD", "ROCm"),
                                                 ("gaudi3", "Intel", "Gaudi/oneAPI"), ("m3-max", "Apple", "Metal (MPS)")])
def test_another_vendors_accelerator_is_refused_in_one_sentence(capsys, tmp_path, name, vendor, stack):
    p = tmp_path / "Dockerfile"
    p.write_text("FROM python:3.11-slim\nRUN pip install torch\n", encoding="utf-8")
    code = main(["doctor", "--dockerfile", str(p), "--target", name])
    err = capsys.readouterr().err.splitlines()
    a = "an" if vendor[0] in "AEIOU" else "a"
    assert code == 2 and err[0] == (f"error: {name!r} is {a} {vendor} accelerator: envman builds CUDA environments "
                                    f"for NVIDIA GPUs only, and {vendor}/{stack} is outside its scope")
    assert err[1] == "hint: give an NVIDIA GPU (`envman matrix show gpus` lists them) or a compute capability like sm_90"


def test_nvidia_names_near_another_vendors_are_still_nvidias():
    from envman.resolve.targets import parse_target

    m = load_matrix(FIX / "matrix")
    assert parse_target(m, "a100").gpu is not None and parse_target(m, "sm_90").cc is not None


def test_the_facts_probe_records_a_dockerfile_past_the_bounds_instead_of_following_it(tmp_path):
    from envman.portable.facts.project import read_dockerfiles

    (tmp_path / "bomb.Dockerfile").write_text(doubling(40), encoding="utf-8")
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim\n", encoding="utf-8")
    assert read_dockerfiles(str(tmp_path)) == [
        {"path": "Dockerfile", "from": ["python:3.11-slim"]},
        {"path": "bomb.Dockerfile", "error": "line 19: $A17 expands this value past 1 MiB"},
    ]
