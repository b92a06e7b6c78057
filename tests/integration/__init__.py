"""Tests against a real Docker engine (a package: its module names must not clash with tests/unit)."""
