"""PURE: when no stack fits — which constraints block, and the nearest stacks that would work if one
constraint moved (another release, another variant, a driver upgrade, another Python)."""

from __future__ import annotations

from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman.errors import ResolutionError
from envman.model import Matrix, Request, Variant, ptx_covers, sass_covers
from envman.resolve.candidates import (
    KINDS,
    Candidate,
    best_candidate,
    describe_target,
    pick_python,
    python_key,
    python_span,
    show_spec,
)


def _min_driver(matrix: Matrix, var: Variant) -> Version:
    cr = matrix.cuda_release(var.cuda)
    return cr.min_driver if cr else Version("0")


def summarize(c: Candidate, matrix: Matrix) -> dict[str, Any]:
    cr = matrix.cuda_release(c.var.cuda)
    return {
        "framework": {"name": c.rel.framework, "version": str(c.rel.version), "variant": c.var.name},
        "cuda": cr.label if cr else None,
        "python": c.python,
        "min_driver": str(cr.min_driver) if cr else None,
    }


def refusal(matrix: Matrix, req: Request, cands: list[Candidate], driver: Version) -> ResolutionError:
    fw = req.framework or ""
    spec_text = req.framework_text or fw
    in_spec = [c for c in cands if "framework" not in c.failures]
    conflicts: list[str] = []
    if not in_spec:
        known = sorted({c.rel.version for c in cands})
        conflicts.append(
            f"no {fw} release in the matrix matches '{spec_text}' (known: {known[0]} … {known[-1]})" if known
            else f"the matrix has no {fw} releases"
        )
    else:
        for kind in KINDS[1:]:
            if all(kind in c.failures for c in in_spec):
                conflicts.extend(_kind_conflict(kind, in_spec, req, driver, spec_text))
        if not conflicts:
            closest = min(in_spec, key=lambda c: (len(c.failures), [-x for x in c.rel.version.release]))
            conflicts.append(
                f"no single build of '{spec_text}' meets every constraint at once; closest, "
                f"{closest.rel.version} {closest.var.name}: " + "; ".join(closest.failures.values())
            )
    alternatives = _alternatives(matrix, req, cands, in_spec)
    target_text = ", ".join(describe_target(t) for t in req.targets) if not req.cpu else "CPU"
    msg = f"no {fw} stack satisfies '{spec_text}' for {target_text}"
    hint = None
    if alternatives:
        hint = "nearest working alternative: " + alternatives[0]["change"]
        if alternatives[0]["kind"] == "framework":  # as typed: '>=2.0' would take the newest, not 2.0 (issue 38)
            v = Version(alternatives[0]["framework"]["version"])
            hint += f": pass --framework '{fw}=={v.major}.{v.minor}.*'"
        elif alternatives[0]["kind"] == "cuda":  # as typed (EasyLM: "allow CUDA 12.1" named no option)
            hint += f": pass --cuda {alternatives[0]['cuda']}"
    elif fw:  # nothing moved by one step works: the pin itself is what blocks (torch==1.13.1+cu117 on an H100)
        hint = f"loosen the pin '{spec_text}' to '{fw}' (`--framework {fw}`) for the newest {fw} that serves {target_text}"
    return ResolutionError(msg, conflicts=conflicts, alternatives=alternatives, hint=hint)


def _kind_conflict(kind: str, in_spec: list[Candidate], req: Request, driver: Version, spec_text: str) -> list[str]:
    if kind == "arch":
        out = []
        for t in req.targets:
            if not any(sass_covers(c.var.archs, t.cc) or ptx_covers(c.var.ptx, t.cc) for c in in_spec):
                newest = max((max(c.var.archs) for c in in_spec if c.var.archs), default=None)
                oldest = min((min(c.var.archs) for c in in_spec if c.var.archs), default=None)
                span = f" (those builds carry {oldest.sm} … {newest.sm})" if newest and oldest else ""
                out.append(f"no build of '{spec_text}' carries SASS for {describe_target(t)}{span}")
        if not out:
            out.append(
                f"no single build of '{spec_text}' carries SASS for all of "
                + ", ".join(describe_target(t) for t in req.targets)
                + "; split the targets into profiles"
            )
        return out
    if kind == "platform":
        arch = in_spec[0].arch
        hosts = ", ".join(t.label for t in req.targets if t.gpu is not None and t.gpu.host_arch == arch)
        return [f"no build of '{spec_text}' has Linux {arch} wheels in the matrix ({hosts} sit in {arch} hosts)"]
    if kind == "driver":
        need = sorted({c.failures["driver"].split("requirement ≥ ")[-1] for c in in_spec})
        lowest = min(in_spec, key=lambda c: c.var.cuda or Version("0"))
        return [f"driver {driver} is too old for every CUDA variant of '{spec_text}'; the lowest, {lowest.var.name}: {lowest.failures['driver']}"] if need else []
    if kind == "python":
        pys = sorted({p for c in in_spec for p in c.rel.python}, key=python_key)
        return [f"'{spec_text}' has no wheels for Python {show_spec(req.python)} (it has {python_span(tuple(pys))})"]
    if kind == "cuda":
        have = sorted({str(c.var.cuda) for c in in_spec if c.var.cuda}, key=Version)
        return [f"no variant of '{spec_text}' has CUDA {req.cuda} (they have {', '.join(have)})"]
    if kind == "cudnn":
        return [sorted({c.failures['cudnn'] for c in in_spec})[0]]
    return []


def _alternatives(matrix: Matrix, req: Request, cands: list[Candidate],
                  in_spec: list[Candidate]) -> list[dict[str, Any]]:
    alts: list[dict[str, Any]] = []
    c: Candidate | None
    fw = req.framework or ""
    # 1. another release of the framework (nearest newer, nearest older, newest overall)
    outside = [c for c in cands if set(c.failures) == {"framework"}]
    if outside:
        lo = min((c.rel.version for c in in_spec), default=None)
        hi = max((c.rel.version for c in in_spec), default=None)
        newer = [c for c in outside if hi is not None and c.rel.version > hi]
        older = [c for c in outside if lo is not None and c.rel.version < lo]
        picks: list[Candidate] = []
        for side, edge in ((newer, min((c.rel.version for c in newer), default=None)),
                           (older, max((c.rel.version for c in older), default=None))):
            # the nearest release on that side, its preferred build
            picks += [max((c for c in side if c.rel.version == edge), key=Candidate.key)] if side else []
        newest = max(outside, key=Candidate.key)
        if newest not in picks:
            picks.append(newest)
        for c in picks:
            rel_line = f"{c.rel.version.major}.{c.rel.version.minor}"
            op = ">=" if hi is not None and c.rel.version > hi else "=="
            change = f"{fw}{op}{rel_line}" + ("" if op == ">=" else ".*") + f" ({c.rel.version} {c.var.name})"
            alts.append({"kind": "framework", "change": change, **summarize(c, matrix)})
    # 2. same framework request, one other constraint moved
    for kind in ("driver", "python", "cuda", "cudnn"):
        c = best_candidate(in_spec, frozenset({kind}))
        if c is not None and kind == "driver":
            # the smallest upgrade that runs the newest fitting release
            same = [x for x in in_spec if x.rel.version == c.rel.version and not (set(x.failures) - {"driver"})]
            c = min(same, key=lambda x: (bool(x.ptx_only), _min_driver(matrix, x.var), x.var.name))
        if c is None:
            continue
        s = summarize(c, matrix)
        if kind == "driver":
            change = f"upgrade the NVIDIA driver to ≥ {s['min_driver']} for {fw} {c.rel.version} {c.var.name}"
        elif kind == "python":
            py = pick_python(c.rel.python, SpecifierSet(), matrix.base_images.default_python)
            s["python"] = py
            change = f"use Python {py} ({fw} {c.rel.version} {c.var.name})"
        elif kind == "cuda":
            change = f"allow CUDA {s['cuda']} ({fw} {c.rel.version} {c.var.name})"
        else:
            change = f"drop the targets that cuDNN {c.var.cudnn} no longer supports"
        alts.append({"kind": kind, "change": change, **s})
    # 3. several targets no single build serves: what each would get alone
    if len(req.targets) > 1 and not alts:
        alts.append({"kind": "targets", "change": "split the targets into profiles (one stack per GPU generation)"})
    return alts
