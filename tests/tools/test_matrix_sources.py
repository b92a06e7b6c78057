"""The primary-source readers (envman/matrix/sources/): each parses its source's own text, offline from a
clone or live through a fake HTTP layer, into the same snapshot rows; the derivations and checks on top."""

from __future__ import annotations

import subprocess
from datetime import date
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from envman.errors import DataError, ToolError
from tools.matrix.sources import cuda_drivers, gpu_floors, nvidia_gpus, pypi_nvidia, torch_builds
from tools.matrix.sources.gitrepo import GitHubRepo, LocalRepo, NotFound, parse_ls_remote
from tools.matrix.sources.snapshot import Snapshot, parse_snapshot

TODAY = date(2026, 12, 1)


def readme(*rows: tuple[str, str]) -> str:
    """A README.md shaped like NVIDIA's: prose, then the Compatible GPUs table."""
    body = "\n".join(f"| {name:<40} | {pci:<14} |" for name, pci in rows)
    return ("# NVIDIA Linux Open GPU Kernel Module Source\n\n## Compatible GPUs\n\nThe NVIDIA open kernel modules "
            "can be used on any Turing or later GPU (see the table below).\n\n"
            "| Product Name                             | PCI ID         |\n"
            "| ---------------------------------------- | -------------- |\n" + body + "\n\n## Other\n| not | a row |\n")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def gpu_repo(tmp_path) -> Path:
    """A git repository with three release tags whose README lists GPUs the way NVIDIA's does."""
    repo = tmp_path / "open-gpu-kernel-modules"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.test")
    git(repo, "config", "user.name", "t")
    versions = [
        ("515.48.07", [("NVIDIA A100-SXM4-80GB", "20B2 10DE 1463"), ("Tesla T4", "1EB8 10DE 12A2")][:1]),
        ("520.56.06", [("NVIDIA A100-SXM4-80GB", "20B2 10DE 1463"), ("NVIDIA H100 PCIe", "2331 10DE 1626")]),
        ("550.40.65", [("NVIDIA A100-SXM4-80GB", "20B2 10DE 1463"), ("NVIDIA H100 PCIe", "2331 10DE 1626"),
                       ("NVIDIA H200", "2335 10DE 18BE")]),
    ]
    for tag, rows in versions:
        (repo / "README.md").write_text(readme(*rows))
        git(repo, "add", "README.md")
        git(repo, "commit", "-q", "-m", tag)
        git(repo, "tag", "-a", tag, "-m", tag)  # annotated, like NVIDIA's
    git(repo, "tag", "not-a-release")
    return repo


def test_readme_rows_carry_device_subsystem_and_name():
    assert nvidia_gpus.parse_readme(readme(("NVIDIA H200", "2335 10DE 18BE"), ("NVIDIA GeForce RTX 4090", "2684"))) == {
        ("2335", "10DE 18BE", "NVIDIA H200"), ("2684", "", "NVIDIA GeForce RTX 4090")}


def test_a_clone_is_condensed_to_first_and_last_listing(gpu_repo):
    snap = nvidia_gpus.read_source(LocalRepo(nvidia_gpus.SLUG, str(gpu_repo / ".git")), TODAY)
    assert [r[0] for r in snap.rows("tags")] == ["515.48.07", "520.56.06", "550.40.65"]  # not-a-release left out
    assert snap.rows("rows") == [
        ["515.48.07", "550.40.65", "20B2", "10DE 1463", "NVIDIA A100-SXM4-80GB"],
        ["520.56.06", "550.40.65", "2331", "10DE 1626", "NVIDIA H100 PCIe"],
        ["550.40.65", "550.40.65", "2335", "10DE 18BE", "NVIDIA H200"],
    ]
    head = git(gpu_repo, "rev-parse", "550.40.65^{commit}").strip()
    assert snap.meta["revision"] == f"550.40.65 ({head})" and snap.meta["url"] == nvidia_gpus.URL
    again = parse_snapshot(nvidia_gpus.NAME, snap.render())
    assert again.sections == snap.sections and again.meta == snap.meta


def test_the_live_path_parses_the_same_bytes_into_the_same_rows(gpu_repo):
    """GitHub live: refs from `git ls-remote` (here of the clone's path), files over HTTP (here a fake)."""
    asked = []

    def fetch(url: str) -> bytes:
        asked.append(url)
        commit = url.split("/")[-2]
        return git(gpu_repo, "show", f"{commit}:README.md").encode()

    live = nvidia_gpus.read_source(GitHubRepo(nvidia_gpus.SLUG, fetch, remote=str(gpu_repo)), TODAY)
    offline = nvidia_gpus.read_source(LocalRepo(nvidia_gpus.SLUG, str(gpu_repo / ".git")), TODAY)
    assert live.render() == offline.render()
    assert all(u.startswith("https://raw.githubusercontent.com/NVIDIA/open-gpu-kernel-modules/") for u in asked)


def test_ls_remote_prefers_the_commit_an_annotated_tag_points_at():
    text = "aaa\trefs/tags/550.40.65\nbbb\trefs/tags/550.40.65^{}\nccc\trefs/heads/main\n"
    assert parse_ls_remote(text, "tags") == {"550.40.65": "bbb"}
    assert parse_ls_remote(text, "heads") == {"main": "ccc"}


def test_snapshot_header_is_required():
    with pytest.raises(DataError, match=r"header: missing '# revision:'"):
        parse_snapshot("x", "# url: https://example.test\n# read: 2026-12-01\n[rows]\na\tb\n")


# --- per-GPU floors ----------------------------------------------------------------------------------

GPUS = """
driver_floors:
  - {cc: "8.0", family: Ampere, min_driver: "450", source: "https://example.test/cuda-11.0"}
  - {cc: "9.0", family: Hopper, min_driver: "520", source: "https://example.test/cuda-11.8"}
gpus:
  - {id: v100, name: "NVIDIA Tesla V100", cc: "7.0", segment: datacenter, aliases: ["v100"], source: "https://example.test/v"}
  - {id: t4, name: "NVIDIA T4", cc: "7.5", segment: datacenter, aliases: ["t4", "Tesla T4"], source: "https://example.test/t"}
  - {id: a100, name: "NVIDIA A100 SXM4 80GB", cc: "8.0", segment: datacenter, aliases: ["a100", "NVIDIA A100-SXM4-80GB"], source: "https://example.test/a"}
  - {id: h100-pcie, name: "NVIDIA H100 PCIe 80GB", cc: "9.0", segment: datacenter, aliases: ["h100-pcie", "NVIDIA H100 PCIe"], source: "https://example.test/h"}
  - {id: h200, name: "NVIDIA H200 SXM 141GB", cc: "9.0", segment: datacenter, aliases: ["h200", "NVIDIA H200"], source: "https://example.test/h2"}
  - {id: h9, name: "NVIDIA H9 (not listed)", cc: "9.0", segment: datacenter, aliases: ["h9"], source: "https://example.test/h9"}
"""


@pytest.fixture
def listing(gpu_repo):
    return nvidia_gpus.listing(nvidia_gpus.read_source(LocalRepo(nvidia_gpus.SLUG, str(gpu_repo / ".git")), TODAY))


def test_derived_floors_follow_the_generation_rule(listing):
    got = {d.gpu: d for d in gpu_floors.derive(yaml.safe_load(GPUS), listing)}
    assert got["v100"].proprietary
    assert "t4" not in got  # not in this list at all (the real list names it from 575)
    a100 = got["a100"]  # in the first table; Ampere's floor (450) predates the list: not its floor
    assert (a100.listed, a100.floor, a100.pci) == ("515.48.07", False, {"20B2": "515.48.07"})
    h200 = got["h200"]  # Hopper arrived after the list began: its first listing is its floor
    assert (h200.listed, h200.floor, h200.names) == ("550.40.65", True, ["NVIDIA H200"])
    assert h200.source == "https://github.com/NVIDIA/open-gpu-kernel-modules/blob/550.40.65/README.md"


def test_sync_writes_blocks_the_loader_reads_and_check_then_agrees(listing, matrix_copy):
    from envman.matrix.load import _load_cached, load_matrix

    floors = 'driver_floors:\n  - {cc: "9.0", family: Hopper, min_driver: "520", source: "https://example.test/f"}\ngpus:'
    text = (matrix_copy / "gpus.yaml").read_text().replace("gpus:", floors, 1)
    new, report = gpu_floors.plan(yaml.safe_load(text), listing, text)
    assert "+ h100-sxm: listed" not in "\n".join(report)  # the fixture's H100 SXM is named nowhere in this list
    assert any(line.startswith("+ a100-sxm4-80gb: listed from 515.48.07") for line in report)
    (matrix_copy / "gpus.yaml").write_text(new)
    _load_cached.cache_clear()
    by_id = {g.id: g for g in load_matrix(matrix_copy).gpus}
    assert str(by_id["h100-pcie"].min_driver) == "520.56.06" and by_id["h100-pcie"].family == "Hopper"
    assert (str(by_id["a100-sxm4-80gb"].listed), by_id["a100-sxm4-80gb"].min_driver) == ("515.48.07", None)  # no Ampere entry
    assert [(d, str(v)) for d, v in by_id["h200"].pci] == [("2335", "550.40.65")]
    doc = yaml.safe_load(new)
    unlisted = {p.split("[")[1].split("]")[0] for p in gpu_floors.check(doc, listing)}
    assert "h200" not in unlisted and "a100-sxm4-80gb" not in unlisted
    assert gpu_floors.plan(doc, listing, new)[0] == new  # a second sync changes nothing


def test_check_names_the_file_and_key_of_a_floor_below_the_first_listing(listing):
    doc = yaml.safe_load(GPUS)
    for e in doc["gpus"]:
        d = next((x for x in gpu_floors.derive(doc, listing) if x.gpu == e["id"]), None)
        if d is not None:
            e["driver"] = yaml.safe_load("\n".join(d.rows()))["driver"]
    doc["gpus"][4]["driver"]["listed"] = "535.43.02"  # h200 claimed earlier than NVIDIA lists it
    doc["gpus"][3]["driver"]["floor"] = False  # h100-pcie's listing dropped as a floor
    probs = gpu_floors.check(doc, listing)
    assert "gpus.yaml: gpus[h200].driver.listed: '535.43.02', NVIDIA's list first names 2335 in 550.40.65 " \
           "(https://github.com/NVIDIA/open-gpu-kernel-modules/blob/550.40.65/README.md)" in probs
    assert "gpus.yaml: gpus[h100-pcie].driver.floor: False, expected true" in probs
    assert any(p.startswith("gpus.yaml: gpus[t4]: not in NVIDIA's supported-GPU list") for p in probs)
    assert any(p.startswith("gpus.yaml: gpus[h9]: not in NVIDIA's supported-GPU list") for p in probs)


# --- PyTorch's release build matrices --------------------------------------------------------------

SCRIPT = '''
import os
PYTHON_ARCHES_DICT = {"nightly": ["3.10", "3.15"], "test": ["3.10", "3.11", "3.14t", "3.15"], "release": ["3.9"]}
TORCH_ONLY_PYTHON_ARCHES = ["3.15", "3.15t"]
CUDA_ARCHES_DICT = {"nightly": ["12.6"], "test": ["12.6", "13.0"], "release": ["12.4"]}
STABLE_CUDA_VERSIONS = {"nightly": "12.6", "test": "13.0", "release": "12.4"}
CUDA_AARCH64_ARCHES: list[str] = ["12.6-aarch64", "12.9-aarch64", "13.0-aarch64"]
CUDA_ARCHES = CUDA_ARCHES_DICT["nightly"]
def f():
    return os.system("never run")
'''


def test_build_matrix_constants_are_read_without_running_the_script():
    got = torch_builds.parse_constants(SCRIPT)
    assert got["CUDA_ARCHES_DICT"]["test"] == ["12.6", "13.0"] and "CUDA_ARCHES" not in got  # not a literal
    snap = Snapshot(torch_builds.NAME, {"url": torch_builds.URL, "revision": "x", "read": "2026-12-01"},
                    {"branches": [["2.14", "c0ffee"]],
                     "constants": [["2.14", k, __import__("json").dumps(v)] for k, v in got.items()]})
    b = torch_builds.builds(snap)["2.14"]
    assert (b.cuda, b.cuda_aarch64, b.stable, b.python) == (("12.6", "13.0"), ("12.6", "12.9", "13.0"), "13.0", ("3.10", "3.11"))
    assert b.url == "https://github.com/pytorch/test-infra/blob/c0ffee/tools/scripts/generate_binary_build_matrix.py"


def test_a_release_without_the_aarch64_list_names_its_one_build_in_a_function():
    script = 'def images():\n    return {\n        CUDA_AARCH64: "cu124",\n    }\n'
    assert torch_builds.parse_constants(script)["CUDA_AARCH64_ARCHES"] == ["12.4-aarch64"]


def test_torch_yaml_is_held_to_the_build_matrix(matrix):
    from tools.matrix.sources.torch_builds import ReleaseBuild
    from tools.matrix.sources.torch_variants import check, plan

    url = "https://github.com/pytorch/test-infra/blob/c0ffee/tools/scripts/generate_binary_build_matrix.py"
    builds = {"2.14": ReleaseBuild("2.14", "c0ffee", ("12.6", "13.0", "12.9"), ("12.6", "13.0", "12.4"), "13.0",
                                   ("3.10", "3.11", "3.9"), url)}
    probs = check(matrix, builds)
    assert f"torch.yaml: line 2.14: variants: cu132 is not in PyTorch's release build matrix for 2.14 (x86_64 CUDA 12.6, 13.0, 12.9: {url})" in probs
    assert f"torch.yaml: line 2.14: variants: the release build matrix builds cu129 ({url}); the line lacks it" in probs
    assert f"torch.yaml: line 2.14: variants[cu126].platforms: the release build matrix builds it for linux-aarch64 too ({url}); platforms lacks aarch64" in probs
    assert any("python: lacks 3.9" in p for p in probs)
    text = (Path(__file__).parents[1] / "fixtures" / "matrix" / "torch.yaml").read_text()
    new, report = plan(matrix, builds, text)
    assert "+ torch 2.14 cu126: linux-aarch64 wheels (" + url + ")" in report
    assert "~ torch 2.14: linux-aarch64 CUDA cu124 has no x86_64 variant: not a release variant, left out" in report
    assert "+ torch 2.14 cu130: linux-aarch64 wheels (" + url + ")" in report
    assert new.count("platforms: [x86_64, aarch64]") == text.count("platforms: [x86_64, aarch64]") + 2


# --- CUDA runfiles and PyPI -----------------------------------------------------------------------


MD5 = """\
7c8d3eca60ee10d2c290bdc045f88f09  cuda_13.3.1_610.43.02_linux.run
90a4467e1ac192963b0713634d5a0e43  cuda_13.3.1_610.43.02_linux_sbsa.run
f5a1806cd4f1b2d140ac37e3a09d1ca8  cuda_13.3.1_windows.exe
"""


def test_the_runfile_names_the_driver_it_bundles():
    assert cuda_drivers.parse_runfile(MD5, "13.3.1") == (True, "610.43.02")
    assert cuda_drivers.parse_runfile("abc  cuda_13.4.1_linux.run\n", "13.4.1") == (True, None)
    assert cuda_drivers.parse_runfile(MD5, "13.3.0") == (False, None)


def test_md5sum_files_are_read_live_and_a_missing_one_is_skipped():
    def fetch(url):
        if "/13.3.1/" in url:
            return MD5.encode()
        raise NotFound(f"{url}: HTTP 404")

    snap = cuda_drivers.read_source(["13.3.1", "13.3.2"], fetch, TODAY)
    assert snap.rows("runfiles") == [["13.3.1", "610.43.02", cuda_drivers.runfile_url("13.3.1", "610.43.02")]]

    def down(url):
        raise ToolError(f"{url}: cannot reach it")

    with pytest.raises(ToolError):  # an unreachable site is never an empty snapshot
        cuda_drivers.read_source(["13.3.1"], down, TODAY)


def test_min_driver_above_the_bundled_driver_and_a_lagging_update_fail(matrix):
    rows = [["13.5.0", "500.00", cuda_drivers.runfile_url("13.5.0", "500.00")],
            ["13.5.9", "500.00", cuda_drivers.runfile_url("13.5.9", "500.00")]]
    snap = Snapshot(cuda_drivers.NAME, {"url": "u", "revision": "r", "read": "d"}, {"runfiles": rows})
    probs = cuda_drivers.check(matrix, snap)
    assert probs == [f"cuda.yaml: releases[13.5].latest_update: 13.5.0, NVIDIA published 13.5.9 ({rows[1][2]})",
                     f"cuda.yaml: releases[13.5].min_driver: 615.00 is above the driver 500.00 that CUDA 13.5.0's "
                     f"own runfile bundles ({rows[0][2]})"]


def test_a_toolkit_release_is_an_update_when_nvcc_or_cudart_move_else_a_respin():
    pins = {Version("13.1.1"): {"nvidia-cuda-nvcc": "==13.1.115.*", "nvidia-cuda-runtime": "==13.1.80.*", "nvidia-cublas": "==13.2.1.1.*"},
            Version("13.1.2"): {"nvidia-cuda-nvcc": "==13.1.115.*", "nvidia-cuda-runtime": "==13.1.80.*", "nvidia-cublas": "==13.2.2.2.*"},
            Version("13.2.0"): {"nvidia-cuda-nvcc": "==13.2.51.*"},
            Version("13.2.1"): {"nvidia-cuda-nvcc": "==13.2.78.*"}}
    got = [(str(r.version), r.kind, r.moved) for r in pypi_nvidia.classify(list(pins), pins.__getitem__)]
    assert got == [("13.1.1", "first", ()), ("13.1.2", "respin", ("nvidia-cublas",)),
                   ("13.2.0", "first", ()), ("13.2.1", "update", ("nvidia-cuda-nvcc",))]


def test_what_pypi_had_at_the_last_sync_must_be_in_the_data(matrix):
    snap = Snapshot(pypi_nvidia.NAME, {"url": "u", "revision": "r", "read": "d"},
                    {"newest": [["cuda-toolkit", "13.6.0"], ["nvidia-cudnn-cu13", "9.99.0.1"]]})
    assert pypi_nvidia.check(matrix, snap) == [
        "cuda.yaml: releases: CUDA 13.6 (cuda-toolkit 13.6.0 on PyPI) is missing",
        "cudnn.yaml: releases: cuDNN 9.99 (nvidia-cudnn-cu13 9.99.0.1 on PyPI) is missing"]


# --- the command line, on a copy of the shipped matrices ------------------------------------------------


def run(module: str, *args: str, matrix_dir: Path) -> subprocess.CompletedProcess:
    import os
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "ENVMAN_MATRIX_DIR": str(matrix_dir)}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env, cwd=ROOT)


def workshop(*args: str, matrix_dir: Path) -> subprocess.CompletedProcess:
    """``python -m tools.matrix …`` at the repository root, as a maintainer runs it."""
    return run("tools.matrix", *args, matrix_dir=matrix_dir)


@pytest.fixture
def shipped_copy(tmp_path) -> Path:
    import shutil

    from envman.resources import shipped_matrix_dir

    d = tmp_path / "matrices"
    shutil.copytree(shipped_matrix_dir(), d)
    return d


def test_check_fails_naming_file_and_key_when_a_floor_is_below_nvidias_list(shipped_copy):
    gpus = shipped_copy / "gpus.yaml"
    gpus.write_text(gpus.read_text().replace('listed: "550.40.65"', 'listed: "535.43.02"', 1))
    out = workshop("check", "--sources", matrix_dir=shipped_copy)
    assert out.returncode == 7, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "gpus.yaml: gpus[h200].driver.listed: '535.43.02', NVIDIA's list first names 2335 in 550.40.65 "
        "(https://github.com/NVIDIA/open-gpu-kernel-modules/blob/550.40.65/README.md)"]
    assert run("envman.cli.main", "matrix", "check", matrix_dir=shipped_copy).stdout == "ok\n"


def test_sync_reads_a_clone_writes_snapshot_and_data_validated(shipped_copy, gpu_repo):
    out = workshop("sync", "nvidia-gpus", "--git-dir", str(gpu_repo / ".git"), matrix_dir=shipped_copy)
    assert "(dry run: pass --write to apply)" in out.stdout, out.stderr
    before = (shipped_copy / "gpus.yaml").read_text()
    assert before == (shipped_copy / "gpus.yaml").read_text()
    out = workshop("sync", "nvidia-gpus", "--git-dir", str(gpu_repo / ".git"), "--write", matrix_dir=shipped_copy)
    assert f"wrote {shipped_copy / 'gpus.yaml'}" in out.stdout and f"wrote {shipped_copy / 'sources/nvidia-gpus.tsv'}" in out.stdout
    assert "- t4: not in NVIDIA's list (550.40.65): driver block removed" in out.stdout  # this list has no T4
    snap = (shipped_copy / "sources" / "nvidia-gpus.tsv").read_text()
    assert "# revision: 550.40.65 (" in snap and "550.40.65\t550.40.65\t2335\t10DE 18BE\tNVIDIA H200" in snap
    assert workshop("check", "--sources", matrix_dir=shipped_copy).returncode in (0, 7)  # loads; the toy list is not NVIDIA's


def test_sync_live_reads_the_source_and_an_unreachable_one_is_an_error(shipped_copy, monkeypatch):
    from types import SimpleNamespace

    from tools.matrix.app import sync_sources
    from tools.matrix.sources import registry

    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(shipped_copy))
    toolkit = SimpleNamespace(versions=lambda final_only=True: [Version("13.3.1"), Version("13.6.0")])
    monkeypatch.setattr(registry, "_pypi", lambda index_url: {"cuda-toolkit": toolkit})
    pages = {cuda_drivers.md5sum_url("13.3.1"): MD5.encode(),
             cuda_drivers.md5sum_url("13.6.0"): b"abc  cuda_13.6.0_620.10.01_linux.run\n"}

    def fetch(url):
        if url in pages:
            return pages[url]
        raise NotFound(f"{url}: HTTP 404")

    monkeypatch.setattr(cuda_drivers, "http_get", fetch)
    plan = sync_sources(["cuda-drivers"], live=True)
    assert "sources/cuda-drivers.tsv" in plan.files  # the snapshot is renewed from what was read
    assert "13.6.0\t620.10.01\t" in plan.files["sources/cuda-drivers.tsv"]

    def down(url):
        raise ToolError(f"{url}: cannot reach it ([Errno -2] Name or service not known)")

    monkeypatch.setattr(cuda_drivers, "http_get", down)
    with pytest.raises(ToolError, match="cannot reach it"):
        sync_sources(["cuda-drivers"], live=True)
