"""``python -m envman``: the same as the ``envman`` command."""

from .cli.main import run

run()
