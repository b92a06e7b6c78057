"""The repository's workshop: code that makes and checks envman's data, run from a checkout and never shipped
in the wheel (pyproject's packages name envman's only). Nothing under envman/ imports it
(tests/unit/test_architecture.py)."""
