"""Paste a :class:`~commopt.codegen.model.RunnerModel` into the runner template.

The template (``runner_template.py`` beside this module) is itself a valid Python script for
a one-node graph; its marked sections (``# @@NAME@@`` ... ``# @@END NAME@@``) are replaced by
the graph's header, data tables and step table. Every value pasted is plain data (checked:
:func:`check_data`) written with ``repr()`` or, for the tables that grow with the graph, as
JSON in a raw string, so the script's syntax does not depend on the graph.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Iterator
from importlib import resources
from itertools import chain, compress, repeat
from operator import is_

from commopt.codegen.model import RunnerModel
from commopt.codegen.names import clean, comment
from commopt.json_lines import compact_each, compact_encoder

_SECTION = re.compile(r"^# @@(?P<name>[A-Z ]+)@@\n.*?^# @@END (?P=name)@@\n", re.S | re.M)


def template_text() -> str:
    """The template's source."""
    return resources.files("commopt.codegen").joinpath("runner_template.py").read_text("utf-8")


def generated_sections(model: RunnerModel, *, backend: str | None = None) -> dict[str, str]:
    """The parts of the script that depend on the graph, by template section name; the rest
    of the script is the template as it stands."""
    pieces = _section_pieces(model, _tables(model), backend)
    return {name: "".join(text) for name, text in pieces.items()}


def render(model: RunnerModel, *, backend: str | None = None) -> str:
    """The runner script's source for ``model`` (``backend``: the default backend, or None)."""
    return _fill(_section_pieces(model, _tables(model), backend))


def checked_source(model: RunnerModel, filename: str, *, backend: str | None = None) -> str:
    """:func:`check_source`, then :func:`render`: the tables are built once, for both."""
    tables = _tables(model)
    _check(model, tables, filename, backend)
    return _fill(_section_pieces(model, tables, backend))


#: The data tables, by name in the script: the values :func:`_tables` gives them.
_TABLES = ("GROUPS", "INPUTS", "ARENAS", "BUFFERS", "OPS", "PERSISTENT_PARAMS", "STEPS",
           "OPTIMIZED_ORDER")


def _tables(model: RunnerModel) -> dict[str, list | dict]:
    """Each data table's value as the script holds it: plain rows (the specs' fields, shapes
    as lists), the very values :func:`check_source` checks and :func:`render` writes."""
    groups = [(g.var, g.name, g.size,
               [list(s) for s in g.rank_sets] if g.rank_sets is not None else None)
              for g in model.groups]
    inputs = [(i.node, i.name, i.dtype, [list(s) for s in i.shapes], i.role, i.key)
              for i in model.inputs]
    buffers = [(b.var, b.group_var, b.offset_bytes, b.dtype, list(b.shape)) for b in model.buffers]
    return dict(zip(_TABLES, (
        groups, inputs, list(model.arenas), buffers, dict(model.ops),
        [tuple(p) for p in model.persistent_params], model.steps, model.optimized_order),
        strict=True))


def _section_pieces(model: RunnerModel, tables: dict[str, list | dict],
                    backend: str | None) -> dict[str, list[str]]:
    """:func:`generated_sections` as pieces of text, joined once with the template's: the
    step table is over 100 MB at a million nodes, and each concatenation copied it."""
    return {"HEADER": [_header(model)], "GRAPH DATA": _graph_data(model, tables, backend),
            "STEPS": _steps(tables)}


def _fill(sections: dict[str, list[str]]) -> str:
    pieces: list[str] = []
    found: list[str] = []
    template = template_text()
    end = 0
    for match in _SECTION.finditer(template):
        found.append(match.group("name"))
        pieces.append(template[end:match.start()])
        pieces += sections[match.group("name")]
        end = match.end()
    pieces.append(template[end:])
    if sorted(found) != sorted(sections):
        raise AssertionError(f"template sections {found} do not match {sorted(sections)}")
    return "".join(pieces)


def check_source(model: RunnerModel, filename: str, *, backend: str | None = None) -> None:
    """Check that the script parses without compiling its data tables: every table value is
    checked to be plain data (:func:`check_data`), whose ``repr()`` is always valid Python and
    whose JSON (no single quote in it) cannot end its raw string, and the script is compiled
    with its tables empty (the code, header and notes)."""
    _check(model, _tables(model), filename, backend)


def _check(model: RunnerModel, tables: dict[str, list | dict], filename: str,
           backend: str | None) -> None:
    """:func:`check_source` of ``model`` with its :func:`_tables`."""
    for value in tables.values():
        check_data(value)
    empty = {name: {} if isinstance(value, dict) else [] for name, value in tables.items()}
    compile(_fill(_section_pieces(model, empty, backend)), filename, "exec")


#: Exactly these types may appear in a table (subclasses such as IntEnum or numpy scalars
#: may repr() as something that is not a Python literal).
_PLAIN_TYPES = frozenset((str, int, bool, type(None), float, list, tuple, dict))


def check_data(value: object) -> None:
    """Raise AssertionError unless ``value`` is plain data: str, int, bool, None, finite float,
    and lists, tuples and str-keyed dicts of those.

    One nesting level at a time, each level's types and dict keys gathered by C loops
    (``gc.get_referents`` yields a list's or tuple's items and a dict's values): a 100k-node
    step table holds over a million values, which a Python loop over each took most of a
    second to check. Each level's types are listed once and its floats and dicts picked by
    them (``compress``), so a value is read once for its type, not again for each kind."""
    _check_levels([value])


#: A level of more than this many values is checked in blocks of :data:`_CHECK_BLOCK`, each
#: block down to its last level before the next: a block's values and their children stay in
#: the CPU's caches across the passes over them, where a whole level of a large table (millions
#: of values, scattered over the heap) did not, and took three times as long.
_CHECK_LEVEL_MAX, _CHECK_BLOCK = 4096, 256


def _check_levels(level: list) -> None:
    """:func:`check_data` of every value in ``level`` and below."""
    while level:
        kinds = list(map(type, level))
        types = set(kinds)
        if not types <= _PLAIN_TYPES:
            v = next(x for x in level if type(x) not in _PLAIN_TYPES)
            raise AssertionError(f"{type(v).__name__} value in the runner's data: {v!r:.80}")
        if float in types and not all(map(math.isfinite, _of_type(level, kinds, float))):
            v = next(x for x in level if type(x) is float and not math.isfinite(x))
            raise AssertionError(f"non-finite float {v!r} in the runner's data")
        if dict in types and not set(map(type, chain.from_iterable(
                _of_type(level, kinds, dict)))) <= {str}:
            raise AssertionError("a dict with non-string keys in the runner's data")
        # scalars have no referents; a dict with non-string keys (refused above) lists its keys
        level = gc.get_referents(*level) if types & _CONTAINERS else []
        if len(level) > _CHECK_LEVEL_MAX:
            for start in range(0, len(level), _CHECK_BLOCK):
                _check_levels(level[start:start + _CHECK_BLOCK])
            return


def _of_type(values: list, kinds: list[type], kind: type) -> Iterator[object]:
    """The items of ``values`` whose type (``kinds``, item for item) is ``kind``."""
    return compress(values, map(is_, kinds, repeat(kind)))


_CONTAINERS = frozenset((list, tuple, dict))


def _header(model: RunnerModel) -> str:
    world = model.world_size if model.world_size is not None else "N"
    script = f"run_{clean(model.graph_name) or 'graph'}.py"
    lines = [
        '"""Runner for one graph, generated by commopt: start with torchrun, e.g.',
        "",
        f"    torchrun --nproc-per-node {world} {script} --verify --iters 20",
        "",
        "Setup runs once: the process group and the graph's groups, the communication arenas",
        "and their buffer views, the operations, and a check that every rank runs the same",
        "buffer plan. The step functions below only launch work: compute in commopt's order,",
        "collectives asynchronously on their buffers, waits where the graph has them.",
        "Identifiers below come from the graph file, sanitized; strings are repr()-quoted.",
        '"""',
        f"# graph: {comment(model.graph_name, 70)}",
    ]
    if model.source:
        lines.append(f"# source: {comment(model.source.rsplit('/', 1)[-1], 70)}")
    for note in model.notes:
        lines.append(f"# note: {comment(note, 90)}")
    return "\n".join(lines) + "\n"


def _table(name: str, value: object) -> str:
    """``NAME = value``; a non-empty list or dict one item per line."""
    if isinstance(value, list) and value:
        items = "".join(f"    {item!r},\n" for item in value)
        return f"{name} = [\n{items}]"
    if isinstance(value, dict) and value:
        items = "".join(f"    {k!r}: {v!r},\n" for k, v in value.items())
        return f"{name} = {{\n{items}}}"
    return f"{name} = {value!r}"


#: ``json.dumps`` (default options) of one table row, without building an encoder per row.
_json_row = compact_encoder(ensure_ascii=True, separators=(", ", ": "))
#: :data:`_json_row` of each of many rows, with no Python call per row.
_json_rows = compact_each(ensure_ascii=True, separators=(", ", ": "))


#: Lines of a JSON table joined into one piece of text at a time: each block's row texts are
#: freed before the next block's are made (their memory reused, not millions of strings alive).
_LINES_PER_BLOCK = 4096


def _json_table(name: str, rows: list, per_line: int = 1) -> list[str]:
    """``NAME = json.loads(r'''[...]''')`` as pieces of text, ``per_line`` rows a line: the
    tables that grow with the graph are JSON, which ``json.loads`` reads in a fraction of the
    time the Python parser takes for the same literal (20 s for a 100k-node step table)."""
    if not rows:
        return [f"{name} = []"]
    separated: list[str] = []  # blocks of lines with the line separator between them
    block_rows = _LINES_PER_BLOCK * per_line
    for start in range(0, len(rows), block_rows):
        block = rows[start:start + block_rows]
        # a slice's JSON is its rows' JSON joined by the item separator, inside brackets
        lines = _json_rows(block) if per_line == 1 else (
            _json_row(block[k:k + per_line])[1:-1] for k in range(0, len(block), per_line))
        # the separators hold no quote: escaping the joined text escapes every row
        separated += (",\n    ", ",\n    ".join(lines).replace("'", "\\u0027"))
    return [f"{name} = json.loads(r'''[\n    ", *separated[1:], "\n]''')"]


def _graph_data(model: RunnerModel, tables: dict[str, list | dict],
                backend: str | None) -> list[str]:
    parts = [
        _table("GRAPH_NAME", model.graph_name),
        _table("WORLD_SIZE", model.world_size),
        _table("PLAN_DIGEST", model.plan_digest),
        "# Backend when --backend is not given (None: nccl with CUDA, else gloo).",
        _table("DEFAULT_BACKEND", backend),
        "# Process groups in creation order: (variable, c10d name in the graph, size, rank sets or None\n"
        "# for the whole world). A group defined along a mesh dimension lists every rank set of that\n"
        "# dimension; each rank keeps the one it belongs to.",
        _table("GROUPS", tables["GROUPS"]),
        "# Graph inputs: (node, name, dtype, local shape per rank, role, state-dict key or None).",
        _json_table("INPUTS", tables["INPUTS"]),
        "# One arena per process group: (group variable, bytes).",
        _table("ARENAS", tables["ARENAS"]),
        "# Communication buffers: (variable, group variable, byte offset, dtype, shape).",
        _json_table("BUFFERS", tables["BUFFERS"]),
        "# Every operation the graph runs for real, resolved once at start-up: name -> overload.",
        _table("OPS", tables["OPS"]),
        "# Per iteration of the optimized order: tensors copied into buffers, and producers writing\n"
        "# straight into them (zero-copy).",
        _table("COPIES_PER_ITER", model.copies_per_iter),
        _table("ZERO_COPY_PER_ITER", model.zero_copy_per_iter),
        "# Parameters living in the arena for good (flat-parameter layout): (buffer variable, input\n"
        "# name). Copied in once when the inputs are loaded; all_gathers read them with no copy.",
        _table("PERSISTENT_PARAMS", tables["PERSISTENT_PARAMS"]),
        "# Peak bytes one rank holds during the optimized step as commopt's memory model predicts it\n"
        "# (arenas + inputs + every other live tensor; largest rank's sizes).",
        _table("PREDICTED_PEAK_BYTES", model.predicted_peak_bytes),
    ]
    return [piece for part in parts for piece in (*_as_pieces(part), "\n")]


def _as_pieces(part: str | list[str]) -> list[str]:
    return [part] if isinstance(part, str) else part


def _steps(tables: dict[str, list | dict]) -> list[str]:
    """The step table (one record per node, the graph's order) and the optimized order."""
    return [*_json_table("STEPS", tables["STEPS"]), "\n",
            "# commopt's order: node indices (records of STEPS), run on the arenas.\n",
            *_json_table("OPTIMIZED_ORDER", tables["OPTIMIZED_ORDER"], per_line=20), "\n"]
