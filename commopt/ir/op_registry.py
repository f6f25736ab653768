"""What torch's operator registry says about an op, without importing torch where it can.

Buffer planning and the runner ask two things of the ops a graph runs: which overloads an op
has (is there an ``out=`` variant?) and an overload's argument schema. torch answers both,
but importing it costs about 1.5 s and 170 MB, on every run of a JSON graph that needs
nothing else from torch. So the answers come from, in order:

1. torch itself, when it is already imported (a ``.pt2`` load, a live program): exact for
   whatever this process has registered;
2. the snapshot of the registry of a fresh ``import torch`` shipped for the installed torch
   version (``torch_ops-<version>.json.gz`` beside this module; the version is read from
   torch's ``version.py`` without importing torch);
3. torch, imported, when no snapshot matches the installed version.

A snapshot is written with ``python -m commopt.ir.op_registry`` (after a torch upgrade);
``tests/ir/test_op_registry.py`` checks the shipped one against torch.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path

#: One argument of a schema: (name, type as torch prints it, keyword-only, is an out argument).
Argument = tuple[str, str, bool, bool]

SNAPSHOT_FORMAT = "commopt-torch-ops"
_HERE = Path(__file__).resolve().parent


def overload_names(op: str) -> tuple[str, ...] | None:
    """The overload names of ``op`` (``'aten.mm'``: ``('default', 'out', ...)``), sorted, as
    ``torch.ops.aten.mm.overloads()`` names them; None when torch has no such op."""
    namespace, _, name = op.partition(".")
    registry = _snapshot()
    if registry is not None:
        overloads = registry.get(f"{namespace}.{name}")
        return tuple(overloads) if overloads is not None else None
    return _live_overloads(namespace, name)


def overload_schema(op: str, overload: str) -> tuple[Argument, ...] | None:
    """The arguments of ``op``'s ``overload`` (``'aten.mm'``, ``'out'``); None when torch has
    no such overload."""
    namespace, _, name = op.partition(".")
    registry = _snapshot()
    if registry is not None:
        schema = (registry.get(f"{namespace}.{name}") or {}).get(overload)
        return tuple(tuple(a) for a in schema) if schema is not None else None
    return _live_schema(namespace, name, overload)


def _live_overloads(namespace: str, name: str) -> tuple[str, ...] | None:
    """:func:`overload_names` asked of torch (imported)."""
    import torch

    try:
        return tuple(sorted(getattr(getattr(torch.ops, namespace), name).overloads()))
    except (AttributeError, RuntimeError):
        return None


def _live_schema(namespace: str, name: str, overload: str) -> tuple[Argument, ...] | None:
    """:func:`overload_schema` asked of torch (imported)."""
    import torch

    try:
        return _arguments(getattr(getattr(getattr(torch.ops, namespace), name), overload)._schema)
    except (AttributeError, RuntimeError):
        return None


def _arguments(schema) -> tuple[Argument, ...]:
    return tuple((a.name, str(a.type), a.kwarg_only, a.is_out) for a in schema.arguments)


def _snapshot() -> dict[str, dict[str, list]] | None:
    """The shipped snapshot's ops, or None when torch should answer itself (already imported,
    or no snapshot for the installed version)."""
    if "torch" in sys.modules:
        return None
    return _load_snapshot(installed_torch_version())


@functools.cache
def _load_snapshot(version: str | None) -> dict[str, dict[str, list]] | None:
    if version is None:
        return None
    path = snapshot_path(version)
    if not path.is_file():
        return None
    doc = json.loads(gzip.decompress(path.read_bytes()))
    if doc.get("format") != SNAPSHOT_FORMAT or doc.get("torch") != version:
        return None
    return doc["ops"]


def snapshot_path(version: str) -> Path:
    """Where the snapshot for torch ``version`` is (or would be) shipped."""
    return _HERE / f"torch_ops-{re.sub(r'[^0-9A-Za-z.+-]', '_', version)}.json.gz"


_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


@functools.cache
def installed_torch_version() -> str | None:
    """The installed torch's version string (``'2.13.0+cpu'``), read from its ``version.py``
    without importing it; None when it cannot be read."""
    spec = importlib.util.find_spec("torch")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            found = _VERSION.search((Path(folder) / "version.py").read_text(encoding="utf-8"))
        except OSError:
            continue
        if found:
            return found.group(1)
    return None


def registry_snapshot() -> dict:
    """The snapshot document of this process's torch registry (imports torch): every
    registered op by ``namespace.name``, each overload's arguments, as the lookups above
    find them in torch. Run it in a fresh process (``python -m commopt.ir.op_registry``) to
    get what a fresh ``import torch`` registers."""
    import torch

    ops: dict[str, dict[str, list]] = {}
    names = sorted({tuple(s.name.split("::", 1)) for s in torch._C._jit_get_all_schemas()
                    if "::" in s.name})
    for namespace, name in names:
        overloads = _live_overloads(namespace, name)
        if overloads is None:  # not an op packet (``torch.ops.prim.name`` is the namespace's name)
            continue
        schemas = {overload: _live_schema(namespace, name, overload) for overload in overloads}
        ops[f"{namespace}.{name}"] = {overload: None if args is None else [list(a) for a in args]
                                      for overload, args in schemas.items()}
    return {"format": SNAPSHOT_FORMAT, "torch": torch.__version__, "ops": ops}


def snapshot_bytes(doc: dict) -> bytes:
    """The shipped file's bytes for a snapshot document (compact JSON, gzip without a
    timestamp, so the same registry gives the same file)."""
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False).encode("utf-8")
    return gzip.compress(text, compresslevel=9, mtime=0)


def main() -> None:
    """Write the snapshot of a fresh ``import torch``'s registry beside this module."""
    from commopt import atomic

    doc = registry_snapshot()
    path = snapshot_path(doc["torch"])
    atomic.write_bytes(path, snapshot_bytes(doc))
    print(f"wrote {path} ({len(doc['ops'])} ops)")


if __name__ == "__main__":
    main()
