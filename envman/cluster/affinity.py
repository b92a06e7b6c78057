"""PURE: Kubernetes node affinity from the lock, in NVIDIA GPU Feature Discovery's labels
(NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md, "Generated Labels"):

  nvidia.com/cuda.driver-version.major   the driver's major: Gt (floor's major − 1), i.e. at least the floor's branch
  nvidia.com/gpu.compute.major / .minor  the GPU's compute capability: the SASS the wheels carry (same major,
                                         minor at least the arch's; sm_90a exactly 9.0) or PTX (any capability ≥)
  nvidia.com/gpu.product                 the GPU model (NVML's name, spaces as '-'), where a profile names one

Node-selector terms are ORed and the expressions inside one term ANDed, so there is one term per capability
range, each with the driver (and product) expressions. The driver label only knows majors: the preflight in
the pod checks the full floor (580.65.06 on a 580.40 node).
"""

from __future__ import annotations

from typing import Any

from envman.portable.versions import split_arch_list, vt

DRIVER = "nvidia.com/cuda.driver-version.major"
CC_MAJOR = "nvidia.com/gpu.compute.major"
CC_MINOR = "nvidia.com/gpu.compute.minor"
PRODUCT = "nvidia.com/gpu.product"


def _expr(key: str, op: str, values: list[int] | list[str]) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": [str(v) for v in values]}


def capability_terms(arch_list: tuple[str, ...]) -> list[list[dict[str, Any]]]:
    """One list of expressions per capability range the arch list runs on."""
    sass, ptx = split_arch_list(arch_list)
    from_minor: dict[int, int] = {}
    exact: set[tuple[int, int]] = set()
    for a in sass:
        if len(a) > 2 and a[2] == "a":
            exact.add((a[0], a[1]))
        else:
            from_minor[a[0]] = min(a[1], from_minor.get(a[0], a[1]))
    terms: list[list[dict[str, Any]]] = []
    whole = sorted(m for m, lo in from_minor.items() if lo == 0)
    if whole:
        terms.append([_expr(CC_MAJOR, "In", whole)])
    for major, lo in sorted(from_minor.items()):
        if lo > 0:
            terms.append([_expr(CC_MAJOR, "In", [major]), _expr(CC_MINOR, "Gt", [lo - 1])])
    for major, minor in sorted(e for e in exact if not (e[0] in from_minor and from_minor[e[0]] <= e[1])):
        terms.append([_expr(CC_MAJOR, "In", [major]), _expr(CC_MINOR, "In", [minor])])
    for p in sorted({(a[0], a[1]) for a in ptx if len(a) <= 2 or a[2] != "a"}):
        terms.append([_expr(CC_MAJOR, "Gt", [p[0]])])
        terms.append([_expr(CC_MAJOR, "In", [p[0]])] + ([_expr(CC_MINOR, "Gt", [p[1] - 1])] if p[1] else []))
    return [t for i, t in enumerate(terms) if t not in terms[:i]]  # the first of equal terms (lists: unhashable)


def node_affinity(arch_list: tuple[str, ...], min_driver: str | None,
                  products: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """``affinity`` for a GPU pod; None when the lock constrains nothing (a CPU stack)."""
    common = []
    floor = vt(min_driver) if min_driver else ()
    if floor:
        common.append(_expr(DRIVER, "Gt", [floor[0] - 1]))
    if products:
        common.append(_expr(PRODUCT, "In", sorted(products)))
    terms = [common + t for t in capability_terms(arch_list)] or ([common] if common else [])
    if not terms:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}


def product_label(nvml_name: str) -> str:
    """GFD's nvidia.com/gpu.product value of a GPU's NVML name ("NVIDIA H100 80GB HBM3" → NVIDIA-H100-80GB-HBM3)."""
    return "-".join(nvml_name.split())
