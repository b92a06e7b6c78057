"""``python -m tools.matrix sync|outdated|check|variants``: derive matrices/*.yaml from their primary sources
(PyPI, GitHub, NVIDIA's pages), see what is newer upstream, hold the data to the sources' snapshots, and check an
index's wheel-variant metadata against the data. Maintainers run it from a checkout (`pip install -e .`)."""
