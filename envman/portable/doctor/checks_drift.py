"""Drift: the host or container stack against the project's envman.lock."""

from __future__ import annotations

from typing import Any

from ..frameworks import label
from ..versions import major_minor, sm, split_local, vcmp, vt
from .findings import Finding, error, info, warn
from .knowledge import Knowledge, covers, same_prefix
from .remedies import capability, install
from .view import FactsView, as_dict, as_list, as_str, group_label, norm_name

SHOWN = 5  # differing packages named in the verdict


def check_lock(v: FactsView, k: Knowledge) -> list[Finding]:
    if "lock" not in v.f or v.f.get("lock") is None:
        return []  # no envman.lock: nothing to drift from
    lock = as_dict(v.f.get("lock"))
    path = (as_str(lock.get("path")) or "envman.lock").rsplit("/", 1)[-1]  # it sits in the project directory
    if lock.get("missing") or lock.get("unlocked"):
        return _not_locked(v, lock, path)
    if as_str(lock.get("error")):
        return [info("lock-unreadable", f"{path}: {lock['error']}: drift not checked",
                     "regenerate it with `envman lock`")]
    fw = as_dict(lock.get("framework"))
    if not fw and not as_str(lock.get("python")):
        return [info("lock-unreadable", f"{path} has no stack this envman understands: drift not checked",
                     "regenerate it with `envman lock`")]
    return (_framework(v, k, fw, path) + _python(v, lock, path) + _cudnn(v, lock, path)
            + _packages(v, lock, path, skip=as_str(fw.get("name"))) + _archs(v, lock, path) + _driver(v, lock, path))


def _not_locked(v: FactsView, lock: dict[str, Any], path: str) -> list[Finding]:
    """A project with nothing locked is not ready to build (an image always carries its envman.lock)."""
    if lock.get("unlocked"):
        return [warn("lock-missing", f"{path} has no Python lock (written by `envman init --no-lock`): the image "
                                     "cannot be built", "run `envman lock`")]
    files = [str(f) for f in lock.get("files") or []]
    if "envman.yaml" in files:
        return [warn("lock-missing", f"envman.yaml but no {path}: nothing is locked, the image cannot be built",
                     "run `envman lock`")]
    return [warn("lock-missing", f"no {path} beside {', '.join(files)}: the project's environment is not locked",
                 "run `envman init` (it writes envman.yaml and the locks)")]


def _framework(v: FactsView, k: Knowledge, fw: dict[str, Any], path: str) -> list[Finding]:
    name, ver, var = as_str(fw.get("name")), as_str(fw.get("version")), as_str(fw.get("variant"))
    if not name or not ver:
        return []
    locked = label(name, ver, var)
    fix = _reinstall(k, name, split_local(ver)[0], var, as_str(fw.get("index_url")), v)
    fw_have = v.framework(name)
    if fw_have is None:
        if not v.pip:
            return []  # packages unknown: cannot tell
        return [warn("lock-drift", f"{path} pins {locked}, but {name} is not installed here", fix)]
    have_base, have_var = fw_have.base, fw_have.variant
    same_ver = vcmp(split_local(ver)[0], have_base) == 0 and vt(split_local(ver)[0]) == vt(have_base)
    same_var = not var or not have_var or var == have_var
    if same_ver and same_var:
        return []
    return [warn("lock-drift", f"{path} pins {locked}, installed is {fw_have.label}", fix)]


def _reinstall(k: Knowledge, name: str, version: str, variant: str | None, index: str | None, v: FactsView) -> str:
    """What installs the locked build again: the knowledge's install command where it knows that release
    (jax[cuda13]==V, torch with its companions and index), else the release from the lock's own index."""
    rel = k.release(name, version)
    if rel is not None and vcmp(rel.version, version) == 0:
        return install(rel, rel.build(variant), v)
    build = rel.build(variant) if rel is not None else None
    if rel is not None and build is not None and build.extra:  # another patch of a known line: its extra
        return f"pip install '{rel.package}[{build.extra}]=={version}'"
    return f"pip install {name}=={version}" + (f" --index-url {index}" if index else "")


def _python(v: FactsView, lock: dict[str, Any], path: str) -> list[Finding]:
    want = major_minor(lock.get("python")) if as_str(lock.get("python")) else None
    if not want or not v.python or want == v.python:
        return []
    return [warn("lock-drift", f"{path} pins Python {want}, this environment runs Python {v.python}",
                 f"recreate the environment with Python {want} (uv venv -p {want})")]


def _cudnn(v: FactsView, lock: dict[str, Any], path: str) -> list[Finding]:
    want = as_str(lock.get("cudnn"))
    if not want:
        return []
    pkg, have = next(((n, ver) for n, ver in sorted(v.pip.items()) if n.startswith("nvidia-cudnn")), ("", ""))
    if not have or same_prefix(want, have):
        return []
    return [warn("lock-drift", f"{path} pins cuDNN {want}, installed is {pkg} {have}", f"pip install {pkg}=={want}")]


def _packages(v: FactsView, lock: dict[str, Any], path: str, skip: str | None) -> list[Finding]:
    """Every pinned package; the framework itself has its own finding."""
    pins = {norm_name(k2): str(val) for k2, val in as_dict(lock.get("packages")).items() if norm_name(k2) != skip}
    if not pins or not v.pip:
        return []
    diff = []
    for name, want in sorted(pins.items()):
        have = v.pip.get(name)
        if have is None:
            diff.append(f"{name} (locked {want}, missing)")
            continue
        w, h = split_local(want), split_local(have)
        if w[0] != h[0] or (w[1] and h[1] and w[1] != h[1]):
            diff.append(f"{name} {have} (locked {want})")
    if not diff:
        return []
    more = f", and {len(diff) - SHOWN} more" if len(diff) > SHOWN else ""
    req = as_str(lock.get("requirements")) or "requirements.lock.txt"
    return [warn(
        "lock-drift",
        f"{len(diff)} package{'s differ' if len(diff) != 1 else ' differs'} from {path}: "
        f"{', '.join(diff[:SHOWN])}{more}",
        f"pip install -r {req} (or: uv pip sync {req})",
    )]


def _archs(v: FactsView, lock: dict[str, Any], path: str) -> list[Finding]:
    archs = [str(a) for a in as_list(lock.get("arch_list"))]
    ptx = [str(a) for a in as_list(lock.get("ptx"))]
    if not archs or not v.gpus:
        return []
    return [warn(
        "lock-drift",
        f"{group_label(v.gpus_with_cc(c))} is {capability(c)}, not in {path}'s arch list ({' '.join(archs)}): the "
        f"locked stack will not run on it",
        f"add {sm(c)} to the project's target GPUs and run `envman lock` again",
    ) for c in v.gpu_ccs() if covers(archs, ptx, c) is None]


def _driver(v: FactsView, lock: dict[str, Any], path: str) -> list[Finding]:
    floor = as_str(lock.get("min_driver_minor_compat")) or as_str(lock.get("min_driver"))
    cuda = as_str(lock.get("cuda"))
    if not v.driver or not floor or not cuda or vcmp(v.driver, floor) >= 0:
        return []
    return [error(
        "lock-driver",
        f"driver {v.driver} is older than {path}'s CUDA {cuda} stack needs (≥ {floor}): the locked image will not "
        f"start its GPU work here",
        f"install NVIDIA driver ≥ {as_str(lock.get('min_driver')) or floor}",
    )]


CHECKS = (check_lock,)
