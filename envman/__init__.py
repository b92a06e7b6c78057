"""envman: reproducible GPU training environments.

The pipeline reads in module names: matrix → resolve → plan/render → lock → build → smoke;
doctor = probes → checks.
"""

__version__ = "0.2.0"
