"""docker-bake.json: validated against a JSON schema written from buildx's bake reference (always), and by
`docker buildx bake --print` where buildx is installed; the GPU-generation example runs the real resolver.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envman.ci import BAKE_FILE, CiOptions, bake_data, bake_files, load_ci_project, shared_stacks, write_ci_files
from envman.ci.project import parse_registry
from envman.lock.lockfile import build_lock, render_lock
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ci"
SCHEMA = json.loads((FIXTURES / "bake.schema.json").read_text())
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None), "integer": int}


def schema_errors(value, schema: dict, path: str = "$") -> list[str]:
    """The subset of JSON Schema 2020-12 that bake.schema.json uses (jsonschema is no dependency of envman)."""
    if "$ref" in schema:
        return schema_errors(value, SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[1]], path)
    if "anyOf" in schema:
        return [] if any(not schema_errors(value, s, path) for s in schema["anyOf"]) else [f"{path}: matches no alternative"]
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else types
        ok = any(isinstance(value, TYPES[t]) and not (t == "integer" and isinstance(value, bool)) for t in allowed)
        if not ok:
            return [f"{path}: expected {' or '.join(allowed)}"]
    errors = []
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        errors += [f"{path}: {k!r} is required" for k in schema.get("required", []) if k not in value]
        props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
        for k, v in value.items():
            names = schema.get("propertyNames")
            if names and not re.search(names["pattern"], k):
                errors.append(f"{path}: name {k!r} does not match {names['pattern']}")
            if k in props:
                errors += schema_errors(v, props[k], f"{path}.{k}")
            elif extra is False:
                errors.append(f"{path}: unknown attribute {k!r}")
            elif isinstance(extra, dict):
                errors += schema_errors(v, extra, f"{path}.{k}")
    return errors


def bake_problems(doc: dict, root: Path) -> list[str]:
    """Schema, then what a schema cannot say: groups name targets that exist, Dockerfiles exist."""
    problems = schema_errors(doc, SCHEMA)
    targets = doc.get("target", {})
    for g, group in doc.get("group", {}).items():
        problems += [f"group {g}: no target {t!r}" for t in group.get("targets", []) if t not in targets]
    problems += [f"target {n}: no {t['dockerfile']}" for n, t in targets.items() if not (root / t.get("dockerfile", "Dockerfile")).is_file()]
    return problems


@pytest.fixture
def fleet(tmp_path) -> Path:
    d = tmp_path / "fleet"
    shutil.copytree(FIXTURES / "projects" / "profiles", d)
    return d


@pytest.mark.parametrize("registry", [None, "ghcr.io/acme"])
def test_generated_bake_files_match_the_schema(fleet, registry):
    p = load_ci_project(fleet)
    write_ci_files(fleet, bake_files(p, CiOptions(parse_registry(registry))), force=False)
    doc = json.loads((fleet / BAKE_FILE).read_text())
    assert bake_problems(doc, fleet) == []
    assert doc["group"] == {"default": {"targets": ["blackwell", "hopper", "legacy"]}}
    hopper = doc["target"]["hopper"]
    assert hopper["dockerfile"] == "Dockerfile.hopper" and hopper["context"] == "." and hopper["platforms"] == ["linux/amd64"]
    if registry:
        assert hopper["cache-from"] == ["type=registry,ref=ghcr.io/acme/fleet:buildcache-hopper",
                                        "type=registry,ref=ghcr.io/acme/fleet:buildcache-blackwell"]
        assert hopper["cache-to"] == ["type=registry,ref=ghcr.io/acme/fleet:buildcache-hopper,mode=max"]
    else:
        assert "cache-from" not in hopper and "cache-to" not in hopper


def test_golden_bake_files_match_the_schema():
    golden = sorted((FIXTURES / "golden").glob("*/docker-bake.json"))
    assert len(golden) == 4
    for g in golden:
        assert schema_errors(json.loads(g.read_text()), SCHEMA) == [], g


def test_schema_check_catches_broken_bake_files(fleet):
    doc = bake_data(load_ci_project(fleet), None)
    doc["target"]["hopper"]["tags"] = "fleet:latest"
    doc["target"]["hopper"]["dockerfiles"] = "Dockerfile.hopper"
    doc["target"]["legacy"]["cache-to"] = ["type=registry ref=x"]
    doc["target"]["bad.name"] = {"dockerfile": "Dockerfile.gone"}
    doc["group"]["default"]["targets"].append("volta")
    doc["group"]["all"] = {"target": ["hopper"]}
    assert sorted(bake_problems(doc, fleet)) == sorted([
        "$.group.all: 'targets' is required",
        "$.group.all: unknown attribute 'target'",
        "$.target.hopper.tags: expected array",
        "$.target.hopper: unknown attribute 'dockerfiles'",
        "$.target.legacy.cache-to[0]: matches no alternative",
        "$.target: name 'bad.name' does not match ^[a-zA-Z0-9_-]+$",
        "group default: no target 'volta'",
        "target bad.name: no Dockerfile.gone",
    ])


def test_schema_is_valid_json_schema_where_jsonschema_is_installed(fleet):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (not an envman dependency)")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    doc = bake_data(load_ci_project(fleet), parse_registry("ghcr.io/acme"))
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)


def buildx_missing() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed"
    try:
        out = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker buildx does not answer: {exc}"
    return None if out.returncode == 0 else "docker buildx is not installed (the docker CLI here has no buildx plugin)"


@pytest.mark.skipif(buildx_missing() is not None, reason=str(buildx_missing()))
@pytest.mark.parametrize("registry", [None, "ghcr.io/acme"])
def test_buildx_bake_print_reads_the_file(fleet, registry):
    p = load_ci_project(fleet)
    write_ci_files(fleet, bake_files(p, CiOptions(parse_registry(registry))), force=False)
    out = subprocess.run(["docker", "buildx", "bake", "--print", "-f", BAKE_FILE], cwd=fleet, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["group"]["default"]["targets"] == ["blackwell", "hopper", "legacy"]
    want = bake_data(p, parse_registry(registry))["target"]
    for name, target in printed["target"].items():
        assert target["dockerfile"] == want[name]["dockerfile"] and target["tags"] == want[name]["tags"]
        assert target["labels"] == want[name]["labels"]
        if registry:  # buildx prints cache entries as objects or strings depending on its version
            assert len(target["cache-from"]) == len(want[name]["cache-from"])


# --- the GPU-generation example, on today's resolver -------------------------------------------------


def lock_profile(root: Path, matrix, profile: str, targets: list[str], driver: str | None = None) -> None:
    res = resolve_stack(matrix, build_request(matrix, framework="torch", python="3.11", targets=targets, driver=driver))
    from envman.lockedstack import BaseImage, LockedStack

    lock = build_lock(LockedStack(name="fleet", inputs_hash="0" * 64, res=res, base=BaseImage(res.base_image, res.base_kind),
                                  profile=profile))
    (root / f"envman.{profile}.lock").write_text(render_lock(lock))
    (root / f"Dockerfile.{profile}").write_text(f"FROM {res.base_image}\n")


def test_blackwell_and_volta_need_two_stacks_hopper_cards_share_one(tmp_path, matrix):
    split = tmp_path / "split"
    split.mkdir()
    lock_profile(split, matrix, "blackwell", ["rtx-5090"])  # sm_120: only CUDA 12.8+ builds carry it
    lock_profile(split, matrix, "volta", ["v100"], ">=535")  # sm_70: dropped from the CUDA 13 builds
    p = load_ci_project(split)
    doc = bake_data(p, parse_registry("ghcr.io/acme"))
    assert bake_problems(doc, split) == []
    assert sorted(doc["target"]) == ["blackwell", "volta"]
    assert doc["target"]["blackwell"]["dockerfile"] == "Dockerfile.blackwell"
    stacks = shared_stacks(p)
    assert [names for names, _ in stacks] == [["blackwell"], ["volta"]]  # they do not share
    assert doc["target"]["volta"]["cache-from"] == ["type=registry,ref=ghcr.io/acme/fleet:buildcache-volta"]

    hopper = tmp_path / "hopper"
    hopper.mkdir()
    lock_profile(hopper, matrix, "h100", ["h100"])
    lock_profile(hopper, matrix, "h200", ["h200"])
    p = load_ci_project(hopper)
    assert len({i.lock_hash for i in p.images}) == 2  # two images …
    assert [names for names, _ in shared_stacks(p)] == [["h100", "h200"]]  # … of one stack
    doc = bake_data(p, parse_registry("ghcr.io/acme"))
    assert doc["target"]["h200"]["cache-from"] == ["type=registry,ref=ghcr.io/acme/fleet:buildcache-h200",
                                                   "type=registry,ref=ghcr.io/acme/fleet:buildcache-h100"]


def test_ci_reads_what_envman_lock_writes_for_profiles(tmp_path, capsys):
    """The contract with `envman lock`: envman.P.lock + Dockerfile.P per profile, read back by `envman ci`."""
    from envman.app.generate import generate
    from envman.cli.main import main
    from envman.project.spec import load_spec

    (tmp_path / "envman.yaml").write_text(
        "name: fleet\nframework: torch\npython: '3.11'\n"
        "profiles:\n  blackwell: {targets: [rtx-5090]}\n  hopper: {targets: [h100, h200]}\n"
        "  legacy: {targets: [v100], driver: '>=535'}\n")
    generate(tmp_path, load_spec(tmp_path), no_lock=True)
    assert main(["ci", "bake", str(tmp_path), "--registry", "ghcr.io/acme"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  blackwell, hopper: torch \S+ cu13\d, CUDA 13\.\d, Python 3\.11, base \S+ \(shared: ", out, re.M)
    assert re.search(r"^  legacy: torch \S+ cu12\d, CUDA 12\.\d, Python 3\.11, base \S+$", out, re.M)
    doc = json.loads((tmp_path / BAKE_FILE).read_text())
    assert bake_problems(doc, tmp_path) == []
    assert main(["ci", "check", str(tmp_path)]) == 0
