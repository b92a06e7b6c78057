"""Markers false in the image are not requirements of the image (issue 38, class 9): the smoke test failed a good
image over `mlx; sys_platform == 'darwin'`. The class is any marker: each generated one is judged against the image
(Linux, CPython, the stack's Python and CPU architecture) by an oracle written here, independently of packaging."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.markers import Marker

from envman.app.stack import _in_image

# what each variable can say, and what it says in an image of (python, arch)
STRINGS = {"sys_platform": ["linux", "darwin", "win32", "cygwin"], "platform_system": ["Linux", "Darwin", "Windows"],
           "os_name": ["posix", "nt"], "implementation_name": ["cpython", "pypy"],
           "platform_python_implementation": ["CPython", "PyPy"], "platform_machine": ["x86_64", "aarch64", "AMD64", "arm64"],
           "extra": ["gpu", "dev"]}
PYTHONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
       ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def image_value(var: str, python: str, arch: str) -> str:
    return {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "platform_machine": arch,
            "extra": ""}[var]  # no extra is installed into the image


def _ver(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


@st.composite
def atom(draw):
    """(marker text, its truth as a function of the image)."""
    if draw(st.booleans()):
        var = draw(st.sampled_from(sorted(STRINGS)))
        op = draw(st.sampled_from(["==", "!="]))
        value = draw(st.sampled_from(STRINGS[var]))
        text = f'{var} {op} "{value}"' if draw(st.booleans()) else f'"{value}" {op} {var}'
        return text, lambda py, arch: OPS[op](image_value(var, py, arch), value)
    op = draw(st.sampled_from(sorted(OPS)))
    value = draw(st.sampled_from(PYTHONS))
    return f'python_version {op} "{value}"', lambda py, arch: OPS[op](_ver(py), _ver(value))


@st.composite
def marker(draw, depth=2):
    if depth == 0 or draw(st.booleans()):
        return draw(atom())
    (a, fa), (b, fb) = draw(marker(depth=depth - 1)), draw(marker(depth=depth - 1))
    if draw(st.booleans()):
        return f"({a}) and ({b})", lambda py, arch: fa(py, arch) and fb(py, arch)
    return f"({a}) or ({b})", lambda py, arch: fa(py, arch) or fb(py, arch)


@settings(max_examples=300, deadline=None)
@given(m=marker(), python=st.sampled_from(PYTHONS), arch=st.sampled_from(["x86_64", "aarch64"]))
def test_a_requirement_is_the_images_exactly_when_its_marker_holds_in_the_image(m, python, arch):
    text, holds = m
    res = SimpleNamespace(python=python, arch=arch)
    assert _in_image(Marker(text), res) is holds(python, arch), text
