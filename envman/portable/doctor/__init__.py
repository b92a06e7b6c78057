"""The doctor's pure core: facts (docs/facts.md) + knowledge (from the matrix) -> findings.

versions, view, knowledge, findings, remedies, report and checks*.py import only the standard library
and each other (tests/unit/test_doctor_pure.py keeps it so), so they also run inside a built image.
cache.py, which memoises the knowledge on disk, is the one module here that touches files.
"""
