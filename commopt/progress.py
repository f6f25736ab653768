"""How library code reports progress without knowing about terminals.

Long-running library functions take a ``progress`` object and wrap each stage in
``with progress.stage("plan buffers"):``. The CLI passes one that draws a rich progress display
on stderr; everyone else gets :data:`SILENT`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol


class Progress(Protocol):
    """Receives the start and end of each named stage."""

    def stage(self, name: str) -> contextlib.AbstractContextManager[None]:
        """A context manager spanning one stage (entered when it starts, left when done)."""
        ...


class SilentProgress:
    """Reports nothing."""

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Run the stage without reporting it."""
        yield


SILENT: Progress = SilentProgress()
