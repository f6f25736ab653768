"""A rich progress display on stderr for library stages (see :mod:`commopt.progress`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from commopt.cli.app import App


class StageProgress:
    """Shows each stage as a spinner line while it runs and a tick with its time when done.

    Silent with ``-q``; on a non-terminal stderr each finished stage is one plain line.
    """

    def __init__(self, app: App, live: Progress | None) -> None:
        self.app = app
        self.live = live

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Report ``name`` while the block runs."""
        if self.app.verbosity < 0:
            yield
            return
        t0 = time.perf_counter()
        label = escape(name)  # the progress columns read markup; a pass name is not markup
        task = self.live.add_task(label, total=None) if self.live is not None else None
        try:
            yield
        finally:
            elapsed = time.perf_counter() - t0
            if self.live is not None and task is not None:
                self.live.update(task, description=f"{label} [dim]({elapsed:.2f} s)[/dim]", completed=1, total=1)
                self.live.stop_task(task)
            else:
                self.app.debug(f"{name}: {elapsed:.2f} s")


@contextlib.contextmanager
def stage_progress(app: App) -> Iterator[StageProgress]:
    """A :class:`StageProgress` for the duration of the block."""
    if app.verbosity < 0 or not app.err.is_terminal:
        yield StageProgress(app, None)
        return
    with Progress(SpinnerColumn(finished_text="[green]✓[/green]"), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=app.err, transient=False) as live:
        yield StageProgress(app, live)
