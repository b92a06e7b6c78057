"""Wheel variants (PEP 817, and PEP 825 "Wheel Variants: Package Format", both DRAFTS): the variant properties a
framework build would carry, derived from the matrix, as envman.lock records them (``wheel_variants``). The check
of what an index says about its variant wheels against the matrix is the repository's workshop
(tools/matrix/pep825.py, ``python -m tools.matrix variants``).

Names follow PEP 825 exactly (peps/pep-0825.rst, python/peps 02bcf97): a property is
``{namespace} :: {feature_name} :: {feature_value}``; a wheel's ``*.dist-info/variant.json`` and the index's
``{name}-{version}-variants.json`` hold ``$schema``, ``default-priorities`` (``namespace``, ``feature``,
``property``) and ``variants`` ({label: {namespace: {feature: [values]}}}); a label is ``^[0-9a-z_.]{1,16}$``,
``null`` is the variant with no properties. The ``nvidia`` namespace's features are those of the NVIDIA provider
(wheelnext/nvidia-variant-provider, plugin.py): ``cuda_version_lower_bound`` (the driver's CUDA version must be
at least this), ``cuda_version_upper_bound`` (below this, exclusive), ``sm_arch`` (``{major}{minor}_real`` for
SASS, ``{major}{minor}_virtual`` for PTX; at least one must suit the GPU).

What envman derives for a build from its matrix entry: ``cuda_version_lower_bound`` = the variant's CUDA X.Y
(full driver compatibility, the floor envman's resolver prefers), ``sm_arch`` = the measured SASS list as
``_real`` and the PTX list as ``_virtual``, no ``cuda_version_upper_bound``: a newer driver runs an older CUDA
build (NVIDIA's backward compatibility), and PyTorch's own experimental variant wheels
(download.pytorch.org/whl/test/variant, torch 2.8.0) carry none either. Those wheels use the variant's name as
their label (``cu128``) and lexically sorted values, as here. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from packaging.version import Version

from envman.model import Cc, Resolution

PEP = "PEP 825 (Wheel Variants: Package Format)"
STATUS = "draft: informational only, no installer reads it yet"
NAMESPACE = "nvidia"
LOWER, UPPER, SM = "cuda_version_lower_bound", "cuda_version_upper_bound", "sm_arch"
NULL = "null"

Properties = dict[str, dict[str, list[str]]]  # {namespace: {feature: [values]}}, as in variant.json


def sm_value(cc: Cc, kind: str) -> str | None:
    """``sm_90`` → ``90_real``; an arch-specific or family target (``sm_90a``, ``sm_100f``) has no value in the
    NVIDIA provider's catalogue, so it is left out."""
    return None if cc.suffix else f"{cc.major}{cc.minor}_{kind}"


def properties_for(cuda: str | None, archs: Iterable[str], ptx: Iterable[str]) -> Properties:
    """The PEP 825 properties of a build with CUDA ``cuda`` (None: a CPU build, no properties: the null variant)
    and these SASS/PTX lists (``sm_90`` …)."""
    if cuda is None:
        return {}
    values = [sm_value(Cc.parse(a), "real") for a in archs] + [sm_value(Cc.parse(p), "virtual") for p in ptx]
    v = Version(cuda)
    return {NAMESPACE: {LOWER: [f"{v.major}.{v.minor}"], SM: sorted({x for x in values if x})}}


def label_for(variant_name: str | None) -> str:
    """The label PyTorch's variant wheels use: the variant's name (``cu128``); a CPU build is the null variant."""
    return NULL if variant_name in (None, "cpu") else str(variant_name)


def lock_section(res: Resolution) -> dict[str, Any] | None:
    """envman.lock's ``wheel_variants``: per framework wheel, its label and properties (None without a framework).
    Derived from the stack section alone (CUDA, arch and PTX lists, variant), which the lock's digest covers, so
    the lock keeps it outside its digest: an unchanged project keeps its lock_hash."""
    if res.framework is None or res.package is None:
        return None
    wheel = {"label": label_for(res.variant), "properties": properties_for(res.cuda, res.arch_list, res.ptx)}
    return {"pep": PEP, "status": STATUS, "wheels": {res.package: wheel}}
