"""How a generated pipeline installs envman (envman/ci/install.py): from where the user's envman really comes, never
an unpublished name from the public index. Each install source of PEP 610's direct_url.json, the explicit sources
(envman.yaml's ci:, --envman-spec/--envman-index), and the refusals with their hints."""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.ci.install import GIT_APT, EnvmanInstall, Origin, envman_install, installed_origin, read_settings
from envman.cli.main import main
from envman.errors import SpecError, UsageError

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "ci" / "projects"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
WHERE = ("say where CI gets envman: `ci: {envman: vendor/envman-V-py3-none-any.whl}` (a wheel committed to the "
         "repository), `ci: {envman: 'envman @ git+https://HOST/envman@COMMIT'}` or `ci: {index_url: "
         "https://INDEX/simple}` in envman.yaml (or --envman-spec / --envman-index)")


@pytest.fixture
def project(tmp_path) -> Path:
    d = tmp_path / "single"
    shutil.copytree(PROJECTS / "single", d)
    return d


def wheel(project: Path, rel: str = "vendor/envman-0.2.0-py3-none-any.whl") -> tuple[str, str]:
    path = project / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04 not really a wheel")
    return rel, hashlib.sha256(path.read_bytes()).hexdigest()


def refused(*args, **kw) -> UsageError:
    with pytest.raises(UsageError) as exc:
        envman_install(*args, **kw)
    return exc.value


# --- detected: how this envman was installed (PEP 610) ------------------------------------------------------------


def test_a_git_install_is_repeated_at_its_commit(project):
    origin = Origin("0.2.0", {"url": "https://git.example.com/acme/envman.git",
                              "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "main"}})
    got = envman_install(project, None, None, origin)
    assert got == EnvmanInstall(
        (f"python -m pip install 'envman @ git+https://git.example.com/acme/envman.git@{COMMIT}'",),
        f"https://git.example.com/acme/envman.git@{COMMIT}", needs_git=True)


def test_a_git_install_from_a_local_clone_is_refused(project):
    origin = Origin("0.2.0", {"url": "file:///home/me/envman", "vcs_info": {"vcs": "git", "commit_id": COMMIT}})
    err = refused(project, None, None, origin)
    assert (err.message, err.hint) == ("this envman was installed from the git repository file:///home/me/envman, "
                                       "which CI cannot reach", WHERE)


def test_a_wheel_in_the_repository_is_installed_after_its_sha256_is_checked(project):
    rel, sha = wheel(project)
    origin = Origin("0.2.0", {"url": (project / rel).as_uri(), "archive_info": {"hashes": {"sha256": sha}}})
    got = envman_install(project, None, None, origin)
    assert got.lines == (f"echo '{sha}  {rel}' | sha256sum --check --strict -", f"python -m pip install ./{rel}")
    assert got.source == f"the wheel {rel} in the repository (sha256 {sha[:12]}…)"
    (project / rel).write_bytes(b"another wheel")
    err = refused(project, None, None, origin)
    assert err.message == f"{rel}: its sha256 is not that of the wheel this envman was installed from"


def test_a_wheel_outside_the_repository_is_refused(project, tmp_path):
    outside = tmp_path / "dist" / "envman-0.2.0-py3-none-any.whl"
    origin = Origin("0.2.0", {"url": outside.as_uri(), "archive_info": {}})
    err = refused(project, None, None, origin)
    assert (err.message, err.hint) == (f"this envman was installed from {outside.as_uri()}, which CI cannot reach "
                                       "(not a wheel in the repository)", WHERE)


def test_an_https_wheel_is_pinned_by_its_hash(project):
    url = "https://files.example.com/envman-0.2.0-py3-none-any.whl"
    origin = Origin("0.2.0", {"url": url, "archive_info": {"hashes": {"sha256": "a" * 64}}})
    assert envman_install(project, None, None, origin).lines == (
        f"python -m pip install 'envman @ {url}#sha256={'a' * 64}'",)


def test_an_editable_checkout_elsewhere_is_refused(project):
    origin = Origin("0.2.0", {"url": "file:///home/me/envman", "dir_info": {"editable": True}})
    err = refused(project, None, None, origin)
    assert (err.message, err.hint) == (
        "this envman runs from the local folder file:///home/me/envman (editable), which CI cannot reach", WHERE)


def test_a_folder_inside_the_repository_is_installed_from_there(project):
    (project / "tools" / "envman").mkdir(parents=True)
    origin = Origin("0.2.0", {"url": (project / "tools" / "envman").as_uri(), "dir_info": {}})
    assert envman_install(project, None, None, origin).lines == ("python -m pip install ./tools/envman",)


def test_an_install_from_an_unnamed_index_is_refused_and_a_named_one_is_used(project):
    err = refused(project, None, None, Origin("0.2.0", None))
    assert (err.message, err.hint) == ("this envman 0.2.0 was installed from a package index envman cannot see, and "
                                       "none is published on the public one (pypi.org)", WHERE)
    got = envman_install(project, None, "https://pypi.example.com/simple", Origin("0.2.0", None))
    assert got.lines == ("python -m pip install --index-url https://pypi.example.com/simple envman==0.2.0",)


def test_envman_not_installed_at_all_is_refused(project):
    err = refused(project, None, None, None)
    assert err.message == "envman is not installed as a package here, so there is no install to repeat in CI"


def test_this_checkout_is_a_local_folder_install_that_ci_cannot_reach(project, capsys):
    """The envman running these tests was installed from the checkout (`pip install -e .` as .ci/run does, or
    `pip install .` as a fresh venv may): `envman ci github` in another folder used to write
    `pip install envman==0.2.0`, a name no index serves; now it says where to set the source."""
    origin = installed_origin()
    assert origin is not None and origin.direct_url is not None and "dir_info" in origin.direct_url
    checkout = origin.direct_url["url"]
    editable = " (editable)" if origin.direct_url["dir_info"].get("editable") else ""
    assert main(["ci", "github", str(project)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: this envman runs from the local folder {checkout}{editable}, which CI cannot reach", f"hint: {WHERE}"]
    assert not (project / ".github").exists()


# --- explicit: envman.yaml's ci:, --envman-spec, --envman-index ---------------------------------------------------


def test_envman_yaml_names_a_wheel_in_the_repository(project, capsys):
    rel, sha = wheel(project)
    (project / "envman.yaml").write_text("name: demo\n" + f"ci:\n  envman: {rel}\n")
    assert main(["ci", "github", str(project)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"envman: the pipeline installs the wheel {rel} in the repository (sha256 {sha[:12]}…)" in out
    wf = yaml.safe_load((project / ".github/workflows/envman.yml").read_text())
    assert wf["jobs"]["check"]["steps"][2]["run"] == (f"echo '{sha}  {rel}' | sha256sum --check --strict -\n"
                                                      f"python -m pip install ./{rel}")


def test_the_option_wins_over_envman_yaml_and_the_index_comes_from_either(project, capsys):
    (project / "envman.yaml").write_text("name: demo\n"
                                         + "ci: {envman: vendor/none.whl, index_url: 'https://pypi.example.com/simple'}\n")
    assert main(["ci", "gitlab", str(project), "--envman-spec", "envman==0.2.0"]) == 0
    doc = yaml.safe_load((project / ".gitlab-ci.yml").read_text())
    assert doc["envman-check"]["script"][0] == (
        "python -m pip install --index-url https://pypi.example.com/simple envman==0.2.0")
    assert "envman: the pipeline installs envman==0.2.0 from https://pypi.example.com/simple" in capsys.readouterr().out


def test_a_name_without_an_index_is_refused(project, capsys):
    err = refused(project, "envman==0.2.0", None, None)
    assert (err.message, err.hint) == (
        "--envman-spec: 'envman==0.2.0' names no source, and no envman is published on the public index (pypi.org): "
        "pip would fail there, or install whatever someone registers under the name", WHERE)
    (project / "envman.yaml").write_text("name: demo\n" + "ci: {envman: envman>=0.2}\n")
    assert main(["ci", "github", str(project)]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "error: envman.yaml: ci.envman: 'envman>=0.2' names no source, and no envman is published on the public "
        "index (pypi.org): pip would fail there, or install whatever someone registers under the name")


@pytest.mark.parametrize(("spec", "index", "message", "hint"), [
    ("envman @ git+https://git.example.com/envman@main", None, "--envman-spec: 'envman @ git+https://git.example.com/"
     "envman@main' does not pin a commit", "pin the 40-hex commit: envman @ git+https://HOST/PATH@COMMIT"),
    ("envman @ https://files.example.com/envman-0.2.0-py3-none-any.whl", None, "--envman-spec: 'envman @ https://"
     "files.example.com/envman-0.2.0-py3-none-any.whl' is not an https URL pinned by its sha256",
     "write it like envman @ https://HOST/envman-V-py3-none-any.whl#sha256=HEX"),
    ("numpy==1.0", None, "--envman-spec: 'numpy==1.0' is not a requirement on envman",
     "write it like envman @ git+https://HOST/envman@COMMIT, a wheel in the repository "
     "(vendor/envman-V-py3-none-any.whl) or envman==V with an index"),
    ("../envman-0.2.0-py3-none-any.whl", None, "--envman-spec: '../envman-0.2.0-py3-none-any.whl' is not a path to an "
     "envman wheel inside the repository", "a relative path like vendor/envman-0.2.0-py3-none-any.whl (letters, "
     "digits, . _ + -)"),
    ("envman==0.2.0", "http://pypi.example.com/simple", "--envman-index: 'http://pypi.example.com/simple' is not an "
     "https index URL", "write it like https://pypi.example.com/simple"),
    ("envman==0.2.0", "https://bob:s3cr3tt0k3n@pypi.example.com/simple",
     "--envman-index: 'https://pypi.example.com/simple' carries credentials in its URL",
     "give the CI job the token as a secret (PIP_INDEX_URL, netrc), not in the generated file"),
])
def test_explicit_sources_are_checked(project, spec, index, message, hint):
    err = refused(project, spec, index, None)
    assert (err.message, err.hint) == (message, hint)


def test_a_missing_wheel_is_refused(project):
    err = refused(project, "vendor/envman-0.2.0-py3-none-any.whl", None, None)
    assert (err.message, err.hint) == (f"--envman-spec: vendor/envman-0.2.0-py3-none-any.whl is not a file inside {project}",
                                       "commit the wheel into the repository, then re-run")


def test_gitlab_installs_git_before_a_git_url(project):
    from envman.ci import CiOptions, backend, load_ci_project, pipeline_files

    install = envman_install(project, f"envman @ git+https://git.example.com/acme/envman@{COMMIT}", None, None)
    doc = yaml.safe_load(dict(pipeline_files(backend("gitlab"), load_ci_project(project), CiOptions(install=install)))[".gitlab-ci.yml"])
    assert doc["envman-check"]["script"][:2] == [GIT_APT, f"python -m pip install 'envman @ git+https://git.example.com/acme/envman@{COMMIT}'"]


def test_envman_yaml_ci_keys_are_checked():
    assert read_settings({"envman": "vendor/x.whl"}) == {"envman": "vendor/x.whl"}
    with pytest.raises(SpecError) as exc:
        read_settings({"envmann": "x"})
    assert (exc.value.message, exc.value.hint) == ("envman.yaml: ci.envmann: unknown key", "keys: envman, index_url")
    with pytest.raises(SpecError) as exc:
        read_settings({"envman": 3})
    assert exc.value.message == "envman.yaml: ci.envman: expected a string"


PIECE = st.text(alphabet="abz09.-_/+~%'\"$`;\n \t\\(){}#=@", max_size=30)  # pieces a value is made of, the nasty ones too


@settings(max_examples=400, deadline=None)
@given(spec=st.one_of(st.text(max_size=80), PIECE.map(lambda t: f"envman @ git+https://h.example/{t}@{COMMIT}"),
                      PIECE.map(lambda t: f"envman=={t}"), PIECE.map(lambda t: f"envman @ https://h.example/{t}#sha256={'0' * 64}")),
       index=st.one_of(st.none(), st.text(max_size=60), PIECE.map(lambda t: f"https://pypi.example.com/{t}"),
                       st.just("https://pypi.example.com/simple")))
def test_any_value_is_refused_or_reaches_the_shell_as_one_quoted_word(tmp_path_factory, spec, index):
    """Whatever a user writes: a UsageError, or lines whose words the shell reads back as written, no control
    character, and valid shell (bash -n)."""
    root = tmp_path_factory.getbasetemp()
    try:
        got = envman_install(root, spec, index, None)
    except UsageError:
        return
    for line in got.lines:
        assert line.isprintable()
        words = shlex.split(line)
        assert spec.strip() in words or "./" + spec.strip() in words
    assert subprocess.run(["bash", "-n", "-c", "\n".join(got.lines)], capture_output=True).returncode == 0


def test_a_bad_ci_key_fails_envman_ci_but_not_the_lock_reminder(project, capsys):
    from envman.app.ci import stale_ci_files

    rel, _ = wheel(project)
    (project / "envman.yaml").write_text(f"name: demo\nci: {{envman: {rel}}}\n")
    assert main(["ci", "github", str(project)]) == 0
    (project / "envman.yaml").write_text(f"name: demo\nci: {{envmann: {rel}}}\n")
    capsys.readouterr()
    assert main(["ci", "github", str(project)]) == 1
    assert capsys.readouterr().err.splitlines() == ["error: envman.yaml: ci.envmann: unknown key", "hint: keys: envman, index_url"]
    assert stale_ci_files(project) == []  # what `envman lock` looks at after a lock: still answers
