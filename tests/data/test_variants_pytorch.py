"""The shipped matrix against PyTorch's own variant wheels (PEP 825, draft): the SASS lists torch 2.8.0's
cu126/cu128/cu129 variant wheels declare (tests/fixtures/variants/README.md) are the ones the matrix measured.
A data change that contradicts them shows up here."""

from __future__ import annotations

import json
from pathlib import Path

from tools.matrix.pep825 import check_variants, parse_variants_json

PYTORCH_280 = Path(__file__).resolve().parent.parent / "fixtures" / "variants" / "torch-2.8.0-variants.json"


def test_no_variant_wheel_of_torch_2_8_0_claims_sass_the_matrix_lacks(matrix):
    doc, problems = parse_variants_json(json.loads(PYTORCH_280.read_text()), PYTORCH_280.name)
    rel = next(r for r in matrix.frameworks["torch"] if str(r.version) == "2.8.0")
    findings = check_variants(rel, doc)
    assert problems == [] and not [f for f in findings if f.severity == "error"]
    assert not [f for f in findings if "SASS" in f.message], [f.message for f in findings]
