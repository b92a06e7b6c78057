"""``python -m envman``: the same as the ``envman`` command."""

from envman.cli.main import run

run()
