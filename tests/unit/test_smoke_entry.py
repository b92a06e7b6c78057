"""The smoke test imports what the project's entry point imports (issue 38, class 9): images passed their smoke test
and train.py still stopped at its first imports (pkg_resources, packaging, requests, a config library nobody
declared). The entry script is read, never run; the project's own modules it imports are followed."""

from __future__ import annotations

import json
import keyword
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from envman.image.plan import stack_expectation
from envman.lockedstack import BaseImage, LockedStack, ProjectFacts
from envman.portable import smoke
from tests.unit.test_smoke import smoke_argv

PY = "%d.%d" % sys.version_info[:2]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def _run(root: Path, command: list[str] | None, tmp_path: Path) -> tuple[int, dict, str]:
    """The smoke program from a kit copy, as the image runs it: in the work directory that holds the project."""
    expect = tmp_path / "stack.json"
    expect.write_text(json.dumps({"schema": 1, "framework": None, "python": PY, "imports": [],
                                  **({"command": command} if command is not None else {})}))
    argv, env = smoke_argv(tmp_path)
    p = subprocess.run([*argv, "--expect", str(expect)], capture_output=True, text=True, timeout=60, env=env,
                       cwd=root, check=False)
    return p.returncode, json.loads(p.stdout), p.stderr


def _checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


# a project whose entry point reaches, through its own package, a module no requirement names (the seen case:
# a config library nobody declared); Bio is where the import name is not the distribution's (matrices/import_names.yaml)
PROJECT = {
    "train.py": """\
        import json
        from helpers.data import load
        import yaml

        def main():
            import lazy_never_installed  # runs only when called
        if __name__ == "__main__":
            main()
        """,
    "helpers/__init__.py": "from . import config\n",
    "helpers/config.py": "import os\nfrom Bio import SeqIO\n",
    "helpers/data.py": """\
        try:
            import optional_never_installed
        except ImportError:
            optional_never_installed = None
        import sys
        if sys.platform == "darwin":
            import mlx
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            import typed_never_installed
        def load():
            pass
        """,
}


def test_an_import_of_the_entry_point_that_the_image_lacks_fails_the_smoke_naming_file_line_and_distribution(tmp_path):
    root = _tree(tmp_path / "proj", PROJECT)
    code, report, err = _run(root, ["python", "train.py"], tmp_path)
    assert code == 1, err
    c = _checks(report)
    assert c["entry point train.py"]["status"] == "fail"
    assert c["entry point train.py"]["observed"] == "5 of 6 modules import"
    assert c["import Bio"]["observed"] == "ModuleNotFoundError: No module named 'Bio'"
    assert c["import Bio"]["detail"] == ("helpers/config.py:2 imports it; distribution biopython provides it, and the "
                                         "image does not hold it: add biopython to the project's requirements (or "
                                         "packages: in envman.yaml) and lock again")
    assert "  FAIL  import Bio" in err
    # guarded, conditional and function-level imports are not the entry point's start-up
    assert not [n for n in c if "never_installed" in n or n == "import mlx"]


def test_an_entry_point_whose_imports_all_import_passes(tmp_path):
    root = _tree(tmp_path / "proj", {**PROJECT, "helpers/config.py": "import os\n"})
    code, report, err = _run(root, None, tmp_path)  # no command: train.py, the script a user runs first
    assert code == 6, err
    assert _checks(report)["entry point train.py"] == {
        "name": "entry point train.py", "status": "pass", "expected": "its imports import",
        "observed": "5 of 5 modules import", "detail": "", "gpu": False}


def test_a_module_run_with_dash_m_is_the_entry_point(tmp_path):
    root = _tree(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/train.py": "import json\nimport no_such_mod_x\n"})
    code, report, _ = _run(root, ["torchrun", "--nproc-per-node", "2", "-m", "pkg.train"], tmp_path)
    assert code == 1 and _checks(report)["import no_such_mod_x"]["detail"].startswith("pkg/train.py:2 imports it; ")


def test_a_command_script_missing_from_the_image_is_a_warning(tmp_path):
    root = _tree(tmp_path / "proj", {"other.py": ""})
    code, report, _ = _run(root, ["python", "scripts/train.py"], tmp_path)
    c = _checks(report)["entry point scripts/train.py"]
    assert code == 6 and (c["status"], c["observed"]) == ("warn", f"not found in {root}")


def test_removed_module_names_the_way_back():
    obs = {"entry": "train.py", "found": True, "modules": [
        ("pkg_resources", "train.py:1", "setuptools", "ModuleNotFoundError: No module named 'pkg_resources'"),
        ("tomllib", "train.py:2", None, "ModuleNotFoundError: No module named 'tomllib'")]}
    _, pr, tl = smoke.evaluate_entry(obs)
    assert pr["detail"] == ("train.py:1 imports it; setuptools 82.0.0 removed pkg_resources (setuptools NEWS.rst, "
                            "v82.0.0), and a package imports it without requiring setuptools: add 'setuptools<82' to "
                            "envman.yaml packages: and lock again")
    assert tl["detail"] == "train.py:2 imports it; from the standard library"


def test_entry_script_from_the_command():
    assert smoke.entry_script(["accelerate", "launch", "--config_file", "c.yaml", "train.py", "--lr", "1"], ".") == "train.py"
    assert smoke.entry_script(["bash", "run.sh"], ".") is None
    assert smoke.entry_script(["python", "-m", "not_in_this_folder"], ".") is None


def test_the_expected_stack_carries_the_command_and_refuses_a_bad_one():
    res = type("R", (), {"framework": None, "variant": "cpu", "cuda": None, "cudnn": None, "nccl": None,
                         "python": "3.11", "arch_list": ()})()
    stack = LockedStack(name="p", res=res, base=BaseImage("python:3.11-slim", "slim"), inputs_hash="h",
                        project=ProjectFacts(command=("python", "train.py")))
    assert stack_expectation(stack, "h")["command"] == ["python", "train.py"]
    assert "command" not in stack_expectation(LockedStack(name="p", res=res, base=stack.base, inputs_hash="h"), "h")
    bad = {"schema": 1, "framework": None, "python": "3.11", "command": "python train.py"}
    try:
        smoke.load_expect(bad)
    except ValueError as exc:
        assert str(exc) == "command: must be a list of the image's command words"
    else:
        raise AssertionError("a command that is not a list was accepted")


_IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s) and s not in sys.stdlib_module_names and s != "train")


@settings(max_examples=40, deadline=None)
@given(local=st.sets(_IDENT, max_size=4), external=st.sets(_IDENT, min_size=1, max_size=4),
       guarded=st.sets(_IDENT, max_size=3))
def test_every_outside_module_reached_at_top_level_is_listed_with_its_line_and_nothing_else(
        tmp_path_factory, local, external, guarded):
    external, guarded = external - local, guarded - local - external
    root = tmp_path_factory.mktemp("p")
    lines = [f"import {m}" for m in sorted(local)]
    lines += [f"try:\n    import {m}\nexcept ImportError:\n    pass" for m in sorted(guarded)]
    (root / "train.py").write_text("\n".join(lines) + "\n")
    want = {}
    for i, m in enumerate(sorted(external)):  # each reached through a local module, or from the entry itself
        owner = sorted(local)[i % len(local)] if local else None
        where = root / f"{owner}.py" if owner else root / "train.py"
        text = where.read_text() if where.exists() else ""
        where.write_text(text + f"import {m}\n")
        want[m] = f"{where.name}:{len(text.splitlines()) + 1}"
    for m in local:
        (root / f"{m}.py").touch()
    assert dict(smoke.entry_imports("train.py", str(root))) == want
