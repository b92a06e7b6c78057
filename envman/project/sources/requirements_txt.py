"""pip's requirements format, as repositories write it: includes (-r/-c), editable and VCS lines, index
options and per-line hashes. Nothing is executed; every line's fate is recorded."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from envman.errors import UsageError
from envman.inputs import MAX_REQUIREMENTS, read_input
from envman.project.req import Req
from envman.project.sources import Fate, Found
from envman.redact import redact, redact_userinfo

FRAMEWORK_INDEX_HOSTS = ("download.pytorch.org",)
_URL = re.compile(r"^(git|hg|svn|bzr)\+|^https?://|^file:")
_IGNORED_OPTIONS = ("--pre", "--prefer-binary", "--no-binary", "--only-binary", "--trusted-host", "--no-index",
                    "--use-feature", "--config-settings", "--global-option", "--no-build-isolation")
# a file named for development or an option: a core file's include of one is not the core (mmlab's
# requirements.txt includes requirements/tests.txt and optional.txt beside runtime.txt; speechbrain's includes
# lint-requirements.txt). A file so named itself may include another (requirements-dev.txt: -r requirements-test.txt)
_NOT_CORE = {"dev", "devel", "develop", "test", "tests", "testing", "doc", "docs", "readthedocs", "lint", "ci",
             "style", "typing", "mypy", "optional", "extra", "extras"}


def url_name(url: str) -> str:
    """A name for a VCS/URL line without one: ``#egg=`` if given, else the repository (or subdirectory)."""
    m = re.search(r"[#&]egg=([A-Za-z0-9._-]+)", url)
    if m:
        return m.group(1)
    m = re.search(r"[#&]subdirectory=([^&]+)", url)
    if m:
        return Path(m.group(1)).name
    path = urlsplit(re.sub(r"^[a-z]+\+", "", url)).path.split("@")[0]
    name = Path(path).name
    if name.endswith(".whl"):  # {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
        name = name.split("-")[0]
    for ext in (".git", ".zip", ".tar.gz", ".tar.bz2", ".tgz"):
        name = name.removesuffix(ext)
    m = re.match(r"^(.+?)-\d[\w.!+]*\Z", name)  # an sdist's {name}-{version}
    if m and not url.startswith(("git+", "hg+", "svn+", "bzr+")):
        name = m.group(1)
    return re.sub(r"[^A-Za-z0-9._-]", "-", name) or "unnamed"


def _url_req(url: str, where: str, hashes: tuple[str, ...] = ()) -> Req:
    try:
        return Req(Requirement(f"{url_name(url)} @ {url.split('#')[0]}"), where, raw=url, hashes=hashes)
    except InvalidRequirement as exc:  # text after the URL (`https://h/a.whl ="`)
        raise UsageError(f"{where}: {url!r} is not a valid URL requirement ({str(exc).splitlines()[0]})",
                         hint="one URL per line, then only ; markers or --hash options") from None


def _resolve(project: Path, rel: str) -> Path:
    try:
        return (project / rel).resolve()
    except (RuntimeError, OSError):  # Python raises RuntimeError on a loop of symbolic links
        raise UsageError(f"{rel}: a symbolic link loop", hint="point the link at the requirements file itself") from None
    except ValueError:  # a NUL byte in the name (`-r x\0y`)
        raise UsageError(f"{rel!r}: not a file name", hint="name a requirements file inside the project") from None


def read_requirements(project: Path, rel: str, *, constraints: bool = False, _seen: set[Path] | None = None) -> Found:
    path = _resolve(project, rel)
    real_root = project.resolve()
    if path != real_root and real_root not in path.parents:  # -r /etc/passwd, ../x, a link out of the project
        raise UsageError(f"{rel}: outside the project",
                         hint="requirement files and their -r/-c includes must be inside the project")
    seen = _seen if _seen is not None else set()
    found = Found(rel)
    if path in seen:
        return found
    seen.add(path)
    text = read_input(path, rel, MAX_REQUIREMENTS, hint="fix the path under 'requirements' in envman.yaml")
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark (Windows editors write one): pip skips it too
    # line numbers stay those of the file: a continuation is joined onto its first line
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        start = n
        raw = lines[n]
        while raw.rstrip().endswith("\\") and n + 1 < len(lines):
            n += 1
            raw = raw.rstrip()[:-1] + " " + lines[n]
        n += 1
        if line := re.sub(r"(^|\s)#.*$", "", raw).strip():
            _read_line(project, rel, line, f"{rel}:{start + 1}", found, constraints, seen)
    return found


def _read_line(project: Path, rel: str, line: str, where: str, found: Found, constraints: bool, seen: set[Path]) -> None:
    # what envman records (envman.yaml, its report, its messages) never carries a URL's credentials: uv gets them
    # from the environment (UV_INDEX_URL, netrc, git's credential helper). An index option's URL is the one
    # exception: it is kept whole for uv's environment, never written (lock/indexes.py names it in the lock)
    whole = line
    line = redact_userinfo(line)  # recorded: a commit or a path stays as written
    base = Path(rel).parent
    if line.startswith("-"):
        try:
            parts = shlex.split(line)
        except ValueError:
            parts = line.split()
        opt, arg = parts[0], " ".join(parts[1:])
        if "=" in opt and opt.startswith("--"):
            opt, arg = opt.split("=", 1)
        elif re.fullmatch(r"-[rcefi]\S+", opt):
            opt, arg = opt[:2], opt[2:]
        if opt in ("-r", "--requirement", "-c", "--constraint"):
            _read_include(project, (base / arg).as_posix(), line, where, found,
                          constraints or opt in ("-c", "--constraint"), seen, _not_core(rel, arg))
            return
        if opt in ("-e", "--editable"):
            if arg.rstrip("/") in (".", "file:.") or arg.startswith(".[") or arg.startswith("./["):
                found.install_project = True
                found.fates.append(Fate(where, line, "project", "installs this repository (install_project: true)"))
            elif _URL.match(arg):
                found.reqs.append(_url_req(arg, where))
                found.fates.append(Fate(where, line, "rewrote", f"→ {arg!r}: a VCS install is not editable in an image"))
            else:
                found.fates.append(Fate(where, line, "dropped",
                                        f"local path {arg}: it is part of the repository's source, not a package uv can lock"))
            return
        if opt in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links"):
            host = urlsplit(arg).hostname or ""
            if host in FRAMEWORK_INDEX_HOSTS:
                found.fates.append(Fate(where, line, "dropped", "replaced by envman's framework index for the chosen variant"))
            elif opt in ("-f", "--find-links"):
                found.find_links.append((where, arg))
                found.fates.append(Fate(where, line, "kept", "recorded under find_links: in envman.yaml"))
            else:
                written = re.match(r"^" + re.escape(opt) + r"(?:=|\s+)(\S+)", whole.strip())  # with its credentials
                found.index_urls.append((where, written.group(1) if written else arg))
                found.fates.append(Fate(where, line, "kept", "extra index passed to uv for the other packages"))
                if opt in ("-i", "--index-url"):
                    found.warnings.append(f"{where}: {opt} {arg} is used as an extra index beside PyPI, not instead of it")
            return
        if opt in _IGNORED_OPTIONS:
            found.fates.append(Fate(where, line, "dropped", "a pip install option; uv resolves and the lock pins"))
            return
        raise UsageError(f"{where}: option {opt} is not supported",
                         hint="write packages by name and version; envman chooses the framework index")
    hashes = tuple(re.findall(r"(?:^|\s)--hash[ =](\S+)", line))
    line = re.split(r"\s--hash[ =]", " " + line)[0].strip()
    line = _drop_line_options(line, where, found)
    if line.rstrip("/") in (".", "file:.") or line.startswith((".[", "./[")):
        found.install_project = True
        found.fates.append(Fate(where, line, "project", "installs this repository (install_project: true)"))
        return
    _refuse_machine_path(project, line, where)
    if _URL.match(line):
        # a URL in a -c file pins where a package comes from; it installs nothing
        # its --hash options pin the file at that URL: checked against the archive uv locks (lock/user_hashes.py)
        (found.constraints if constraints else found.reqs).append(_url_req(line, where, hashes))
        found.fates.append(Fate(where, line, "kept", "as a constraint, passed to uv as written" if constraints
                                else "URL requirement passed to uv as written"))
        return
    if line.startswith(("./", "../", "/")):
        found.fates.append(Fate(where, line, "dropped", "local path: part of the repository's source, not lockable"))
        return
    try:
        req = Requirement(line)
    except InvalidRequirement as exc:
        raise UsageError(f"{where}: {line!r} is not a valid requirement ({str(exc).splitlines()[0]})", hint="one PEP 508 requirement per line") from None
    hashes = _checkable_hashes(req, hashes, where, found)
    if constraints:
        found.constraints.append(Req(req, where, hashes=hashes))
        found.fates.append(Fate(where, line, "kept", "as a constraint: uv's resolution is held to it, it installs nothing"))
        return
    found.reqs.append(Req(req, where, raw=line if req.url else None, hashes=hashes))  # a URL line goes to uv as written
    found.fates.append(Fate(where, line, "kept"))


def _name_tokens(rel: str) -> set[str]:
    return {t for t in re.split(r"[-_.\s/]+", Path(rel).stem.lower()) if t}


def _not_core(rel: str, inc: str) -> str | None:
    """Why the include ``inc`` of the file ``rel`` is not part of the core, or None."""
    words = sorted(_name_tokens(inc) & _NOT_CORE)
    if not words or _name_tokens(rel) & _NOT_CORE:
        return None
    return (f"{inc} is named for {words[0]}, not the core: not read (name it under requirements: in envman.yaml "
            "to use it)")


def _read_include(project: Path, inc: str, line: str, where: str, found: Found, constraints: bool,
                  seen: set[Path], not_core: str | None = None) -> None:
    if not_core:
        found.fates.append(Fate(where, line, "dropped", not_core))
        return
    if _resolve(project, inc) in seen:  # a loop of includes: each file is read once
        found.fates.append(Fate(where, line, "dropped", f"{inc} is read already (the includes loop)"))
        return
    sub = read_requirements(project, inc, constraints=constraints, _seen=seen)
    found.fates.append(Fate(where, line, "kept", f"read {inc}"))
    found.merge(sub)


def _refuse_machine_path(project: Path, line: str, where: str) -> None:
    """``pkg @ file:///home/me/x.whl``: the lock would name a path only this machine has, which no build context
    holds. Refused, with the relative form when the file is inside the project."""
    m = re.search(r"(?:^|@\s*)file://(?:localhost)?(/[^\s;#]*)", line)
    if not m:
        return
    path = Path(unquote(m.group(1)))
    try:
        rel = path.resolve().relative_to(project.resolve())
        hint = f"name it relative to the project: ./{rel.as_posix()}"
    except (ValueError, OSError, RuntimeError):
        hint = (f"copy {path.name} into the project (wheels/, say) and name it relatively (./wheels/{path.name}), "
                "or publish it to an index and pin it by version")
    raise UsageError(f"{where}: {redact(m.group(0).lstrip('@ '))} is an absolute path of this machine", hint=hint)


# options pip takes after a requirement on its line (``pkg>=1 --no-binary a,b``, ``--config-settings k=v``)
_LINE_OPTION = re.compile(r"\s(--?[A-Za-z][\w-]*(?:[ =]\S+)?)(?=\s|$)")


def _drop_line_options(line: str, where: str, found: Found) -> str:
    """A requirement with per-requirement pip options: the requirement is kept, each option dropped and said
    (uv resolves and the lock pins; a build option would not reach the image's hash-checked wheel install)."""
    m = re.search(r"\s--?[A-Za-z]", line)
    if m is None or _URL.match(line):
        return line
    req, tail = line[: m.start()].strip(), line[m.start():]
    options = [o.strip() for o in _LINE_OPTION.findall(tail)]
    if not options:
        return line
    for o in options:
        found.fates.append(Fate(where, o, "dropped", f"a pip option of {req!r}; uv resolves and the lock pins"))
    return req


def _checkable_hashes(req: Requirement, hashes: tuple[str, ...], where: str, found: Found) -> tuple[str, ...]:
    """A hash pins one file: of ``name @ URL``, or of an exact version (``==1.0``, ``===1.0``; not a range, a
    wildcard or several specifiers)."""
    specs = list(req.specifier)
    exact = len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith(".*")
    if hashes and not req.url and not exact:
        found.warnings.append(f"{where}: the --hash options of {req} are not checked: a hash pins one file, "
                              f"which needs an exact version (write {req.name}==VERSION)")
        return ()
    return hashes
