"""Keep the architecture visible: the pure core does no IO, and only cli/ prints or exits."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "envman"
PURE = ["resolve.py", "refusal.py", "model.py", "plan.py", "pins.py", "targets.py", "names.py", "summary.py",
        *[f"doctor/{p.name}" for p in (Path(__file__).resolve().parents[2] / "envman" / "doctor").glob("checks*.py")]]
FORBIDDEN_IMPORTS = {"yaml", "jinja2", "docker", "subprocess", "shutil", "socket", "urllib", "requests", "pynvml"}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_pure_core_imports_no_io():
    for name in PURE:
        bad = imports_of(PKG / name) & FORBIDDEN_IMPORTS
        assert not bad, f"{name} imports {bad}"


def test_pure_core_reads_no_files_or_environment():
    for name in PURE:
        src = (PKG / name).read_text()
        for needle in ("open(", "os.environ", "read_text(", "write_text(", "print("):
            assert needle not in src, f"{name} uses {needle}"


def test_only_cli_exits():
    for path in PKG.rglob("*.py"):
        if "cli" in path.relative_to(PKG).parts:
            continue
        src = path.read_text()
        assert "sys.exit(" not in src and "typer" not in imports_of(path), path
