"""``torch.export.load`` with the deserializer's type hints resolved once per class.

torch's archive deserializer turns the JSON of an ExportedProgram into its schema dataclasses
one object at a time, and asks ``typing.get_type_hints`` for the object's class each time
(``torch._export.serde.serialize._dict_to_dataclass``): 11,586 calls for the 693-node corpus
SimpleFSDP step, half of its 3.4 s load. The hints depend on the class alone, so while
:func:`load_exported_program` runs, the deserializer's ``typing`` is a view of the module
whose ``get_type_hints`` remembers each answer. Everything else is torch's own code; when the
deserializer is not laid out as expected the load runs unchanged.
"""

from __future__ import annotations

import contextlib
import threading
import types
import typing
from collections.abc import Iterator
from typing import Any

_LOCK = threading.Lock()


class _TypingWithRememberedHints(types.ModuleType):
    """The ``typing`` module's names (copied: the deserializer looks them up 100,000s of
    times), but ``get_type_hints`` answers each (class, namespaces) once."""

    def __init__(self) -> None:
        super().__init__("typing")
        self.__dict__.update((k, v) for k, v in vars(typing).items()
                             if not k.startswith("__") and k != "get_type_hints")
        self._hints: dict[tuple[Any, int, int, bool], dict[str, Any]] = {}

    def get_type_hints(self, obj: Any, globalns: Any = None, localns: Any = None,
                       include_extras: bool = False) -> dict[str, Any]:
        """``typing.get_type_hints``, remembered (the caller only reads the dict)."""
        key = (obj, id(globalns), id(localns), include_extras)
        hints = self._hints.get(key)
        if hints is None:
            hints = self._hints[key] = typing.get_type_hints(obj, globalns, localns, include_extras)
        return hints


@contextlib.contextmanager
def _remembered_type_hints() -> Iterator[None]:
    """While inside, torch's deserializer resolves each schema class's type hints once."""
    try:
        from torch._export.serde import serialize
    except ImportError:
        yield
        return
    with _LOCK:
        if getattr(serialize, "typing", None) is not typing:
            yield
            return
        serialize.typing = _TypingWithRememberedHints()
        try:
            yield
        finally:
            serialize.typing = typing


def load_exported_program(path: str) -> Any:
    """``torch.export.load(path)``, faster (module docstring): measured on the corpus, a
    repeated load of llama_fsdp 1.30 -> 0.62 s, the first load in a fresh process (which
    also imports torch's export modules) of llama_tp_L8 5.7-6.9 -> 4.2-4.6 s."""
    import torch

    with _remembered_type_hints():
        return torch.export.load(path)
