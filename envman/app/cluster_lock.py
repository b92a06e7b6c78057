"""One envman.lock → the facts every cluster file takes from it (cluster/plan.py ``LockFacts``), with each value
that reaches a file held to its grammar first: a lock is a file people commit, and anyone can rewrite it with a
matching hash, so it is read as untrusted input."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envman.cluster import values as v
from envman.cluster.plan import LockedTarget, LockFacts
from envman.errors import LockError
from envman.lock.lockfile import Lock
from envman.model import Gpu

_REQUIRE_DRIVER = re.compile(r'NVIDIA_REQUIRE_CUDA="[^"]*driver>=([0-9.]+)')


def lock_facts(root: Path, lock: Lock, command: tuple[str, ...]) -> LockFacts:
    if not lock.is_intact():
        raise LockError(f"{_lock_file(lock)} was edited by hand", hint="run `envman lock` to regenerate it")
    check_lock_values(lock, command)
    st = lock.stack
    fw = st.get("framework") or {}
    gpu = bool(st.get("cuda")) and fw.get("variant") != "cpu"
    targets = tuple(LockedTarget(str(t.get("id")), str(t.get("name")), str(t.get("compute_capability")))
                    for t in st.get("targets") or [] if isinstance(t, dict))
    pushed = lock.get("pushed") or {}
    gpus = _matrix_gpus(targets) if gpu or lock.profile else []
    return LockFacts(
        name=str(lock.name), profile=lock.profile, lock_hash=lock.lock_hash, framework=fw.get("name"),
        framework_version=fw.get("version"), gpu=gpu, min_driver=driver_floor(root, lock) if gpu else None,
        arch_list=tuple(st.get("arch_list") or ()) + tuple(f"compute_{p.split('_')[-1]}" for p in st.get("ptx") or ()),
        targets=targets, command=tuple(command), pinned=pushed.get("pinned"),
        products=_products(gpus) if lock.profile else (), summary=_summary(st),
        gpu_mem_gib=max((g.memory_gib for g in gpus if g.memory_gib), default=None) if gpu else None,
    )


def _lock_file(lock: Lock) -> str:
    return f"envman.{lock.profile}.lock" if isinstance(lock.profile, str) and lock.profile else "envman.lock"


def check_lock_values(lock: Lock, command: tuple[str, ...]) -> None:
    """Every value of the lock that reaches a cluster file, held to its grammar: a newline in its ``name`` or a
    framework version must not become a line of every sbatch."""
    st = lock.stack
    fw = st.get("framework") or {}
    fw = fw if isinstance(fw, dict) else {"name": fw}
    lists: dict[str, list | tuple] = {k: st[k] if isinstance(st.get(k), list) else () for k in ("arch_list", "ptx", "targets")}
    checks: list[tuple[str, object, str | None]] = [(f"stack.{k}", st[k], "is not a list")
                                                   for k, got in lists.items() if got == () and st.get(k)]
    checks += [("name", lock.name, v.matches(v.NAME, lock.name, "an image name like my-trainer")),
              ("lock_hash", lock.lock_hash, v.matches(v.HASH, lock.lock_hash, "a sha256 (64 hex digits)"))]
    if lock.profile is not None:
        checks.append(("profile", lock.profile, v.matches(v.NAME, lock.profile, "a profile name")))
    checks += [(f"stack.framework.{k}", fw[k], v.matches(v.VERSION, fw[k], "a name or version"))
               for k in ("name", "version", "variant") if fw.get(k) is not None]
    checks += [(f"stack.{k}", st[k], v.matches(v.VERSION, str(st[k]), "a version"))
               for k in ("cuda", "python") if st.get(k) is not None]
    checks += [(f"stack.{k}", st[k], v.matches(v.DRIVER, st[k], "a driver version like 570.124.06"))
               for k in ("min_driver", "min_driver_minor_compat") if st.get(k) is not None]
    checks += [(f"stack.{k}[{i}]", a, v.matches(v.ARCH, a, "an architecture like sm_90"))
               for k in ("arch_list", "ptx") for i, a in enumerate(lists[k])]
    checks += [(f"stack.targets[{i}].{k}", val, v.matches(v.WORD, str(val), "a GPU's name or id"))
               for i, t in enumerate(lists["targets"]) for k in ("id", "name", "compute_capability")
               for val in [t.get(k) if isinstance(t, dict) else t]]
    pushed = lock.get("pushed")
    if isinstance(pushed, dict) and pushed.get("pinned") is not None:
        checks.append(("pushed.pinned", pushed["pinned"], v.image_ref(pushed["pinned"], pinned=True)))
    checks += [(f"command[{i}]", word, v.control(word)) for i, word in enumerate(command)]
    for where, value, problem in checks:
        if problem:
            raise LockError(f"{_lock_file(lock)}: {where}: {str(value)[:80]!r} {problem}",
                            hint="the value reaches the cluster files: regenerate the lock with `envman lock` (and "
                                 "`envman build --push` for pushed.pinned)")


def driver_floor(root: Path, lock: Lock) -> str | None:
    """The floor the image's own guard states: NVIDIA_REQUIRE_CUDA's ``driver>=`` when the stack runs through
    minor-version compatibility, else the lock's full-compatibility driver."""
    st = lock.stack
    from envman.inputs import MAX_GENERATED, present, read_input

    name = str(lock.dockerfile or "Dockerfile")
    text = read_input(root / name, name, MAX_GENERATED) if present(root / name) else ""  # a FIFO is named, not absent
    m = _REQUIRE_DRIVER.search(text)
    return m.group(1) if m else (st.get("min_driver") or st.get("min_driver_minor_compat"))


def _summary(st: Any) -> str:
    fw = st.get("framework") or {}
    parts = [f"{fw.get('name')} {fw.get('version')} {fw.get('variant')}"] if fw else ["no framework"]
    parts.append(f"CUDA {st['cuda']}" if st.get("cuda") else "CPU")
    parts.append(f"Python {st.get('python')}")
    if st.get("arch_list"):
        parts.append(" ".join(st["arch_list"]))
    return ", ".join(parts)


def _matrix_gpus(targets: tuple[LockedTarget, ...]) -> list[Gpu]:
    """The lock's target GPUs as matrices/gpus.yaml describes them (host memory is sized for the biggest)."""
    from envman.matrix.load import load_matrix

    by_id = {g.id: g for g in load_matrix().gpus}
    return [by_id[t.id] for t in targets if t.id in by_id]


def _products(gpus: list[Gpu]) -> tuple[str, ...]:
    """GFD product labels of a profile's GPUs: their NVML-style names in matrices/gpus.yaml (name and aliases
    that begin with the vendor word, as NVML reports them), spaces as '-'."""
    from envman.cluster.affinity import product_label

    return tuple(sorted({product_label(n) for g in gpus for n in (g.name, *g.aliases)
                         if re.match(r"^(NVIDIA|Tesla|Quadro) \S", n)}))
