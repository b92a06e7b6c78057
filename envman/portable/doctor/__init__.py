"""The doctor's pure core: facts (docs/facts.md) + knowledge (from the matrix) -> findings.

view, knowledge, findings, remedies, report and checks*.py import only the standard library, each other
and ../versions, so they also run inside a built image. The host-side adapter (matrix -> Knowledge, cached)
is envman/matrix/knowledge.py.
"""
