"""``python -m tools.matrix variants`` (was ``envman variants check``): what an index (or a local file) says about a framework release's
variant wheels (PEP 825, draft), against the matrix's measured arch lists and CUDA versions. Returns a report;
the CLI prints it and picks the exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envman.errors import UsageError
from envman.model import FrameworkRelease, Matrix


@dataclass(frozen=True)
class VariantReport:
    framework: str
    version: str
    source: str  # the variants.json's URL or path
    hashed: bool
    findings: tuple  # of tools.matrix.pep825.Finding
    expected: dict[str, Any] = field(default_factory=dict)  # label → the properties envman derives

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        from envman.matrix.variants import PEP, STATUS

        return {"pep": PEP, "status": STATUS, "framework": self.framework, "version": self.version,
                "source": self.source, "hashed": self.hashed,
                "findings": [{"severity": f.severity, "label": f.label, "message": f.message} for f in self.findings],
                "expected": self.expected}


def _release(matrix: Matrix, framework: str, version: str | None) -> FrameworkRelease:
    releases = matrix.frameworks.get(framework)
    if not releases:
        raise UsageError(f"{framework}: not a framework envman knows", hint="torch or tensorflow")
    if version is None:
        return releases[0]
    rel = next((r for r in releases if str(r.version) == version), None)
    if rel is None:
        raise UsageError(f"{framework} {version}: not in envman's matrix",
                         hint=f"known: {', '.join(str(r.version) for r in releases[:8])} …")
    return rel


def check_variants(framework: str = "torch", version: str | None = None, *, index_url: str | None = None,
                   file: Path | None = None, arch: str = "x86_64", matrix: Matrix | None = None) -> VariantReport:
    from envman.matrix.variants import label_for
    from tools.matrix import pep825

    if (index_url is None) == (file is None):
        raise UsageError("name one source: --index-url URL (a simple index that serves variant wheels) or --file F",
                         hint="e.g. --file torch-2.8.0-variants.json")
    if matrix is None:
        from envman.matrix.load import load_matrix
        from tools.matrix.app import matrix_dir

        matrix = load_matrix(matrix_dir())
    rel = _release(matrix, framework, version)
    labels: tuple[str, ...] = ()
    if file is not None:
        from envman.inputs import load_json, read_input

        source, hashed = str(file), False
        doc = load_json(read_input(file, str(file), 5 * 1024 * 1024), str(file))
    else:
        from tools.matrix.variantindex import read_index_variants

        assert index_url is not None
        found = read_index_variants(index_url, rel.package, str(rel.version))
        if found.url is None:
            raise UsageError(f"{index_url}: no {rel.package}-{rel.version}-variants.json on the {rel.package} page"
                             + (f" (variant wheels: {', '.join(found.wheel_labels)})" if found.wheel_labels else ""),
                             hint="the index serves no variant metadata for that release; try --version")
        source, hashed, doc, labels = found.url, found.hashed, found.doc, found.wheel_labels
    parsed, problems = pep825.parse_variants_json(doc, source)
    findings = [pep825.Finding("error", "", p) for p in problems]
    findings += pep825.check_variants(rel, parsed, labels, arch)
    expected = {label_for(v.name): pep825.variant_properties(v.on(arch)) for v in rel.variants
                if arch in v.platforms}
    return VariantReport(rel.framework, str(rel.version), source, hashed, tuple(findings), expected)
