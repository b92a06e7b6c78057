"""Render the planned files. Jinja2 for the Dockerfile (strict: an unknown name is an error); compose and
devcontainer are serialized from their planned dicts, so they are valid YAML/JSON by construction."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from envman.image.plan import DockerPlan


def templates_dir() -> Path:
    from envman.resources import templates_dir as locate

    return locate()


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


def render_dockerfile(plan: DockerPlan) -> str:
    """The Dockerfile of ``plan``. A plan is a frozen value whose repr names every field, so its text is kept on
    disk under the digest of that repr and of the templates: a lock whose plan did not change (a current one)
    does not even import jinja2."""
    import hashlib

    from envman.diskcache import cached

    key = hashlib.sha256(repr(plan).encode("utf-8"))
    for path in sorted(p for p in templates_dir().rglob("*") if p.is_file()):
        key.update(f"\0{path.relative_to(templates_dir())}\0".encode() + path.read_bytes())
    return cached("dockerfile", key.hexdigest(), lambda: _env().get_template("Dockerfile.j2").render(plan=plan),
                  lambda text: isinstance(text, str))


def render_yaml(data: dict) -> str:
    """``data`` as YAML, kept on disk under the digest of its repr (as the Dockerfile is): a current lock's
    compose.yaml does not import PyYAML."""
    import hashlib

    from envman.diskcache import cached

    def dump() -> str:
        import yaml

        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)

    return cached("yaml", hashlib.sha256(repr(data).encode("utf-8")).hexdigest(), dump, lambda t: isinstance(t, str))


def render_json(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_dockerignore() -> str:
    """templates/dockerignore: what never enters a build context (caches, virtualenvs, credentials)."""
    return (templates_dir() / "dockerignore").read_text(encoding="utf-8")


def __getattr__(name: str) -> str:  # DOCKERIGNORE, read from its template file when first asked for
    if name == "DOCKERIGNORE":
        return render_dockerignore()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
