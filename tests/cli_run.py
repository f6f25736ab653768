"""Run the real console-script entry point in-process and return its exit code."""

from __future__ import annotations

import pytest

from commopt.cli.main import main


def run_cli(argv: list[str]) -> int:
    """``commopt ARGV`` through :func:`commopt.cli.main.main` (which always exits)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code
