"""Models made from values that already have their fields' types, without validation.

A 100,000-node report holds 100,000s of events and nodes, its buffer plan tens of thousands
of buffers. pydantic validating them from dicts cost more than the rest of building the
report (about 0.7 of 1.5 CPU seconds). The report builder and the buffer planner convert
every value themselves (``float()``, ``int()``, names that are ``str`` in the graph), so
what they make is valid by construction: :func:`maker` turns such a dict into the instance
pydantic would have built, as ``model_construct`` does without its per-call overhead. Whatever holds these instances is still validated as usual; pydantic takes an
instance of the right class as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def maker(cls: type[M]) -> Callable[[dict[str, Any]], M]:
    """A function from a dict holding every field of ``cls`` (a model without private
    attributes or extra fields), each value already of its field's type, to the instance
    with exactly those values; nothing is checked or copied, so the dict must not be used
    afterwards."""
    if cls.__private_attributes__ or cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__} keeps state besides its fields")
    names = frozenset(cls.model_fields)
    new = object.__new__

    def make(values: dict[str, Any]) -> M:
        obj = new(cls)
        _set_dict(obj, values)
        _set_fields(obj, set(names))  # its own set: pydantic adds to it on assignment
        _set_extra(obj, None)
        _set_private(obj, None)
        return obj

    make.__doc__ = f"A {cls.__name__} of values already of its fields' types (see :func:`maker`)."
    return make
