"""envman: reproducible GPU training environments.

The pipeline reads in folder names: matrix/ → resolve/ → image/ (plan, render) → lock/ → app/build →
portable/smoke; doctor = portable/facts → portable/doctor. cli/ presents app/ (the use cases).
"""

__version__ = "0.2.0"
