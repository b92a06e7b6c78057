"""The project's own Python files are read for their imports (`init`/`lock`: the entry point's imports for the smoke
test, the code's imports against the lock): a file ast cannot build — any expression nested any depth — is skipped
as unparsable, never an internal error. Found when `x = 1+1+…+1` (200,000 terms) in train.py made `envman init`
exit 70 (RecursionError during ast construction)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.portable.smoke import entry_imports
from envman.project.lockedimports import project_imports

SHAPES = {"sum": lambda n: "1+" * n + "1", "negations": lambda n: "-" * n + "1", "nots": lambda n: "not " * n + "x",
          "attributes": lambda n: "a" + ".b" * n, "calls": lambda n: "f" + "()" * n,
          "lists": lambda n: "[" * n + "]" * n, "subscripts": lambda n: "a" + "[0]" * n}


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=st.sampled_from(sorted(SHAPES)), depth=st.integers(1, 200_000))
def test_any_nesting_in_the_project_s_code_is_read_or_skipped(shape, depth):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.py").write_text(f"import numpy\nx = {SHAPES[shape](depth)}\n")
        found = entry_imports("train.py", tmp)
        imports, _ = project_imports(Path(tmp), lambda m: m == "numpy")
    assert found in ([], [("numpy", "train.py:1")])
    assert [i.module for i in imports] in ([], ["numpy"])
