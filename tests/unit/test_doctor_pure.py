"""The pure core stays pure and portable; knowledge is derived from the matrix, never written in code."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from envman.matrix.knowledge import knowledge_from_matrix, load_knowledge, matrix_dir, with_extensions
from envman.matrix.load import load_matrix
from envman.model import Cc, sass_covers
from envman.portable import versions
from envman.portable.doctor.knowledge import Knowledge

ROOT = Path(__file__).resolve().parents[2]
DOCTOR = ROOT / "envman" / "portable" / "doctor"
FIX = ROOT / "tests" / "fixtures" / "facts"
PURE = sorted(DOCTOR.glob("*.py"))
STDLIB_OK = set(sys.stdlib_module_names)
SEAM = ("..versions", "..frameworks", "..frameworks.base")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (annotations only, never imported at run time)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skip |= {id(n) for b in node.body for n in ast.walk(b)}
    return [n for n in ast.walk(tree) if id(n) not in skip]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append("." * node.level + (node.module or ""))
    return out


def test_pure_core_imports_only_the_stdlib_and_itself():
    for p in PURE:
        for name in _imports(p):
            if name.startswith("."):
                # ..frameworks: the plug-ins read each installed framework's record (the doctor's seam)
                assert not name.startswith("...") and (not name.startswith("..") or name in SEAM), \
                    f"{p.name} imports {name} (outside the doctor, versions and the framework plug-ins)"
                continue
            assert name.split(".")[0] in STDLIB_OK, f"{p.name} imports {name}"
            assert name.split(".")[0] not in ("subprocess", "os", "socket", "shutil", "glob"), f"{p.name} does IO: {name}"


def test_pure_core_runs_without_packaging_or_yaml(tmp_path):
    """The smoke test copies envman/doctor into images whose Python may lack both."""
    code = (
        "import sys; sys.modules['packaging'] = None; sys.modules['yaml'] = None\n"
        "from envman.portable.doctor.checks import run_checks\nfrom envman.portable.doctor.knowledge import Knowledge\n"
        "import json; k = Knowledge.from_dict(json.load(open(sys.argv[1])))\n"
        "f = {'gpus': [{'index': 0, 'name': 'X', 'cc': '12.0'}], 'driver': '570.124.06',"
        " 'torch': {'version': '2.5.1+cu124', 'cuda': '12.4'}}\n"
        "print([x.check for x in run_checks(f, k)])\n"
    )
    kfile = tmp_path / "knowledge.json"
    kfile.write_text(json.dumps(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")).to_dict()))
    out = subprocess.run([sys.executable, "-c", code, str(kfile)], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "['arch-not-covered']"


def test_no_version_literals_in_checks():
    """Versions in verdicts and remedies come from facts and knowledge (STYLE: data in YAML)."""
    lit = re.compile(r"""["'](?:\d+\.\d+(?:\.\d+)*|sm_\d+|cu\d{3})["']""")
    for p in PURE:
        tree = ast.parse(p.read_text(encoding="utf-8"))
        # PEP 600 defines the legacy manylinux tags by glibc version: a spec, not compatibility data.
        spec = {id(n) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "_LEGACY_MANYLINUX" for t in node.targets) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in spec:
                assert not lit.fullmatch(repr(node.value)), f"{p.name}: version literal {node.value!r}"


def test_one_sass_rule_for_resolver_doctor_and_smoke():
    """sm_100a (arch-specific) on a 10.3 device: the resolver, the doctor and the smoke program agree —
    not covered; sm_100f (family) and plain sm_100 are."""
    from envman.portable import smoke

    devices = [(m, n) for m in (3, 5, 6, 7, 8, 9, 10, 12) for n in range(0, 10)]
    names = [f"sm_{m}{n}{s}" for m, n in devices for s in ("", "a", "f")]
    for dev in devices:
        for name in names:
            model = sass_covers((Cc.parse(name),), Cc(*dev)) is not None
            doctor = versions.sass_for(versions.split_arch_list([name])[0], dev) is not None
            program = smoke.arch_covers(dev, [name])[0]
            assert model == doctor == program, (name, dev)
    assert sass_covers((Cc.parse("sm_100a"),), Cc(10, 3)) is None
    assert not smoke.arch_covers((10, 3), ["sm_100a"])[0]
    assert versions.sass_for(versions.split_arch_list(["sm_100a"])[0], (10, 3)) is None
    assert sass_covers((Cc.parse("sm_100f"),), Cc(10, 3)) == Cc(10, 0, "f")


def test_cache_finds_the_same_matrix_directory_as_the_loader():
    assert load_matrix() is load_matrix(matrix_dir())  # the loader's default folder is the cache's


def test_knowledge_round_trips_through_json_and_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path))
    k = with_extensions(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")), FIX.parent / "matrix")
    assert k.features and k.ptx_isa and k.ext_builds  # extensions.yaml rides along
    assert Knowledge.from_dict(json.loads(json.dumps(k.to_dict()))) == k
    first = load_knowledge(FIX.parent / "matrix")
    assert len(list(tmp_path.glob("knowledge-*.json"))) == 1
    assert load_knowledge(FIX.parent / "matrix") == first == k


def test_adapter_carries_floors_archs_and_companions():
    k = knowledge_from_matrix(load_matrix(FIX.parent / "matrix"))
    assert k.min_driver["12.8"] == "570.124.06" and k.minor_floor[13] == "580.65.06"
    rel = k.release("torch", "2.7.1+cu128")
    assert rel.companion("torchvision") == "0.22.1"
    assert rel.build("cu128").archs[-1] == "sm_120" and rel.build("cu128").ptx == ("sm_120",)
    assert k.release("torch", "2.7.2").version == "2.7.1"  # a patch not listed: its line's builds
    assert k.release("torch", "1.12.1") is None
    assert k.driver_mode("570.124.06", "12.8") == "full" and k.driver_mode("525.60.13", "12.8") == "minor"
    assert k.driver_mode("525.60.12", "12.8") == "too-old" and k.driver_mode(None, "12.8") is None
