"""Write ``<module>.schema.json`` (JSON Schema) for every schema module with a ``ROOT_MODEL``.

``make schemas`` runs ``python -m commopt.schemas.generate``; ``--check`` only reports files
that are missing, out of date or orphaned (exit 1), which is what the drift test asserts.
Output is deterministic: keys sorted, two-space indent, one trailing newline.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from pathlib import Path

SCHEMA_SUFFIX = ".schema.json"
_NOT_MODELS = {"generate"}


def schema_dir() -> Path:
    """The folder of the schema modules (where the generated files live)."""
    import commopt.schemas

    return Path(commopt.schemas.__file__).resolve().parent


def model_modules() -> list[str]:
    """Names of the schema modules that define ``ROOT_MODEL``, sorted."""
    import commopt.schemas

    names = []
    for info in pkgutil.iter_modules(commopt.schemas.__path__):
        if info.name in _NOT_MODELS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"commopt.schemas.{info.name}")
        if getattr(module, "ROOT_MODEL", None) is not None:
            names.append(info.name)
    return sorted(names)


def render_all() -> dict[str, str]:
    """File name -> JSON Schema text, for every module with a ``ROOT_MODEL``."""
    out: dict[str, str] = {}
    for name in model_modules():
        model = importlib.import_module(f"commopt.schemas.{name}").ROOT_MODEL
        schema = model.model_json_schema()
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        out[f"{name}{SCHEMA_SUFFIX}"] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def stale_files(directory: Path | None = None) -> list[str]:
    """Generated files that are missing, differ from the models, or have no model (sorted)."""
    directory = directory or schema_dir()
    wanted = render_all()
    problems = []
    for fname, text in wanted.items():
        p = directory / fname
        if not p.is_file():
            problems.append(f"{fname}: missing")
        elif p.read_text(encoding="utf-8") != text:
            problems.append(f"{fname}: out of date")
    for p in sorted(directory.glob(f"*{SCHEMA_SUFFIX}")):
        if p.name not in wanted:
            problems.append(f"{p.name}: no schema module defines it")
    return sorted(problems)


def write_all(directory: Path | None = None) -> list[Path]:
    """Write every schema file (atomically), remove orphaned ones; returns the paths written."""
    from commopt import atomic

    directory = directory or schema_dir()
    wanted = render_all()
    written = []
    for fname, text in wanted.items():
        p = directory / fname
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            atomic.write_text(p, text)
            written.append(p)
    for p in sorted(directory.glob(f"*{SCHEMA_SUFFIX}")):
        if p.name not in wanted:
            p.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m commopt.schemas.generate [--check]``."""
    parser = argparse.ArgumentParser(prog="python -m commopt.schemas.generate")
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale_files()
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("run `make schemas` to regenerate", file=sys.stderr)
        return 1 if problems else 0
    for p in write_all():
        print(f"wrote {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
