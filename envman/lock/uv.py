"""The Python lock of a stack: ONE ``uv pip compile --format pylock.toml`` run (never a home-made resolver),
and what envman makes of uv's answer — requirements.lock.txt derived from pylock.toml, the framework's own
layer cut from the ``# via`` graph. The files' names: lock/layout.py."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from envman.errors import ToolError, UsageError
from envman.files import sha256
from envman.lock.indexes import (
    PrivateIndex,
    check_unleaked,
    environment_indexes,
    expand_indexes,
    is_public,
    name_indexes,
    private_indexes,
)
from envman.lock.uvproc import UvRequest, uv_answer, uv_binary
from envman.model import Resolution, target_environment
from envman.redact import redact_userinfo

PLATFORM = "x86_64-manylinux_2_28"  # uv's --python-platform of an x86_64 stack; python_platform() for any stack


def python_platform(res: Resolution) -> str:
    """uv's ``--python-platform`` for the stack: its wheels' CPU architecture on the manylinux tag its base image's
    glibc runs (bookworm's 2.36 → manylinux_2_36, matrices/base_images.yaml ``glibc``); manylinux 2.28 when the
    glibc is not known (a --base-image of the user's own)."""
    glibc = getattr(res, "glibc", None)  # a Resolution; a duck-typed one without it: manylinux 2.28
    glibc = glibc.replace(".", "_") if glibc else "2_28"
    return f"{res.arch}-manylinux_{glibc}"


_CUDA_MAJOR_PKG = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)\Z")


@dataclass
class LockedPackage:
    name: str
    version: str
    lines: list[str]  # the package's block as uv wrote it (pin, hashes, via comments)
    via: list[str] = field(default_factory=list)


@dataclass
class PythonLock:
    header_lines: list[str]  # --index-url / --extra-index-url lines
    packages: list[LockedPackage]

    def render(self, names: set[str] | None = None) -> str:
        out = list(self.header_lines)
        for p in self.packages:
            if names is None or p.name in names:
                out.extend(p.lines)
        return "\n".join(out) + "\n"


def parse_uv_output(text: str) -> PythonLock:
    header: list[str] = []
    pkgs: list[LockedPackage] = []
    cur: LockedPackage | None = None
    in_via = False
    for line in text.splitlines():
        if line.startswith(("--index-url", "--extra-index-url", "--find-links")):
            header.append(redact_userinfo(line))  # an index token from UV_INDEX_URL never lands in a lock file
            continue
        if not line.strip() or (line.startswith("#") and cur is None):
            continue
        if not line.startswith((" ", "#")):
            # name==version, or name @ URL for a VCS/URL requirement (uv pins a git URL to its commit)
            m = re.match(r"^([A-Za-z0-9._-]+)(\[[^\]]*\])?(?:==| @ )([^ \\;]+)", line)
            if not m:
                raise ToolError(f"uv output: unexpected line {line!r}",
                                hint="run `envman lock --upgrade`; if it persists, run uv by hand to see what it writes")
            cur = LockedPackage(canonicalize_name(m.group(1)), m.group(3), [line])
            pkgs.append(cur)
            in_via = False
            continue
        assert cur is not None
        cur.lines.append(line)
        s = line.strip()
        if s.startswith("# via"):
            in_via = True
            rest = s[len("# via"):].strip()
            if rest:
                cur.via.append(rest)
        elif in_via and s.startswith("#"):
            cur.via.append(s.lstrip("# ").strip())
    return PythonLock(header, pkgs)


def framework_closure(lock: PythonLock, roots: list[str]) -> set[str]:
    """The framework and everything it pulls in, read from uv's ``# via`` annotations."""
    names = {p.name for p in lock.packages}
    closure: set[str] = names & {canonicalize_name(r) for r in roots}
    parents = {p.name: {canonicalize_name(v.split()[0]) for v in p.via if not v.startswith("-r")} for p in lock.packages}
    changed = True
    while changed:
        changed = False
        for n, ps in parents.items():
            if n not in closure and ps & closure:
                closure.add(n)
                changed = True
    return closure


class CudaMajorConflict(UsageError):
    """A locked package pulls nvidia-* wheels of another CUDA major than the stack's (``major``: theirs)."""

    def __init__(self, message: str, hint: str, major: int) -> None:
        super().__init__(message, hint=hint)
        self.major = major


def check_cuda_majors(lock: PythonLock, res: Resolution) -> None:
    """A package dragging in nvidia-* wheels of another CUDA major breaks the stack at import time."""
    if res.cuda is None:
        return
    want = int(res.cuda.split(".")[0])
    for p in lock.packages:
        m = _CUDA_MAJOR_PKG.match(p.name)
        if m and int(m.group(1)) != want:
            who = ", ".join(p.via) or "a requirement"
            raise CudaMajorConflict(
                f"{p.name}=={p.version} (CUDA {m.group(1)}, pulled in by {who}) contradicts the stack's CUDA {res.cuda}",
                f"pin a version of {who} built for CUDA {want}, or resolve the stack for CUDA {m.group(1)} "
                f"(cuda: \"{m.group(1)}\" in envman.yaml)",
                int(m.group(1)),
            )


@dataclass(frozen=True)
class UvCommand:
    args: list[str]
    secret_env: dict[str, str] = field(default_factory=dict)  # index URLs with credentials: uv's environment


# The index options whose values may carry credentials, each with the environment variable uv also reads it
# from and that variable's separator (uv's documented forms).
_INDEX_ENV = (("--index-url", "UV_INDEX_URL", " "), ("--extra-index-url", "UV_EXTRA_INDEX_URL", " "),
              ("--find-links", "UV_FIND_LINKS", ","))


def index_options(index_url: str | None, extra: list[str] | tuple[str, ...],
                  find_links: list[str] | tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    """(arguments, environment) naming the indexes to uv. A URL with credentials never goes on uv's command
    line, which every user of the machine can read (ps, /proc/PID/cmdline); a process's environment only its
    owner can. A private index (any but PyPI: its token may be in the path, lock/indexes.py) is treated alike.
    When one value of an option goes there, all of that option's values do (an argument would replace the
    variable, not add to it)."""
    args: list[str] = []
    env: dict[str, str] = {}
    for (flag, var, sep), values in zip(_INDEX_ENV, ([index_url] if index_url else [], list(extra), list(find_links))):
        if any(redact_userinfo(v) != v or (flag != "--find-links" and not is_public(v)) for v in values):
            env[var] = sep.join(values)
        else:
            for v in values:
                args += [flag, v]
    return args, env


# The packages a framework's own index may serve (the wheels built for its CUDA). Nothing else is ever
# looked up there: with --extra-index-url, uv would ask that index for every package first, which is how
# the 2022 `torchtriton` dependency confusion reached users. uv's explicit indexes ([[tool.uv.index]]
# explicit = true + [tool.uv.sources]) pin just these names to it; `uv pip compile` honours both when
# its input is a pyproject.toml. Which names: each framework's Framework.index_packages.
def framework_index_sourced(names: list[str]) -> list[str]:
    from envman.frameworks import index_packages

    own = index_packages()
    return sorted({canonicalize_name(n) for n in names
                   if canonicalize_name(n) in own or canonicalize_name(n).startswith("nvidia-")})


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def input_pyproject(lines: list[str], framework_index: str) -> str:
    """A pyproject.toml that asks uv for ``lines``, with the framework's index explicit: only the
    framework's own packages that ``lines`` name may come from it."""
    from packaging.requirements import Requirement

    names = [Requirement(ln).name for ln in lines]
    out = ['[project]', 'name = "envman-lock"', 'version = "0"', "dependencies = ["]
    out += [f"    {_toml_str(ln)}," for ln in lines]
    out += ["]", "", "[[tool.uv.index]]", 'name = "framework"', f"url = {_toml_str(framework_index)}",
            "explicit = true", "", "[tool.uv.sources]"]
    out += [f'{n} = {{ index = "framework" }}' for n in framework_index_sourced(names)]
    return "\n".join(out) + "\n"


def interpreter_args(python: str) -> list[str]:
    """Which Python uv resolves with. ``--python <envman's interpreter>`` when it is of the target's version (and
    UV_PYTHON names none): otherwise uv looks for one of that version on PATH on every run, through pyenv's
    shims a shell script per candidate. An interpreter of another version is not offered (uv builds
    source-only packages' metadata with it); and uv may not download one (``--no-python-downloads``, unless
    UV_PYTHON_DOWNLOADS says otherwise): for a target version no local Python has, uv would fetch a whole
    CPython from GitHub to compile a lock (and wait for it where GitHub is unreachable), and falls back to a
    local interpreter instead."""
    out = [] if os.environ.get("UV_PYTHON_DOWNLOADS") else ["--no-python-downloads"]
    if os.environ.get("UV_PYTHON"):
        return out
    if ".".join(python.split(".")[:2]) != f"{sys.version_info[0]}.{sys.version_info[1]}":
        return out
    return ["--python", sys.executable, *out]


def uv_compile_command(input_file: Path, output: Path, python: str, index_urls: list[str], fmt: str | None = None,
                       upgrade: bool = False, index_url: str | None = None,
                       find_links: list[str] | tuple[str, ...] = (), constraints: Path | None = None,
                       platform: str = PLATFORM, binary: str | None = None, overrides: Path | None = None) -> UvCommand:
    """``binary``: the uv to name first (default: envman's; a request only records what follows it)."""
    # uv runs in the input's directory with relative names: nothing it writes may carry a temporary path,
    # or the same inputs would not give the same bytes.
    args = [
        binary or uv_binary(), "pip", "compile", input_file.name, "--python-platform", platform, "--python-version", python,
        *interpreter_args(python), "--generate-hashes", "--no-header", "--emit-index-url", "--quiet", "-o", output.name,
    ]
    index_args, secret = index_options(index_url, index_urls, find_links)
    args += index_args
    if constraints is not None:
        args += ["--constraint", constraints.name]
    if overrides is not None:  # the project's [tool.uv] override-dependencies (envman.yaml overrides:)
        args += ["--overrides", overrides.name]
    if fmt:
        args += ["--format", fmt]
    if upgrade:
        args.append("--upgrade")
    return UvCommand(args, secret)


@dataclass
class LockResult:
    python_lock: PythonLock
    req_text: str  # requirements.lock.txt body (without our header)
    fw_text: str
    pylock_text: str | None
    sdist_only: set[str] = field(default_factory=set)  # pinned packages with no wheel: the image builds them
    versions: dict[str, str] = field(default_factory=dict)  # every locked package → its version
    notes: list[str] = field(default_factory=list)  # e.g. the framework layer could not be cut
    request: UvRequest | None = None  # the uv run, as data
    # (name, version, Requires-Python) locked for a Python they exclude: uv ignores Requires-Python's upper bounds
    python_excluded: tuple[tuple[str, str, str], ...] = ()


def index_lines(index_url: str | None, extra: list[str], find_links: list[str] | tuple[str, ...] = (),
                private: list[PrivateIndex] | tuple[PrivateIndex, ...] = ()) -> list[str]:
    """The index options heading requirements.lock.txt (pip reads them at install time). A private index is
    named by its variable (``${ENVMAN_INDEX_…}``, which pip expands; the build supplies it as a secret)."""
    out = [f"--index-url {index_url or 'https://pypi.org/simple'}"]
    out += [f"--extra-index-url {u}" for u in extra]
    out += [f"--find-links {u}" for u in find_links]
    # credentials reach pip and uv from the environment, the build secret or netrc only
    return [name_indexes(redact_userinfo(line), private) for line in out]


def _check_output_covers_inputs(pkgs: list, lines: list[str], env: dict[str, str] | None = None) -> None:
    """uv's output is seeded with the previous lock (its preferences): a uv that exits 0 without writing would
    leave that lock in place for new inputs. Every requirement asked for must be in what uv wrote — except one
    whose environment marker is false on the target (``pkg; platform_machine == 'aarch64'`` on x86_64): uv rightly
    leaves it out."""
    from packaging.requirements import InvalidRequirement, Requirement

    have = {canonicalize_name(p.name) for p in pkgs}
    missing = []
    for line in lines:
        try:
            req = Requirement(line.split(" --hash")[0])
        except InvalidRequirement:
            continue  # URL lines and the like: uv names them, the lock has them under that name
        if req.marker is not None and env is not None and not _holds(req.marker, env):
            continue
        if canonicalize_name(req.name) not in have:
            missing.append(canonicalize_name(req.name))
    if missing:
        raise ToolError(f"uv's output does not contain {', '.join(sorted(missing))}, which the inputs ask for",
                        hint="re-run `envman lock --upgrade`; if it persists, run uv by hand to see what it says")


def _holds(marker, env: dict[str, str]) -> bool:
    try:
        return bool(marker.evaluate(env))
    except Exception:  # a marker packaging cannot evaluate: the line stands
        return True


def python_lock_job(lines: list[str], python: str, index_urls: list[str], roots: list[str], res: Resolution,
                    previous: tuple[str | None, str | None] = (None, None),
                    upgrade: bool = False, *, index_url: str | None = None, find_links: tuple[str, ...] = (),
                    constraints: list[str] | tuple[str, ...] = (), timeout: float | None = None,
                    overrides: list[str] | tuple[str, ...] = ()) -> PythonLockJob:
    """What a Python lock asks uv, before anything runs: ONE uv resolution, written as PEP 751 pylock.toml (per-file
    URLs, hashes, sdists); requirements.lock.txt is derived from it, so the two agree by construction
    (``PythonLockJob.finish``; ``.compile()`` runs uv and finishes).

    ``index_urls`` are extra indexes; the resolution's own framework index (``res.index_url``) among them
    serves the framework's packages only. ``constraints`` (``nvidia-cudnn-cu12==9.3.0.75`` …) go to uv as
    a constraints file. ``previous`` (the current requirements lock and pylock bodies) seed uv's
    preferences: pins that still fit are kept — a re-lock does not churn. ``upgrade`` re-resolves all."""
    fw_index = res.index_url if res.index_url in index_urls else None
    extra = [u for u in index_urls if u != fw_index]
    # the index uv resolved against (UV_DEFAULT_INDEX / UV_INDEX_URL from the environment when envman names
    # none) is the one pip installs from: without its credentials, which the build gets as a secret or netrc
    default_index = index_url or os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL")
    private = private_indexes([default_index, *extra, *environment_indexes(os.environ)], public=[fw_index or ""])
    seed = None if upgrade or previous[1] is None else expand_indexes(previous[1], private)  # uv reads real URLs
    request = uv_request(lines, python, extra, fw_index, upgrade=upgrade, index_url=index_url, find_links=find_links,
                         constraints=constraints, seed=seed, platform=python_platform(res), overrides=overrides)
    header = index_lines(default_index, extra + ([fw_index] if fw_index else []), find_links, private)
    return PythonLockJob(request, list(lines), python, list(roots), res, header, timeout, tuple(private))


@dataclass
class PythonLockJob:
    """One Python lock: the uv run it asks for (``request``), and what it makes of uv's answer (``finish``).
    The answer is a pure function's input: a lock whose request is the last lock's (``key``) is finished on
    the last answer, without running uv (app/generate.py)."""

    request: UvRequest
    lines: list[str]
    python: str
    roots: list[str]
    res: Resolution
    header: list[str]
    timeout: float | None = None
    private: tuple[PrivateIndex, ...] = field(default=(), repr=False)  # named in what is written, never shown

    def key(self) -> str:
        """What envman.lock records of this lock's request: uv's request (``UvRequest.key``) and the index lines
        heading requirements.lock.txt (the default index may come from the environment)."""
        return sha256("\n".join([self.request.key(), *self.header]))

    def compile(self, progress=None, while_waiting=None) -> LockResult:
        """One uv run on ``request``, and the lock made of its answer."""
        # an index token (UV_INDEX_URL …) never lands in a lock file
        return self.finish(redact_userinfo(uv_answer(uv_binary(), self.request, self.timeout, progress, while_waiting)))

    def finish(self, py_text: str) -> LockResult:
        """The lock made of uv's pylock.toml: requirements.lock.txt derived from it, the ``# via`` graph (and
        the framework's layer cut from it) from the locked wheels' metadata (lock/graph.py, cached by hash)."""
        from envman.lock.graph import dependency_parents
        from envman.lock.pylock import parse_pylock, requirement_block

        pkgs = parse_pylock(py_text)
        platform = python_platform(self.res)
        _check_output_covers_inputs(pkgs, self.lines, target_environment(self.python, platform))
        parents, unknown, excluded = dependency_parents(pkgs, self.lines, self.python, platform,
                                                        timeout=min(self.timeout or 30.0, 30.0))
        lock = PythonLock(list(self.header), [LockedPackage(p.name, p.version, requirement_block(p, parents[p.name]),
                                                            parents[p.name]) for p in pkgs])
        check_cuda_majors(lock, self.res)
        notes: list[str] = []
        closure = framework_closure(lock, self.roots)
        if unknown and closure & set(unknown):
            # a closure member's own dependencies are unknown: the framework layer holds everything (correct, less cacheable)
            closure = {p.name for p in lock.packages}
            notes.append("the framework's layer holds every locked package: no metadata for " + ", ".join(sorted(unknown)))
        req_text, fw_text = lock.render(), lock.render(closure)
        py_named = name_indexes(py_text, self.private) if self.private else py_text
        check_unleaked({"requirements.lock.txt": req_text, "pylock.toml": py_named}, self.private)
        return LockResult(lock, req_text, fw_text, py_named,
                          {p.name for p in pkgs if p.sdist_only}, {p.name: p.version for p in pkgs}, notes, self.request,
                          tuple(excluded))


def uv_request(lines: list[str], python: str, extra: list[str], fw_index: str | None, *, upgrade: bool = False,
               index_url: str | None = None, find_links: tuple[str, ...] | list[str] = (),
               constraints: list[str] | tuple[str, ...] = (), seed: str | None = None,
               platform: str = PLATFORM, overrides: list[str] | tuple[str, ...] = ()) -> UvRequest:
    """The one uv run of a lock, as data: its input (a pyproject.toml when the framework has its own
    index), constraints, the previous pylock.toml (uv keeps the pins that still fit) and its arguments."""
    if fw_index:
        files = [("pyproject.toml", input_pyproject(lines, fw_index))]
    else:
        files = [("requirements.in", "\n".join(lines) + "\n")]
    if constraints:
        files.append(("constraints.txt", "\n".join(constraints) + "\n"))
    if overrides:
        files.append(("overrides.txt", "\n".join(overrides) + "\n"))
    if seed:
        files.append(("pylock.toml", seed))
    cmd = uv_compile_command(Path(files[0][0]), Path("pylock.toml"), python, extra, fmt="pylock.toml", upgrade=upgrade,
                             index_url=index_url, find_links=find_links,
                             constraints=Path("constraints.txt") if constraints else None, platform=platform,
                             binary="uv",  # found when uv runs: a kept lock never looks for it
                             overrides=Path("overrides.txt") if overrides else None)
    return UvRequest(tuple(sorted(files)), tuple(cmd.args[1:]), env=tuple(sorted(cmd.secret_env.items())))

