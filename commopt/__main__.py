"""``python -m commopt``: the same as the ``commopt`` command."""

from commopt.cli.main import run

run()
