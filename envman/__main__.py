"""``python -m envman``: the same as the ``envman`` command."""

from envman.cli.entry import run

run()
