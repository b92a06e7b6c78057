"""The packages a stack's lock pins without a wheel, and the builder stage that builds them."""

from __future__ import annotations

from dataclasses import dataclass, field

from envman.app.lockinputs import LockOptions, ProjectInputs
from envman.app.pythonlocks import Lines, PythonFiles
from envman.errors import LockError
from envman.image.stages import SourceBuilds, plan_source_builds
from envman.lock import artifacts
from envman.lock.uv import framework_closure, python_platform
from envman.model import Resolution


@dataclass
class Builds:
    """What the builder stage makes: the plan and its three locks' bodies."""

    plan: SourceBuilds | None = None
    source: str | None = None
    build: str | None = None
    rest: str | None = None  # the image's last install without the packages built from a URL
    notes: list[str] = field(default_factory=list)


def source_builds(inputs: ProjectInputs, res: Resolution, lines: Lines, python: PythonFiles, base_kind: str,
                  opts: LockOptions) -> Builds:
    """The packages the lock pins without a wheel: refused, or the builder stage's plan and locks."""
    locked, py_text = python.locked, python.pylock
    if py_text is None or locked is None:
        return Builds()
    tables = inputs.tables
    reqs = inputs.reqs
    artifacts.refuse_unbuildable(py_text, res.python)
    artifacts.refuse_vcs(py_text, {**{r.line: r.origin for r in reqs if r.req.url}, **{r.name: r.origin for r in reqs}})
    src = artifacts.source_only(py_text)
    artifacts.refuse_framework_build_without_framework(
        [f"{n}=={v}" for n, v in src if n in tables.build_needs and tables.build_needs[n].framework], res.framework)
    if src and lines.pins:
        artifacts.refuse_in_framework_closure(src, framework_closure(locked, lines.roots), res.framework)
    project, project_notes = _project_build(inputs, locked, res)
    sb = plan_source_builds(src, tables.build_needs, res.cuda if res.variant != "cpu" else None,
                            base_kind.startswith("cuda-"), tables.nvcc, project=project)
    if sb is None:
        return Builds()
    if sb.cuda and sb.nvcc is None and not base_kind.startswith("cuda-"):
        who = [n for n, _ in sb.packages] + (["the project"] if sb.project else [])
        raise LockError(f"{', '.join(who)} compiles CUDA code and no nvcc wheel is known "
                        f"for CUDA {res.cuda} (matrices/build_needs.yaml nvcc)",
                        hint="set cuda_devel: true in envman.yaml (an nvidia/cuda devel base), or pin a version with a wheel")
    built = {n for n, _ in sb.packages}
    rest = locked.render({p.name for p in locked.packages} - built) if artifacts.by_url(py_text, built) else None
    build = (python.build if python.build is not None or opts.no_lock
             else _lock_build_deps(sb, _real_urls(py_text, inputs, res), locked, res))
    return Builds(sb, locked.render(built), build, rest, list(sb.notes) + project_notes)


def _real_urls(py_text: str, inputs: ProjectInputs, res: Resolution) -> str:
    """pylock.toml with its private indexes' URLs in place of their names (to fetch an sdist at lock time)."""
    import os

    from envman.lock.indexes import expand_indexes, project_indexes

    private = project_indexes(res.index_url, inputs.spec.index_urls, inputs.index_urls, os.environ)
    return expand_indexes(py_text, private, credentials=True)


def _project_build(inputs: ProjectInputs, locked, res: Resolution):
    """The project's own build, as a row of the builder's table (and its note), when it compiles code
    (envman/project/compiled.py) or its backend asks for what the lock does not hold (project/backend_requires.py):
    the image installs it offline, so setuptools would fetch a missing setup_requires there, and fail."""
    from envman.image.stages import BUILDER, BuildNeed
    from envman.lock.uv import target_environment
    from envman.project.backend_requires import unmet

    pkg = inputs.package
    if pkg is None:
        return None, []
    missing = unmet(pkg.backend_requires, {p.name: p.version for p in locked.packages},
                    target_environment(res.python, python_platform(res)))
    compiled = pkg.compiled if pkg.compiled is not None and pkg.compiled.kinds else None
    if compiled is None and not missing:
        return None, []
    notes = [f"the project's build asks for {', '.join(missing)} ({pkg.backend_source}), which the lock does not "
             f"hold and the image installs offline: the project is built into a wheel in the builder stage {BUILDER} "
             "with them (hash-checked, in the build lock); they never reach the image"] if missing else []
    return BuildNeed("the project", framework=bool(compiled and compiled.framework), cuda=bool(compiled and compiled.cuda),
                     compiler=compiled is not None, source=f"its {pkg.kind}",
                     build_requires=pkg.build_requires + (compiled.imports if compiled else ()) + pkg.backend_requires
                     ), notes


def _lock_build_deps(sb, py_text: str, locked, res: Resolution) -> str:
    """requirements.build.lock.txt: the sdists' own build requirements, the table's, nvcc; hashed by uv and
    constrained to the main lock's pins."""
    from envman.lock.build_deps import build_requires_of, compile_build_lock, fetch_sdist, sdist_urls

    urls = sdist_urls(py_text)
    reqs = list(sb.build_requires) + ([sb.nvcc[0], *sb.nvcc_also] if sb.nvcc else [])
    for name, _ in sb.packages:
        url, sha = urls[name]
        reqs.extend(build_requires_of(fetch_sdist(url, sha), url.rsplit("/", 1)[-1]))
    # a `name @ url` package pins a file, not a version: it cannot constrain uv (nor will a build need it)
    direct = artifacts.by_url(py_text, {p.name for p in locked.packages})
    pins = {p.name: p.version for p in locked.packages if p.name not in direct}
    return compile_build_lock(reqs, pins, res.python,
                              [res.index_url] if res.index_url else [], platform=python_platform(res))
