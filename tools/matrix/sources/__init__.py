"""Readers of the primary sources the matrix is derived from, one module per source (docs/matrix.md)."""
