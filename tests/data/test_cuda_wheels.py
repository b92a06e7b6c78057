"""The CUDA-numbered NVIDIA wheels (cuda.yaml toolkit_wheels) held to what NVIDIA and TensorFlow publish.

Two snapshots of real wheel METADATA (tests/fixtures/metadata/, each headed by its URL and date): the pins of
NVIDIA's cuda-toolkit metapackage — which component versions NVIDIA ships with each toolkit release — and
TensorFlow's [and-cuda] requirements. A lock holds a framework's nvidia-* wheels to the variant's CUDA X.Y.*
(lock/pins.py cuda_constraints); a constraint that no version NVIDIA or TensorFlow names can meet makes uv
fail (issue 20: nvidia-cublas-cu11==11.8.* against TensorFlow 2.14's ==11.11.3.6).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from envman.lock.pins import cuda_constraints
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

_META = Path(__file__).parent.parent / "fixtures" / "metadata"


def _toolkit_pins() -> list[tuple[Version, dict[str, str]]]:
    """(toolkit version, {wheel name: the version NVIDIA pins (the floor of a range)}) per cuda-toolkit release."""
    rows = []
    for line in (_META / "cuda-toolkit-pins.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            ver, *reqs = line.split("\t")
            pins = {}
            for r in map(Requirement, reqs):
                spec = next(s for s in r.specifier if s.operator in ("==", ">="))
                pins[r.name] = spec.version.removesuffix(".*")
            rows.append((Version(ver), pins))
    return rows


def _tf_and_cuda() -> dict[str, list[Requirement]]:
    """tensorflow patch -> its [and-cuda] Requires-Dist."""
    out: dict[str, list[Requirement]] = {}
    cur = None
    for line in (_META / "tensorflow-and-cuda.txt").read_text().splitlines():
        if m := re.match(r"\[(\S+)\]", line):
            cur = out.setdefault(m.group(1), [])
        elif line and not line.startswith("#") and cur is not None:
            cur.append(Requirement(line))
    return out


def _x_y(v: str) -> tuple[int, int]:
    major, minor = Version(v).release[:2]
    return major, minor


def test_the_toolkit_numbered_wheels_carry_the_toolkits_minor_in_nvidias_own_pairing(matrix):
    tw = matrix.toolkit_wheels
    rows = _toolkit_pins()
    assert len(rows) >= 40 and {r.major for r, _ in rows} == {11, 12, 13}
    seen = diverged = 0
    for toolkit, pins in rows:
        held = tw.minor_numbered(toolkit.major)
        for base in tw.names:
            for name in tw.for_major(base, toolkit.major):
                if name not in pins:
                    continue
                seen += 1
                got = _x_y(pins[name])
                assert got[0] == toolkit.major, f"{name} {pins[name]} in CUDA {toolkit}: not its major (doctor)"
                if base in held:
                    assert got == (toolkit.major, toolkit.minor), (
                        f"CUDA {toolkit} ships {name} {pins[name]}: the lock's {name}=={toolkit.major}."
                        f"{toolkit.minor}.* would refuse it; list it under toolkit_wheels.own_minor")
                else:
                    diverged += got != (toolkit.major, toolkit.minor)
    assert seen >= 300
    # own_minor is no wider than the facts: each (name, major) it frees diverges in some release of that major
    for base, majors in tw.own_minor:
        for mj in majors:
            assert any(_x_y(p[n]) != (t.major, t.minor) for t, p in rows if t.major == mj
                       for n in tw.for_major(base, mj) if n in p), f"{base} in CUDA {mj} follows the toolkit"
    assert diverged > 0


TF_LINES = ["2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21"]


@pytest.mark.parametrize("line", TF_LINES)
def test_tensorflows_and_cuda_pins_meet_the_locks_constraints(matrix, line):
    res = resolve_stack(matrix, build_request(matrix, framework=f"tensorflow=={line}.*", targets=["a100"],
                                              python="3.11"))
    rel = next(r for r in matrix.frameworks["tensorflow"] if str(r.version) == str(res.version))
    assert "and-cuda" in rel.extras and res.cuda, f"tensorflow {line} is no [and-cuda] line in the shipped matrix"
    cons = {(c := Requirement(x)).name: c.specifier for x in cuda_constraints(res, matrix.toolkit_wheels)}
    assert f"nvidia-cuda-runtime-cu{res.cuda.split('.')[0]}" in cons
    patches = [p for p in _tf_and_cuda() if p.startswith(line + ".")]
    assert patches, f"no [and-cuda] METADATA of tensorflow {line} in tests/fixtures/metadata"
    for patch in patches:
        for req in _tf_and_cuda()[patch]:
            if req.name not in cons:
                continue
            want = next(s.version for s in req.specifier if s.operator in ("==", ">="))
            assert cons[req.name].contains(want), (
                f"tensorflow {patch}[and-cuda] asks {req.name}{req.specifier}; the lock's constraint "
                f"{req.name}{cons[req.name]} (CUDA {res.cuda}) refuses {want}")
