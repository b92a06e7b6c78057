"""Whole-stack lockfiles. uv resolves the Python set (never a home-made resolver); envman.lock is
serialized from the model: same inputs, same bytes.

Files (in the project root):
  envman.lock                       the stack: resolution, base image, apt packages, lock names, hashes (JSON)
  requirements.lock.txt             every Python package, pinned with sha256 hashes (uv pip compile)
  requirements.framework.lock.txt   the subset the framework needs: its own image layer
  pylock.toml                       PEP 751, the same resolution (uv)
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from envman import __version__
from envman.errors import InternalError, ToolError, UsageError
from envman.files import sha256
from envman.lock.lockfile import LOCK_FILE, LOCK_VERSION, Lock  # noqa: F401  (LOCK_FILE: the lock's name, re-exported)
from envman.redact import redact
from envman.model import Resolution
from envman.resolve.summary import resolution_dict

REQ_LOCK = "requirements.lock.txt"
FW_LOCK = "requirements.framework.lock.txt"
PYLOCK = "pylock.toml"
PLATFORM = "x86_64-manylinux_2_28"
_CUDA_MAJOR_PKG = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)$")


def uv_binary() -> str:
    """The uv envman pins (a dependency): its version is part of what makes a lock reproducible."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        import shutil

        exe = shutil.which("uv")
        if exe is None:
            raise ToolError("uv is not installed", hint="pip install envman installs it; or put uv on PATH") from None
        return exe


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
            header.append(redact(line))  # an index token from UV_INDEX_URL never lands in a lock file
            continue
        if not line.strip() or (line.startswith("#") and cur is None):
            continue
        if not line.startswith((" ", "#")):
            # name==version, or name @ URL for a VCS/URL requirement (uv pins a git URL to its commit)
            m = re.match(r"^([A-Za-z0-9._-]+)(\[[^\]]*\])?(?:==| @ )([^ \\;]+)", line)
            if not m:
                raise InternalError(f"uv output: unexpected line {line!r}", hint="report this to envman's maintainers")
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


def check_cuda_majors(lock: PythonLock, res: Resolution) -> None:
    """A package dragging in nvidia-* wheels of another CUDA major breaks the stack at import time."""
    if res.cuda is None:
        return
    want = int(res.cuda.split(".")[0])
    for p in lock.packages:
        m = _CUDA_MAJOR_PKG.match(p.name)
        if m and int(m.group(1)) != want:
            who = ", ".join(p.via) or "a requirement"
            raise UsageError(
                f"{p.name}=={p.version} (CUDA {m.group(1)}, pulled in by {who}) contradicts the stack's CUDA {res.cuda}",
                hint=f"pin a version of {who} built for CUDA {want}, or choose a framework variant for CUDA {m.group(1)}",
            )


@dataclass(frozen=True)
class UvCommand:
    args: list[str]
    env: dict[str, str]
    cwd: str | None = None


def uv_compile_command(input_file: Path, output: Path, python: str, index_urls: list[str], fmt: str | None = None,
                       offline: bool = False, upgrade: bool = False) -> UvCommand:
    # uv runs in the input's directory with relative names: its `# via -r requirements.in` annotations
    # must not carry a temporary path, or the same inputs would not give the same bytes.
    args = [
        uv_binary(), "pip", "compile", input_file.name, "--python-platform", PLATFORM, "--python-version", python,
        "--generate-hashes", "--no-header", "--emit-index-url", "--quiet", "-o", output.name,
    ]
    for url in index_urls:
        args += ["--extra-index-url", url]
    if fmt:
        args += ["--format", fmt]
    if offline:
        args.append("--offline")
    if upgrade:
        args.append("--upgrade")
    env = dict(os.environ)
    # TLS-intercepting proxies: uv reads SSL_CERT_FILE; reuse the bundle pip is told to use.
    cert = env.get("SSL_CERT_FILE") or env.get("PIP_CERT") or env.get("REQUESTS_CA_BUNDLE")
    if cert:
        env["SSL_CERT_FILE"] = cert
    return UvCommand(args, env, str(input_file.parent))


def run_uv(cmd: UvCommand) -> None:
    try:
        out = subprocess.run(cmd.args, capture_output=True, text=True, env=cmd.env, cwd=cmd.cwd, check=False)
    except OSError as exc:
        raise ToolError(f"cannot run uv: {exc}", hint="reinstall envman (it depends on uv)") from None
    if out.returncode != 0:
        msg = redact((out.stderr or out.stdout).strip())
        lines = [ln for ln in msg.splitlines() if ln.strip()]
        first = next((ln for ln in lines if "No solution" in ln or "error" in ln.lower()), lines[0] if lines else "failed")
        raise ToolError(f"uv could not resolve the requirements: {first.strip()}", hint="uv says:\n" + "\n".join(lines[-15:]))


@dataclass
class LockResult:
    python_lock: PythonLock
    req_text: str  # requirements.lock.txt body (without our header)
    fw_text: str
    pylock_text: str | None


def compile_python_lock(lines: list[str], python: str, index_urls: list[str], roots: list[str], res: Resolution,
                        pylock: bool = True, while_waiting=None, previous: tuple[str | None, str | None] = (None, None),
                        upgrade: bool = False) -> LockResult:
    """One online uv resolution writes requirements.lock.txt (hashes and the ``# via`` graph the framework
    layer is cut from); uv emits PEP 751 in a separate run, which is done from uv's cache (--offline) at the
    same time. That run must agree package for package with the first: if the cache was cold or stale it
    is redone, offline, once the online run has refreshed the cache.

    ``previous`` (the current requirements lock and pylock bodies) seed uv's output files: uv keeps the
    pins that still satisfy the inputs, as ``uv lock`` does — a re-lock does not churn, and it is faster.
    ``upgrade`` re-resolves everything to the newest allowed versions."""
    with tempfile.TemporaryDirectory(prefix="envman-lock-") as td:
        tdp = Path(td)
        inp = tdp / "requirements.in"
        inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        if not upgrade:
            for name, text in zip(("out.txt", "pylock.toml"), previous):
                if text:
                    (tdp / name).write_text(text, encoding="utf-8")
        main = uv_compile_command(inp, tdp / "out.txt", python, index_urls, upgrade=upgrade)
        side = uv_compile_command(inp, tdp / "pylock.toml", python, index_urls, fmt="pylock.toml", offline=True,
                                  upgrade=upgrade)
        with ThreadPoolExecutor(max_workers=2) as pool:
            fut_main = pool.submit(run_uv, main)
            fut_side = pool.submit(_try_uv, side) if pylock else None
            if while_waiting is not None:
                while_waiting()  # uv waits on the network: use the time (imports, template compile)
            fut_main.result()
            side_ok = fut_side.result() if fut_side else False
        text = redact((tdp / "out.txt").read_text(encoding="utf-8"))
        lock = parse_uv_output(text)
        py_text = None
        if pylock:
            want = {p.name: p.version for p in lock.packages if "://" not in p.version}
            py_text = redact((tdp / "pylock.toml").read_text(encoding="utf-8")) if side_ok else None
            if py_text is None or pylock_versions(py_text) != want:
                run_uv(side)  # the cache is warm now
                py_text = redact((tdp / "pylock.toml").read_text(encoding="utf-8"))
                if pylock_versions(py_text) != want:
                    raise ToolError("uv's pylock.toml and requirements.lock.txt disagree",
                                     hint="re-run `envman lock`; report it if it persists")
    check_cuda_majors(lock, res)
    closure = framework_closure(lock, roots)
    return LockResult(lock, lock.render(), lock.render(closure), py_text)


def _try_uv(cmd: UvCommand) -> bool:
    try:
        run_uv(cmd)
        return True
    except ToolError:
        return False


def pylock_versions(text: str) -> dict[str, str]:
    from envman._compat import tomllib

    doc = tomllib.loads(text)
    # a VCS/URL package is pinned by its commit/URL, compared through requirements.lock.txt's line
    return {canonicalize_name(p["name"]): str(p["version"]) for p in doc.get("packages", [])
            if not any(k in p for k in ("vcs", "archive", "directory"))}


# --- envman.lock ---------------------------------------------------------------------------------


def stack_data(res: Resolution) -> dict:
    d = resolution_dict(res)
    for k in ("notes", "warnings", "driver", "driver_assumed", "driver_mode", "base_image", "base_kind"):
        d.pop(k, None)
    return d


def build_lock(*, name: str, inputs_hash: str, res: Resolution, base_image: str, base_kind: str,
               base_digest: str | None, system_packages: list[str], req_text: str | None, fw_text: str | None,
               pylock: bool, profile: str | None = None, file_names: dict[str, str] | None = None,
               inputs: dict[str, str] | None = None, dockerfile: str | None = None) -> Lock:
    names = {"requirements": REQ_LOCK, "framework": FW_LOCK, "pylock": PYLOCK, **(file_names or {})}
    body = {
        "lock_version": LOCK_VERSION,
        "envman_version": __version__,
        "name": name,
        "profile": profile,
        "inputs_hash": inputs_hash,
        "stack": stack_data(res),
        "base_image": {
            "ref": base_image,
            "kind": base_kind,
            "digest": base_digest,
            "note": None if base_digest else "digest unpinned: no registry answered when locking",
        },
        "system_packages": sorted(system_packages),
        "python_lock": {
            "requirements": names["requirements"] if req_text is not None else None,
            "framework": names["framework"] if fw_text is not None else None,
            "pylock": names["pylock"] if pylock else None,
            "requirements_sha256": sha256(req_text) if req_text is not None else None,
            "framework_sha256": sha256(fw_text) if fw_text is not None else None,
            "platform": PLATFORM,
        },
    }
    if inputs is not None:
        body["inputs"] = inputs
    if dockerfile is not None:
        body["dockerfile"] = dockerfile
    return Lock.create(body)
