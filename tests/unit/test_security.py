"""Issue #12: no credential in a file envman writes, a message it prints or a build context it sends; every
value from any source is validated alike; no write is led outside the project by a symbolic link."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

import envman.lock.registry
import envman.lock.uv
from envman.app.build import BuildOptions, build_project
from envman.app.init import InitOptions, init_project
from envman.cli.main import main
from envman.errors import ToolError, UsageError
from envman.image.context import context_secrets
from envman.image.render import render_dockerignore
from envman.redact import is_credential_file, redact
from tests import corpus

REPOS = Path(__file__).resolve().parent.parent / "fixtures" / "repos"
TOKEN = "TOKEN"
HASH = "a" * 64


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# --- redaction ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("url,want", [
    ("https://bob:TOKEN@host/simple", "https://host/simple"),
    ("https://TOKEN@host:8443/simple/", "https://host:8443/simple/"),
    ("https://bob:p@ss@host/simple", "https://host/simple"),
    ("https://host/simple", "https://host/simple"),
    ("git+https://bob:TOKEN@github.com/o/r.git@v1", "git+https://github.com/o/r.git@v1"),
    ("not a url", "not a url"),
])
def test_redact_url(url, want):
    assert redact(url) == want


def test_redact_text_keeps_everything_but_userinfo():
    text = "--index-url https://bob:TOKEN@host/simple\n--extra-index-url=http://x:y@h2/s x@y.z 'https://t@h3/'"
    assert redact(text) == "--index-url https://host/simple\n--extra-index-url=http://h2/s x@y.z 'https://h3/'"


# --- item 1: an index token never lands in a generated file ---------------------------------------------

UV_OUT = f"""--index-url https://bob:{TOKEN}@host.example/simple
--extra-index-url https://download.pytorch.org/whl/cpu

numpy==2.1.0 \\
    --hash=sha256:{HASH}
    # via -r requirements.in
"""
PYLOCK = f"""lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "2.1.0"
index = "https://bob:{TOKEN}@host.example/simple"
wheels = [{{ url = "https://bob:{TOKEN}@host.example/files/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{HASH}" }} }}]
"""


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!{sys.executable}\nimport os, sys\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def fake_uv(tmp_path_factory, monkeypatch):
    """uv as it answers with UV_INDEX_URL=https://bob:TOKEN@host.example/simple (pylock.toml names the index and
    every file's URL with it). It logs the UV_INDEX_URL it was given."""
    from fakes import install_fake_uv

    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    monkeypatch.setenv("UV_INDEX_URL", f"https://bob:{TOKEN}@host.example/simple")
    return install_fake_uv(monkeypatch, tmp_path_factory.mktemp("uv"), PYLOCK, "UV_INDEX_URL")


def test_index_token_never_lands_in_a_generated_file(tmp_path, fake_uv, capsys):
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nframework: none\npackages: [numpy]\n")
    assert main(["lock", str(tmp_path)]) == 0
    # the credential reaches uv through its environment, untouched
    seen = fake_uv.read_text().split()
    assert seen and all(u == f"https://bob:{TOKEN}@host.example/simple" for u in seen)
    files = snapshot(tmp_path)
    assert {"requirements.lock.txt", "pylock.toml", "envman.lock", "Dockerfile", "compose.yaml", ".dockerignore"} <= set(files)
    leaks = [name for name, data in files.items() if TOKEN.encode() in data]
    assert leaks == []
    # a private index is named, its URL supplied at build time (issue 24)
    assert "--index-url ${ENVMAN_INDEX_HOST_EXAMPLE}/simple" in (tmp_path / "requirements.lock.txt").read_text()
    assert 'index = "${ENVMAN_INDEX_HOST_EXAMPLE}/simple"' in (tmp_path / "pylock.toml").read_text()
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err


def test_uv_error_output_is_redacted(tmp_path):
    from envman.lock.uvproc import UvRun

    exe = _script(tmp_path / "failing-uv", f"sys.stderr.write('error: Failed to fetch: `https://bob:{TOKEN}@host.example"
                                           "/simple/numpy/`\\n  Caused by: 401\\n')\nsys.exit(2)\n")
    with pytest.raises(ToolError) as exc:
        UvRun([exe], dict(os.environ), str(tmp_path)).wait()
    assert TOKEN not in exc.value.message + (exc.value.hint or "")
    assert "https://host.example/simple/numpy/" in exc.value.message

def test_index_option_in_requirements_is_kept_for_uv_and_never_written(tmp_path, capsys, monkeypatch):
    """Issue 24: a private index in requirements.txt is honoured whole — its token reaches uv, through uv's
    environment (before, it was cut and the lock failed with "six was not found") — and nothing envman writes
    or prints holds it: envman.yaml names requirements.txt, which the lock reads again."""
    from fakes import install_fake_uv

    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    monkeypatch.delenv("UV_INDEX_URL", raising=False)
    (tmp_path / "requirements.txt").write_text(f"--index-url=https://bob:{TOKEN}@host/simple\nnumpy\n")
    assert main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"]) == 0
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    assert "index_urls" not in yaml.safe_load((tmp_path / "envman.yaml").read_text())
    (tmp_path.parent / "uv").mkdir()
    seen = install_fake_uv(monkeypatch, tmp_path.parent / "uv", PYLOCK.replace("bob:TOKEN@", ""), "UV_EXTRA_INDEX_URL")
    assert main(["lock", str(tmp_path)]) == 0
    assert seen.read_text().split() == [f"https://bob:{TOKEN}@host/simple"]  # uv was given the token
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "requirements.txt"]
    assert written and not [p for p in written if TOKEN in p.read_text(errors="replace")]
    assert "--extra-index-url ${ENVMAN_INDEX_HOST}/simple" in (tmp_path / "requirements.lock.txt").read_text()


# --- issue 24: a token in an index's path (Gemfury, Cloudsmith) --------------------------------------------

PATH_TOKEN = "PATHTOKEN0123456789"
FURY = f"https://pypi.fury.io/{PATH_TOKEN}/acme/"
FURY_PYLOCK = f"""lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "2.1.0"
index = "{FURY}"
wheels = [{{ url = "https://pypi.fury.io/{PATH_TOKEN}/acme/-/ver_1x/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{HASH}" }} }}]
"""


@pytest.fixture
def fury_locked(tmp_path, tmp_path_factory, monkeypatch):
    from fakes import install_fake_uv

    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    monkeypatch.setenv("UV_INDEX_URL", FURY)
    seen = install_fake_uv(monkeypatch, tmp_path_factory.mktemp("uv"), FURY_PYLOCK, "UV_INDEX_URL")
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nframework: none\npackages: [numpy]\n")
    assert main(["lock", str(tmp_path)]) == 0
    return tmp_path, seen


def test_a_token_in_an_index_path_is_named_in_the_lock_never_written(fury_locked, capsys):
    d, seen = fury_locked
    assert seen.read_text().split() == [FURY]
    files = snapshot(d)
    assert [n for n, data in files.items() if PATH_TOKEN.encode() in data] == []
    assert capsys.readouterr().out.count(PATH_TOKEN) == 0
    req = (d / "requirements.lock.txt").read_text()
    assert "--index-url ${ENVMAN_INDEX_PYPI_FURY_IO}/\n" in req
    pylock = (d / "pylock.toml").read_text()
    assert 'index = "${ENVMAN_INDEX_PYPI_FURY_IO}/"' in pylock
    assert 'url = "${ENVMAN_INDEX_PYPI_FURY_IO}/-/ver_1x/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"' in pylock
    dockerfile = (d / "Dockerfile").read_text()
    assert "--mount=type=secret,id=envman_indexes" in dockerfile
    assert "if [ -s /run/secrets/envman_indexes ]; then . /run/secrets/envman_indexes; fi && " in dockerfile
    # a re-lock is current (uv was seeded with the real URLs), and lock --check agrees
    assert main(["lock", str(d)]) == 0 and main(["lock", str(d), "--check"]) == 0


def test_the_build_gets_the_private_index_as_a_secret_and_refuses_without_it(fury_locked, monkeypatch, capsys):
    from fakes import FakeEngine

    from envman.app import smoke as smoke_runner

    d, _ = fury_locked
    monkeypatch.setattr(smoke_runner, "host_has_nvidia_gpu", lambda: False)
    engine = FakeEngine()
    lines: list[str] = []
    build_project(d, BuildOptions(smoke=False), lines.append, engine=engine)
    (secrets,) = engine.secrets
    assert secrets["envman_indexes"] == f"export ENVMAN_INDEX_PYPI_FURY_IO=https://pypi.fury.io/{PATH_TOKEN}/acme\n"
    assert not [ln for ln in lines if PATH_TOKEN in ln]
    assert "the private indexes the lock names go to the build as a BuildKit secret (never a layer)" in lines
    # a tty build client draws pip's `Looking in indexes:` past redact: with a private index the log is plain
    assert engine.builds[-1]["progress"] == "plain"
    assert "the lock names a private index: the build's log is plain, so envman redacts every line of it" in lines
    build_project(d, BuildOptions(smoke=False, rebuild=True, progress="tty"), lines.append, engine=engine)
    assert engine.builds[-1]["progress"] == "tty"  # what the user asked for by name stands
    # without the variable the lock was made with, the build is refused before it starts, naming it
    monkeypatch.delenv("UV_INDEX_URL")
    assert main(["build", str(d), "--rebuild", "--no-smoke"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("error: requirements.lock.txt names the private index ENVMAN_INDEX_PYPI_FURY_IO, whose URL "
                      "this run was not given")
    assert err[1].startswith("hint: set ENVMAN_INDEX_PYPI_FURY_IO to its URL")
    # ... and the variable itself is enough
    monkeypatch.setenv("ENVMAN_INDEX_PYPI_FURY_IO", FURY.rstrip("/"))
    build_project(d, BuildOptions(smoke=False, rebuild=True), lines.append, engine=engine)
    assert PATH_TOKEN in engine.secrets[-1]["envman_indexes"]


def test_a_private_index_url_that_leaks_through_another_host_is_refused(tmp_path, monkeypatch):
    """The last check: a file URL on another host (a CDN) carrying the index's token is never written."""
    from envman.errors import ToolError
    from envman.lock.indexes import check_unleaked, private_indexes

    (idx,) = private_indexes([FURY])
    with pytest.raises(ToolError) as exc:
        check_unleaked({"pylock.toml": f'url = "https://cdn.example/{PATH_TOKEN}/numpy.whl"'}, [idx])
    assert exc.value.message == "pylock.toml would hold part of the private index pypi.fury.io's URL"
    assert PATH_TOKEN not in exc.value.message + (exc.value.hint or "")


def test_spec_values_are_echoed_without_token():
    from envman.project.spec import parse_spec

    with pytest.raises(UsageError) as exc:
        parse_spec({"name": "demo", "cpu": True, "packages": [f"pkg @ https://bob:{TOKEN}@host/p.whl"]})
    assert TOKEN not in exc.value.message and "https://host/p.whl" in exc.value.message


def test_error_boundary_redacts_any_message(capsys):
    from envman.cli.main import report_error

    assert report_error(UsageError(f"cannot reach https://u:{TOKEN}@h/x", hint=f"try https://u:{TOKEN}@h/y")) == 1
    err = capsys.readouterr().err
    assert TOKEN not in err and err == "error: cannot reach https://h/x\nhint: try https://h/y\n"


# --- item 3: the build context ships no credentials --------------------------------------------------

SECRETS = [".env", ".env.local", "sub/.netrc", ".pypirc", "pip.conf", "certs/server.pem", "tls.key", "id_ed25519",
           "deploy/id_rsa", ".aws/credentials", ".docker/config.json", ".kube/config", "prod.kubeconfig",
           ".git-credentials", ".config/gcloud/application_default_credentials.json", ".azure/accessTokens.json"]


def _tree(root: Path, names) -> None:
    for n in names:
        (root / n).parent.mkdir(parents=True, exist_ok=True)
        (root / n).write_text("x")


def test_credential_names():
    for n in SECRETS:
        assert is_credential_file(n), n
    for n in ("train.py", ".env.example", "id_ed25519.pub", "uv.toml", "keys.py", "docs/pem.md"):
        assert not is_credential_file(n), n


def test_generated_dockerignore_excludes_every_credential_file(tmp_path):
    _tree(tmp_path, SECRETS + ["train.py", ".env.example", ".Dockerfile.abcd1234.tmp"])
    text = render_dockerignore()
    assert not text.startswith("DOCKERIGNORE")
    (tmp_path / ".dockerignore").write_text(text)
    assert context_secrets(tmp_path) == []
    from envman.image.context import is_ignored, parse_dockerignore

    rules = parse_dockerignore(text)
    assert is_ignored(".Dockerfile.abcd1234.tmp", rules) and is_ignored("a/b/.lock.x.tmp", rules)
    assert not is_ignored("train.py", rules) and not is_ignored(".env.example", rules) and not is_ignored("uv.toml", rules)


def test_build_refuses_a_context_with_credentials(tmp_path):
    _tree(tmp_path, [".env", "certs/server.pem", "train.py"])
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\n")
    (tmp_path / ".dockerignore").write_text(".env\n")
    assert context_secrets(tmp_path) == ["certs/server.pem"]
    with pytest.raises(UsageError) as exc:
        build_project(tmp_path, BuildOptions(), echo=lambda s: None)
    assert exc.value.message == "the build context would ship credentials: certs/server.pem"
    assert "--allow-secrets-in-context" in exc.value.hint
    # allowed: the check is skipped, and the build goes on to its next question
    with pytest.raises(UsageError) as exc:
        build_project(tmp_path, BuildOptions(allow_secrets_in_context=True), echo=lambda s: None)
    assert exc.value.message.startswith("envman.lock: not found")


def test_the_dockerfiles_own_ignore_file_is_the_one_checked(tmp_path):
    """BuildKit reads <Dockerfile>.dockerignore when it exists (envman writes Dockerfile.envman.dockerignore
    beside a repository's own .dockerignore): the credential check reads the same file."""
    _tree(tmp_path, ["certs/server.pem", "train.py"])
    (tmp_path / ".dockerignore").write_text("data\n")  # the repository's own, which lets the key through
    (tmp_path / "Dockerfile.envman.dockerignore").write_text("**/*.pem\n")
    assert context_secrets(tmp_path) == ["certs/server.pem"]
    assert context_secrets(tmp_path, "Dockerfile.envman") == []


# Issue 24: the ML world's tokens, by name and (where the name says nothing) by content
ML_SECRETS = [".huggingface/token", ".cache/huggingface/token", "kaggle.json", ".kaggle/kaggle.json", ".envrc",
              "sub/.envrc", ".npmrc", ".streamlit/secrets.toml", "netrc"]
SA_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuic"
BY_CONTENT = {
    "gcp/trainer-sa.json": '{"type": "service_account", "project_id": "p", "private_key_id": "0a1b",'
                           f' "private_key": "-----BEGIN PRIVATE KEY-----\\n{SA_KEY}\\n-----END PRIVATE KEY-----\\n",'
                           ' "client_email": "t@p.iam.gserviceaccount.com"}',
    "configs/wandb_login": "machine api.wandb.ai\n  login user\n  password 0123456789abcdef0123456789abcdef01234567\n",
    "deploy/key.txt": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SA_KEY}\n-----END OPENSSH PRIVATE KEY-----\n",
}
NOT_SECRETS = {
    "configs/model.json": '{"type": "service_account", "note": "no key here"}',
    "docs/keys.md": "Never commit a file that starts with -----BEGIN PRIVATE KEY-----.\n",
    "data.json": '{"private_key": false, "type": "other"}',
}


def test_ml_credential_names():
    for n in ML_SECRETS:
        assert is_credential_file(n), n
    for n in ("tokenizer.json", "huggingface/config.json", "secrets.py", "kaggle.py", ".envrc.example", "npmrc.md"):
        assert not is_credential_file(n), n


def test_credentials_found_by_content_and_name_are_refused(tmp_path):
    _tree(tmp_path, ML_SECRETS + ["train.py"])
    for name, text in {**BY_CONTENT, **NOT_SECRETS}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert context_secrets(tmp_path) == sorted(ML_SECRETS + list(BY_CONTENT))
    # the generated .dockerignore keeps every named one out; a file known only by its content is still refused
    (tmp_path / ".dockerignore").write_text(render_dockerignore())
    assert context_secrets(tmp_path) == sorted(BY_CONTENT)


# --- issue 39 cause 7: the credential files of data and cloud tools, and fixed-prefix tokens in any file ----------

DATA_SECRETS = [".s3cfg", "secrets.json", "hf_token.txt", ".pgpass", ".databrickscfg", "rclone.conf", ".vault-token",
                "credentials.json", "client_secret_1234.apps.json", ".config/gh/hosts.yml", "home/.config/gh/hosts.yml"]
OPENAI_KEY = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7jKl0nOp3rSt6vWx9z"
TOKENS_BY_CONTENT = {
    "configs/openai.json": f'{{"openai_api_key": "{OPENAI_KEY}"}}\n',
    "hub.txt": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567" + "\n",
    "deploy/aws.ini": "[default]\nkey = AKIA" + "IOSFODNN7EXAMPLE" + "\n",
    "ci/gh.env": "GH=ghp_" + "0123456789abcdefghijABCDEFGHIJ012345" + "\n",
    "notify.py": 'SLACK = "xoxb-' + '1234567890-abcdefghijkl"\n',
    ".yarnrc.yml": 'npmRegistryServer: "https://npm.example.org"\nnpmAuthToken: "NpmT0ken-abcdef123456"\n',
    ".condarc": "channels:\n  - https://conda.anaconda.org/t/" + "ab-12345678-9abc-def0-1234-56789abcdef0" + "/private\n",
    "config.json": '{"auths": {"registry.example.org": {"auth": "Ym9iOnMzY3IzdA=="}}}',
    "gh/hosts.yaml": "github.com:\n    oauth_token: gho_" + "16C7e42F292c6912E7710c838347Ae178B4a" + "\n",
    "store/.s3cfg.bak": "[default]\naccess_key = AKIAEXAMPLE\nsecret_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" + "\n",
}
TOKENS_NOT = {
    ".yarnrc.yml.example": "nodeLinker: node-modules\nnpmRegistryServer: https://registry.yarnpkg.com\n",
    "env/.condarc.d": "channels:\n  - conda-forge\n  - https://conda.anaconda.org/pytorch\n",
    "docs/faq.py": "# https://discuss.python.org/t/pip-without-setuptools-could-the-experience-be-improved/\n",
    "docker.json": '{"auths": {}, "credsStore": "desktop"}',
    "notes.md": "Use sk-learn-compatible-estimators, hf_hub_download and an AKIA key id (20 chars).\n",
    "models/config.json": '{"hidden_size": 4096, "tokenizer_class": "LlamaTokenizer"}',
}


def test_data_tool_credential_names():
    for n in DATA_SECRETS:
        assert is_credential_file(n), n
    for n in ("secrets.py", "credentials.py", "rclone.py", "hosts.yml", "config.json", "token.json", "tokenizer.json"):
        assert not is_credential_file(n), n


def test_tokens_and_token_configs_are_found_by_content_and_refused(tmp_path):
    _tree(tmp_path, DATA_SECRETS + ["train.py"])
    for name, text in {**TOKENS_BY_CONTENT, **TOKENS_NOT}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert context_secrets(tmp_path) == sorted(DATA_SECRETS + list(TOKENS_BY_CONTENT))
    (tmp_path / ".dockerignore").write_text(render_dockerignore())
    assert context_secrets(tmp_path) == sorted(TOKENS_BY_CONTENT)


def test_no_file_of_the_corpus_of_real_repositories_is_taken_for_a_credential():
    from envman.redact import CONTENT_BYTES, holds_credentials

    roots = [corpus.repo(name) for name in corpus.names()]
    files = [(root, p) for root in roots for p in root.rglob("*") if p.is_file()]
    assert len(files) > 100
    flagged = [f"{root.name}/{p.relative_to(root)}" for root, p in files
               if is_credential_file(str(p.relative_to(root))) or holds_credentials(p.read_bytes()[:CONTENT_BYTES])]
    assert flagged == []


def test_dockerignore_negation_and_folders(tmp_path):
    _tree(tmp_path, ["keys/a.pem", "keys/b.pem"])
    (tmp_path / ".dockerignore").write_text("keys\n!keys/b.pem\n")
    assert context_secrets(tmp_path) == ["keys/b.pem"]


def test_cli_build_flag_and_one_line(tmp_path, capsys):
    _tree(tmp_path, [".netrc"])
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\n")
    assert main(["build", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: the build context would ship credentials: .netrc" and err[1].startswith("hint: ")
    assert main(["build", str(tmp_path), "--allow-secrets-in-context"]) == 1
    assert capsys.readouterr().err.startswith("error: envman.lock: not found")


# --- item 4: --base-image is validated like envman.yaml's base_image ---------------------------------------

BAD_IMAGES = ["--platform=linux/arm64 python:3.11-slim", " AS x", "python:3.11 AS x", "python:3.11\\",
              "python:3.11\nRUN id", "python:3.11\r", "-x"]


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "torch-repo"
    shutil.copytree(REPOS / "torch-repo", d)
    return d


@pytest.mark.parametrize("bad", BAD_IMAGES)
@pytest.mark.parametrize("command", ["init", "lock", "build"])
def test_cli_base_image_is_validated(repo, capsys, bad, command):
    if command != "init":
        init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    before = snapshot(repo)
    extra = ["--target", "h100", "--no-lock"] if command == "init" else []
    assert main([command, str(repo), "--base-image", bad, *extra]) == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith("error: --base-image: ") and lines[1].startswith("hint: ") and len(lines) == 2, err
    assert snapshot(repo) == before


def test_valid_base_image_on_the_command_line(repo):
    out = init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True,
                                         base_image="registry.example.com:5000/python:3.11-slim"))
    assert "FROM registry.example.com:5000/python:3.11-slim" in (repo / "Dockerfile").read_text()
    assert out.spec_created


# --- item 5: a symbolic link never leads a write outside the project -------------------------------------


@pytest.mark.parametrize("link", [".devcontainer", ".envman"])
def test_symlinked_folder_out_of_the_project_is_refused(repo, tmp_path, capsys, link):
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / link).symlink_to(outside, target_is_directory=True)
    before = snapshot(repo)
    assert main(["init", str(repo), "--target", "h100", "--python", "3.11", "--no-lock"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: {link} is a symbolic link to {outside.resolve()}, outside the project", err
    assert list(outside.iterdir()) == []
    assert snapshot(repo) == before
    # --force does not lift it
    with pytest.raises(UsageError):
        init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True, force=True))
    assert list(outside.iterdir()) == []


def test_symlinked_folder_inside_the_project_is_fine(repo):
    (repo / "dc").mkdir()
    (repo / ".devcontainer").symlink_to(repo / "dc", target_is_directory=True)
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    assert (repo / "dc" / "devcontainer.json").is_file()


# --- item 7: includes outside the project, Ctrl-C, non-UTF-8 inputs -------------------------------------------


@pytest.mark.parametrize("line", ["-r /etc/passwd", "-r ../outside.txt", "--requirement ../../x.txt"])
def test_includes_outside_the_project_are_refused(tmp_path, line):
    from envman.project.sources.requirements_txt import read_requirements

    proj = tmp_path / "p"
    proj.mkdir()
    (tmp_path / "outside.txt").write_text("numpy\n")
    (proj / "requirements.txt").write_text(f"{line}\n")
    with pytest.raises(UsageError) as exc:
        read_requirements(proj, "requirements.txt")
    assert exc.value.message.endswith(": outside the project")


def test_symlinked_requirements_file_out_of_the_project_is_refused(tmp_path):
    from envman.project.sources.requirements_txt import read_requirements

    proj = tmp_path / "p"
    proj.mkdir()
    (tmp_path / "secret.txt").write_text("numpy\n")
    (proj / "requirements.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(UsageError) as exc:
        read_requirements(proj, "requirements.txt")
    assert exc.value.message == "requirements.txt: outside the project"


@pytest.mark.parametrize("name,content", [
    ("envman.yaml", b"name: d\xe9mo\ncpu: true\n"),
    ("requirements.txt", b"numpy\nd\xe9mo\n"),
])
def test_non_utf8_input_is_one_error_line(tmp_path, capsys, name, content):
    if name != "envman.yaml":
        (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nrequirements: [requirements.txt]\n")
    (tmp_path / name).write_bytes(content)
    assert main(["lock", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    at = content.index(bytes([0xE9]))
    assert err == [f"error: {name}: not UTF-8 text (byte {at})", "hint: save it as UTF-8"]


def test_ctrl_c_is_one_error_line(tmp_path, capsys, monkeypatch):
    import signal

    import envman.app.lock

    def interrupted(*a, **k):
        # raise_signal interrupts this thread (os.kill may deliver it to another one, and the handler run late)
        signal.raise_signal(signal.SIGINT)
        raise AssertionError("not interrupted")

    monkeypatch.setattr(envman.app.lock, "lock_project", interrupted)
    # a suite started in the background inherits SIGINT ignored (a shell's `&`): Python's own handler, as a user has
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(["lock", str(tmp_path)]) == 130
        assert capsys.readouterr().err == "error: interrupted\n"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_ci_envman_spec_with_a_token_is_refused():
    from envman.ci.install import envman_install

    with pytest.raises(UsageError) as exc:
        envman_install(Path("."), f"envman @ https://bob:{TOKEN}@files.example.com/envman-0.1.0-py3-none-any.whl", None, None)
    assert TOKEN not in exc.value.message and "carries credentials" in exc.value.message


def test_fetch_gives_pip_the_private_index_by_its_name(fury_locked, monkeypatch):
    """`envman fetch` runs pip download on requirements.lock.txt, whose ${ENVMAN_INDEX_…} pip expands: the
    variable comes from where the lock found the index, for pip's environment only."""
    import envman.lock.wheelhouse as wh

    d, _ = fury_locked
    seen = {}

    def fake_pip(argv, on_output, extra_env=None):
        seen.update(extra_env or {})
        req = open(argv[argv.index("--requirement") + 1]).read()
        seen["requirements"] = req
        return 1, ["stop here"]

    monkeypatch.setattr(wh, "_run_pip", fake_pip)
    assert main(["fetch", str(d)]) == 1
    assert seen["ENVMAN_INDEX_PYPI_FURY_IO"] == f"https://pypi.fury.io/{PATH_TOKEN}/acme"
    assert "--index-url ${ENVMAN_INDEX_PYPI_FURY_IO}/" in seen["requirements"]
