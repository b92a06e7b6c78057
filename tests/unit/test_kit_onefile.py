"""The in-image kit is ONE file (issue 37, item 3): .envman/kit.py, copied to /opt/envman/kit/envman_portable.py,
serves every module of the portable island, so the image runs `python -m envman_portable.smoke|preflight|allreduce`
exactly as it did from the 56-file folder; the same envman and matrix give the same bytes; Python 3.8 reads it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from envman.app.init import InitOptions, init_project
from envman.image.kit import HEADER, IN_IMAGE, KIT_FILE, kit_files, kit_module, kit_text
from envman.resources import portable_dir

REPOS = Path(__file__).resolve().parent.parent / "fixtures" / "repos"


def island_modules() -> list[str]:
    root = portable_dir()
    names = []
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        if "__pycache__" in parts or parts in (("onefile",), ("__init__",)):
            continue
        names.append(".".join(("envman_portable", *(parts[:-1] if parts[-1] == "__init__" else parts))))
    return names


def write(tmp_path: Path) -> Path:
    kit = tmp_path / "kit"
    kit.mkdir()
    for rel, text in kit_files().items():
        (kit / rel).write_text(text, encoding="utf-8")
    return kit


def test_the_kit_is_one_deterministic_file_python_3_8_reads():
    text = kit_text()
    assert list(kit_files()) == [IN_IMAGE] and text == kit_text() == kit_module(_knowledge(text))
    assert text.startswith(HEADER) and text.endswith("\ninstall(globals(), SOURCES, PACKAGES)\n")
    ast.parse(text, feature_version=(3, 8))  # the kit file itself, then every module it carries
    tree = ast.parse(text)
    sources = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "SOURCES")
    names = [k.value for k in sources.keys]
    assert names == sorted(names) == island_modules()
    for value in sources.values:
        ast.parse(ast.literal_eval(value), feature_version=(3, 8))


def _knowledge(text: str) -> str:
    tree = ast.parse(text)
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and n.targets[0].id == "KIT_KNOWLEDGE")


def test_every_module_of_the_island_imports_from_the_one_file(tmp_path):
    kit = write(tmp_path)
    probe = ("import importlib, json, sys\n"
             "mods = sys.argv[1:]\n"
             "for m in mods:\n"
             "    importlib.import_module(m)\n"
             "import envman_portable.smoke as s\n"
             "print(json.dumps([s.__file__, s.__package__, len(s.kit_knowledge() or '')]))\n")
    out = subprocess.run([sys.executable, "-s", "-c", probe, *island_modules()], capture_output=True, text=True,
                         env={"PYTHONPATH": str(kit), "PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    file, package, knowledge = json.loads(out.stdout)
    assert (file, package) == (str(kit / "envman_portable" / "smoke.py"), "envman_portable") and knowledge > 1000


def test_the_programs_run_with_python_m_as_before(tmp_path):
    kit = write(tmp_path)
    for module, usage in (("smoke", "usage: smoke.py [-h] [--expect EXPECT]"),
                          ("preflight", "usage: preflight.py [-h] [--expect EXPECT]")):
        out = subprocess.run([sys.executable, "-s", "-m", f"envman_portable.{module}", "--help"], capture_output=True,
                             text=True, env={"PYTHONPATH": str(kit), "PATH": "/usr/bin:/bin"}, timeout=120)
        assert out.returncode == 0 and out.stdout.startswith(usage), out.stderr


def test_a_traceback_names_the_modules_own_file_and_line(tmp_path):
    kit = write(tmp_path)
    code = ("import envman_portable.versions as v\n"
            "class Bad:\n    def __str__(self):\n        raise RuntimeError('boom')\n"
            "v.vt(Bad())\n")
    out = subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(kit)}, timeout=60)
    line = (portable_dir() / "versions.py").read_text().splitlines().index("    m = _LEAD.match(str(text))") + 1
    assert f'File "{kit / "envman_portable" / "versions.py"}", line {line}, in vt\n' in out.stderr


def test_a_library_that_reads_the_stack_imports_under_python_m(tmp_path):
    """torch's import walks the stack, and linecache asks each frame's loader for its source under the frame's
    __name__: for the module `python -m` runs, "__main__". The kit's loader had answered KeyError, so in every
    built image the smoke test said "torch does not import: KeyError: '__main__'" (seen on the real engine).
    Here the -c process's __main__ is made what `python -m envman_portable.versions` makes it."""
    kit = write(tmp_path)
    code = ("import linecache, sys\n"
            "import envman_portable.versions as v\n"
            "main = sys.modules['__main__']\n"
            "main.__spec__, main.__loader__ = v.__spec__, v.__loader__\n"
            "linecache.lazycache(v.__file__, {'__name__': '__main__', '__loader__': v.__loader__})\n"
            "print(linecache.getline(v.__file__, 1), end='')\n"
            "linecache.lazycache('/nowhere.py', {'__name__': 'elsewhere', '__loader__': v.__loader__})\n"
            "print(repr(linecache.getline('/nowhere.py', 1)))\n")
    out = subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(kit)})
    first = (portable_dir() / "versions.py").read_text().splitlines()[0]
    assert (out.returncode, out.stdout) == (0, f"{first}\n''\n"), out.stderr


def test_init_writes_one_kit_file_the_dockerfile_copies(tmp_path):
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(REPOS / "torch-repo", repo)
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    assert [p.name for p in (repo / ".envman").iterdir() if "kit" in p.name] == [KIT_FILE]
    assert (repo / ".envman" / KIT_FILE).read_text(encoding="utf-8") == kit_text()
    assert "COPY .envman/kit.py /opt/envman/kit/envman_portable.py\n" in (repo / "Dockerfile").read_text()


def test_the_folder_an_older_envman_wrote_is_named_for_deletion(tmp_path):
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(REPOS / "torch-repo", repo)
    (repo / ".envman" / "kit" / "envman_portable").mkdir(parents=True)
    (repo / ".envman" / "kit" / "envman_portable" / "smoke.py").write_text("# the 0.2 kit\n")
    out = init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    assert out.notes[-1] == ("the kit is one file now (.envman/kit.py); the folder .envman/kit/ an older envman "
                             "wrote is no longer used: delete it (git rm -r .envman/kit)")
    assert (repo / ".envman" / "kit" / "envman_portable" / "smoke.py").read_text() == "# the 0.2 kit\n"  # not ours to delete
