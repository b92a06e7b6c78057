"""Whole-stack locks: uv.py (uv resolves the Python set, with hashes), lockfile.py (envman.lock: the one
model, reader, writer and digest), pins.py (framework pins), registry.py (base-image digests),
wheelhouse.py (hash-checked offline wheels)."""
