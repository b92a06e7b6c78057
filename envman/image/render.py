"""Render the planned files. Jinja2 for the Dockerfile (strict: an unknown name is an error); compose and
devcontainer are serialized from their planned dicts, so they are valid YAML/JSON by construction."""

from __future__ import annotations

import json
from functools import lru_cache

from envman.image.plan import DockerPlan
from envman.resources import templates_dir


@lru_cache(maxsize=1)
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def warm() -> None:
    """Import jinja2 and compile the template ahead of need (called while uv resolves)."""
    _env().get_template("Dockerfile.j2")


def render_dockerfile(plan: DockerPlan, known: str | None = None) -> str:
    """The Dockerfile of ``plan``. A plan is a frozen value whose repr names every field, so its text is kept on
    disk under the digest of that repr and of the templates: a lock whose plan did not change (a current one)
    does not even import jinja2. A cached text is built, so it is trusted only when it is the Dockerfile the
    last lock recorded (``known``: the sha256 of that body, from envman.lock's ``files``); anything else in
    the cache — another text, a planted one — is a miss and the template renders it."""
    import hashlib

    from envman.diskcache import cached

    key = hashlib.sha256(repr(plan).encode("utf-8"))
    for path in sorted(p for p in templates_dir().rglob("*") if p.is_file()):
        key.update(f"\0{path.relative_to(templates_dir())}\0".encode() + path.read_bytes())

    def recorded(text: object) -> str:
        if not (isinstance(text, str) and known
                and hashlib.sha256(text.lstrip("\n").encode("utf-8")).hexdigest() == known):
            raise ValueError("not the Dockerfile the last lock recorded")
        return text

    def fresh(text: object) -> str:
        assert isinstance(text, str)
        return text

    if not known:
        return _env().get_template("Dockerfile.j2").render(plan=plan)
    return cached("dockerfile", key.hexdigest(), lambda: _env().get_template("Dockerfile.j2").render(plan=plan),
                  recorded, fresh=fresh)


def render_yaml(data: dict) -> str:
    """``data`` as YAML (compose.yaml, envman.yaml). Not kept in the cache: a cached text would be written into
    the project (a compose file says what runs, privileged or not) on the cache's word; PyYAML's import, all
    the cache saved, is ~10 ms (issue 24, measured)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    # With allow_unicode, PyYAML writes NEL and the Unicode line/paragraph separators raw in a single-quoted
    # scalar, and a reader folds them to a space; double quotes escape them (\N, \L, \P).
    Dumper.add_representer(str, lambda d, s: d.represent_scalar(
        "tag:yaml.org,2002:str", s, style='"' if any(c in s for c in "\x85\u2028\u2029") else None))
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def render_json(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_dockerignore() -> str:
    """templates/dockerignore: what never enters a build context (caches, virtualenvs, credentials)."""
    return (templates_dir() / "dockerignore").read_text(encoding="utf-8")
