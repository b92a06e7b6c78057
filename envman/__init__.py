"""envman: reproducible GPU training environments.

The pipeline reads in folder names: matrix/ → resolve/ → image/ (plan, render) → lock/ → app/build →
portable/smoke; doctor = portable/facts → portable/doctor. cli/ presents app/ (the use cases).

envman has no public Python API: the command line is its interface. ``envman.app`` is the seam the tests use;
any name may change between releases.
"""

__version__ = "0.2.0"
