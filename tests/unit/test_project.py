"""init / lock / lock --check on sample repositories, offline (uv against PyPI for real: tests/network/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envman.app.init import InitOptions, init_project
from envman.app.lock import lock_project
from envman.cli.main import main
from envman.errors import UsageError

REPOS = Path(__file__).resolve().parent.parent / "fixtures" / "repos"


@pytest.fixture
def repo(tmp_path):
    def make(name: str) -> Path:
        d = tmp_path / name
        shutil.copytree(REPOS / name, d)
        return d

    return make


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_init_no_lock_detects_requirements_and_is_idempotent(repo):
    d = repo("torch-repo")
    out = init_project(d, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    assert out.spec_created and str(out.resolution.version) == "2.14.1"
    assert "framework constraint from the repository: torch>=2.3" in out.notes
    spec = (d / "envman.yaml").read_text()
    assert "framework: torch>=2.3" in spec and "- requirements.txt" in spec
    for f in ("Dockerfile", ".dockerignore", "compose.yaml", ".devcontainer/devcontainer.json", "envman.lock"):
        assert (d / f).is_file(), f
    before = snapshot(d)
    again = init_project(d, InitOptions(no_lock=True))
    assert again.written == [] and snapshot(d) == before


def test_pyproject_and_environment_yml_discovery(repo):
    out = init_project(repo("pyproject-repo"), InitOptions(targets=("a100",), no_lock=True))
    assert out.resolution.framework == "torch" and str(out.resolution.version).startswith("2.14")
    assert "found dependencies in: pyproject.toml [project]" in out.notes
    out = init_project(repo("conda-repo"), InitOptions(targets=("a100",), no_lock=True))
    assert out.resolution.framework == "tensorflow" and str(out.resolution.version) == "2.15.1"
    assert out.resolution.python == "3.11"


def test_user_edited_file_is_not_overwritten_without_force(repo):
    d = repo("torch-repo")
    init_project(d, InitOptions(targets=("h100",), no_lock=True))
    df = d / "Dockerfile"
    df.write_text(df.read_text() + "RUN echo mine\n")
    (d / "envman.yaml").write_text((d / "envman.yaml").read_text().replace("- h100", "- a100"))
    before = snapshot(d)
    with pytest.raises(UsageError) as exc:
        init_project(d, InitOptions(no_lock=True))
    assert exc.value.message == "would overwrite Dockerfile (edited by hand)"
    assert snapshot(d) == before  # nothing half-written
    init_project(d, InitOptions(no_lock=True, force=True))
    assert "RUN echo mine" not in df.read_text()


def test_existing_spec_refuses_conflicting_flags(repo):
    d = repo("torch-repo")
    init_project(d, InitOptions(targets=("h100",), no_lock=True))
    with pytest.raises(UsageError) as exc:
        init_project(d, InitOptions(targets=("v100",), no_lock=True))
    assert exc.value.message == "envman.yaml exists; --target would be ignored"


def test_contradicting_requirement_names_both_sides(repo):
    d = repo("torch-repo")
    (d / "requirements.txt").write_text("torch==2.3.0\n")
    init_project(d, InitOptions(targets=("rtx-5090",), no_lock=True, framework="torch>=2.7"))
    # envman.yaml is the single source of truth: a requirements line that contradicts it is refused at lock time…
    spec = (d / "envman.yaml").read_text().replace("framework_wins: true\n", "")
    (d / "envman.yaml").write_text(spec)
    with pytest.raises(UsageError) as exc:
        lock_project(d)
    assert exc.value.message == "requirements.txt:1: asks for torch==2.3.0, but the stack pins torch 2.14.1 (cu130)"


def test_the_command_lines_framework_decides_over_the_repositorys_pin(repo):
    """…unless init's --framework chose against it (issue 20, pattern 1): the line yields to the stack, said."""
    d = repo("torch-repo")
    (d / "requirements.txt").write_text("torch==2.3.0\n")
    out = init_project(d, InitOptions(targets=("rtx-5090",), no_lock=True, framework="torch>=2.7"))
    assert str(out.resolution.version) == "2.14.1" and "framework_wins: true" in (d / "envman.yaml").read_text()
    assert ("requirements.txt:1: torch==2.3.0 yields to the stack's torch 2.14.1 (cu130) (framework_wins: true in "
            "envman.yaml)") in out.notes


def test_cli_init_error_is_one_line_without_traceback(repo, capsys):
    d = repo("torch-repo")
    rc = main(["init", str(d), "--target", "h1000", "--no-lock"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.splitlines()[0] == "error: unknown GPU 'h1000'"
    assert err.splitlines()[1].startswith("hint: did you mean") and "Traceback" not in err
    assert not (d / "envman.yaml").exists()


def test_variant_index_pins_local_version_and_passes_the_index(matrix, tmp_path):
    # download.pytorch.org is not reachable from CI, so this checks what envman hands to uv.
    from envman.lock.pins import framework_pins
    from envman.lock.uv import uv_compile_command
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="torch==2.6.*", targets=["a100"], cuda="12.6", python="3.11"))
    assert res.variant == "cu126" and res.index_url == "https://download.pytorch.org/whl/cu126"
    assert framework_pins(res, ("torchvision",)) == ["torch==2.6.0+cu126", "torchvision==0.21.0+cu126"]
    cmd = uv_compile_command(tmp_path / "in.txt", tmp_path / "out.txt", res.python, [res.index_url])
    # any index but PyPI reaches uv through its environment (issue 24: a token may be in an index's path)
    assert "--extra-index-url" not in cmd.args and cmd.secret_env == {"UV_EXTRA_INDEX_URL": res.index_url}
    assert cmd.args[cmd.args.index("--python-platform") + 1] == "x86_64-manylinux_2_28"
    assert "--generate-hashes" in cmd.args


def test_profiles_write_one_lock_and_dockerfile_each_and_say_which_share(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text(
        "name: fleet\nframework: torch\npython: '3.11'\npackages: [numpy]\n"
        "profiles:\n  blackwell: {targets: [rtx-5090]}\n  hopper: {targets: [h100, h200]}\n"
        "  legacy: {targets: [v100], driver: '>=535'}\n"
    )
    out = lock_project_no_network(tmp_path)
    for p in ("blackwell", "hopper", "legacy"):
        assert (tmp_path / f"Dockerfile.{p}").is_file() and (tmp_path / f"envman.{p}.lock").is_file()
        assert f"COPY .envman/stack.{p}.json /opt/envman/stack.json" in (tmp_path / f"Dockerfile.{p}").read_text()
    assert not (tmp_path / "envman.lock").exists()
    locks = {p: json.loads((tmp_path / f"envman.{p}.lock").read_text()) for p in ("blackwell", "hopper", "legacy")}
    assert locks["blackwell"]["stack"]["framework"]["variant"] == "cu130"
    assert locks["legacy"]["stack"]["framework"]["variant"] == "cu126"  # Volta is not in cu13x builds
    assert "profiles blackwell, hopper share one stack (their images differ only in labels)" in out.notes
    import yaml

    compose = yaml.safe_load((tmp_path / "compose.yaml").read_text())
    assert set(compose["services"]) == {"train-blackwell", "train-hopper", "train-legacy"}
    assert compose["services"]["train-legacy"]["build"]["dockerfile"] == "Dockerfile.legacy"


def lock_project_no_network(root: Path):
    from envman.app.generate import generate
    from envman.project.spec import load_spec

    return generate(root, load_spec(root), no_lock=True)


def test_tool_envman_in_pyproject_is_the_spec(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "0"\n\n[tool.envman]\nname = "from-pyproject"\nframework = "torch==2.7.*"\n'
        'targets = ["rtx-5090"]\npython = "3.11"\n'
    )
    out = lock_project_no_network(tmp_path)
    assert out.lock["name"] == "from-pyproject" and out.resolution.variant == "cu128"
    (tmp_path / "pyproject.toml").write_text('[tool.envman]\nname = "x"\ntargts = ["h100"]\n')
    with pytest.raises(UsageError) as exc:
        lock_project_no_network(tmp_path)
    assert exc.value.message == "pyproject.toml [tool.envman]: targts: unknown key"
    (tmp_path / "pyproject.toml").write_text("[tool.envman\n")
    with pytest.raises(UsageError) as exc:
        lock_project_no_network(tmp_path)
    assert exc.value.message.startswith("pyproject.toml: invalid TOML")

