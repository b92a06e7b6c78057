"""What envman knows about one framework on the host side: its names, its matrix file and the loader of
that file's schema, its companions, and how a resolution becomes exact requirement lines.

Everything generic (the matrix loader, the request parser, requirement discovery, the lock's pins) reads
these descriptions from the registry in ``envman.frameworks`` instead of naming torch or tensorflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envman._validate import Ctx
from envman.errors import UsageError
from envman.model import FrameworkRelease, Resolution


def exact_pins(res: Resolution, companions: tuple[str, ...]) -> list[str]:
    """``torch==2.14.1`` from PyPI, ``torch==2.6.0+cu124`` from the cu124 index, companions to match."""
    if res.framework is None:
        return []
    local = "" if res.index_url is None else f"+{res.variant}"
    extras = f"[{','.join(res.extras)}]" if res.extras else ""
    pins = [f"{res.package}{extras}=={res.version}{local}"]
    comp = dict(res.companions)
    for c in companions:
        v = comp.get(c)
        if v is None:
            raise UsageError(
                f"companions: {c} has no release matching {res.framework} {res.version}",
                hint=f"drop {c} from companions, or pin an older {res.framework}",
            )
        pins.append(f"{c}=={v}{local}")
    return pins


@dataclass(frozen=True)
class Framework:
    name: str  # the key in Matrix.frameworks, the stack's framework name, the smoke program's dispatch key
    matrix_file: str  # its file under matrices/, with ``schema: 1`` like every other
    # the schema loader of that file: (parsed YAML, validation context) → releases, newest first;
    # problems go to the context, never raised
    load_releases: Callable[[Any, Ctx], tuple[FrameworkRelease, ...]]
    distributions: tuple[str, ...]  # pip names (canonical) that install it: found in requirements, pinned by envman
    aliases: tuple[str, ...] = ()  # other names a user may type for --framework (``tf``, ``pytorch``)
    companions: tuple[str, ...] = ()  # packages built in lockstep with it (torchvision, torchaudio)
    # the exact requirement lines of a resolution (res, wanted companions) → ["torch==2.6.0+cu124", …]
    pins: Callable[[Resolution, tuple[str, ...]], list[str]] = exact_pins
    # the framework's wheels pin their NVIDIA libraries exactly (torch); False when they only set floors
    # (tensorflow[and-cuda]): the lock then constrains those wheels to the variant's tested versions
    pins_cuda_wheels: bool = True
    # the packages its own wheel index may serve (torch's index: torch, its companions, triton); nothing else is
    # ever looked up there (lock/uv.py pins just these names to it, beside every nvidia-* wheel)
    index_packages: tuple[str, ...] = ()
    # other frameworks' distributions a repository may name beside this one, kept on the CPU in the same image
    # (JAX on the GPU, TensorFlow for tf.data input pipelines): (distribution, the CPU distribution installed)
    cpu_beside: tuple[tuple[str, str], ...] = ()
    # extras of the framework's distribution that choose a CUDA major (jax[cuda12] -> "12")
    cuda_extras: tuple[tuple[str, str], ...] = ()
    # extras that name hardware no envman image serves (jax[tpu]): (extra, why) — a requirement with one is refused
    refused_extras: tuple[tuple[str, str], ...] = ()
    # the share of each GPU the framework's allocator claims by default, and the variable that changes it
    # (JAX: XLA preallocates 75%, XLA_PYTHON_CLIENT_MEM_FRACTION); None: the whole GPU (torch, TensorFlow)
    memory_fraction: tuple[str, float] | None = None
    # the top-level modules a project's code imports to use it, each with the distributions that provide it
    # (keras ships with TensorFlow; flax is JAX's): a project whose files name none of them but whose code
    # imports one uses this framework (project/codeimports.py)
    modules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def refusal(self, req: Requirement, origin: str) -> UsageError | None:
        """The error for a requirement of this framework that asks for an extra no image can serve."""
        why = next((w for e, w in self.refused_extras if e in {canonicalize_name(x) for x in req.extras}), None)
        if why is None:
            return None
        return UsageError(f"{origin}: {req}: {why}",
                          hint=f"name the GPU build instead ({', '.join(f'{self.name}[{e}]' for e, _ in self.cuda_extras[:2])}"
                          f" or plain {self.name} for the CPU), or keep that line in a file envman skips (requirements-tpu.txt)")


def on_cpu(req: Requirement, cpu_dist: str) -> Requirement:
    """``tensorflow>=2.15; python_version>='3.9'`` as ``tensorflow-cpu>=2.15; …``: the same range, the CPU wheel."""
    marker = f"; {req.marker}" if req.marker is not None else ""
    return Requirement(f"{cpu_dist}{req.specifier}{marker}")
