"""Post-grad graphs from torch.compile's own dumps, without exporting anything.

A job that already runs ``torch.compile`` can write the graphs Inductor compiles:

- ``TORCH_COMPILE_DEBUG=1`` writes ``torch_compile_debug/run_*/torchinductor/<graph>/``
  with ``fx_graph_transformed.py``: the post-grad graph (what Inductor lowers);
- ``TORCH_TRACE=DIR`` writes ``DIR/dedicated_log_torch_trace_rank_<r>_*.log``: structured
  records, among them ``inductor_post_grad_graph`` with the same graph as payload.

Both hold the graph as the Python that ``GraphModule.print_readable`` prints: one
``name: "f32[8, 16][16, 1]cpu" = torch.ops.aten.mm.default(a, b)`` line per node. This
module reads that text with :mod:`ast` -- it never runs it -- and rebuilds the FX graph
(ops resolved under ``torch.ops`` only, shapes and dtypes from the annotations, as meta
tensors), which :func:`commopt.io.pt2.graph_from_torch` turns into commopt's IR.

A dump holds several graphs (forward and backward, one per compiled frame, one log per
rank). ``PATH::NAME`` picks one; with several and no name, the error lists the names.
Process groups are named in the graph but their ranks are not recorded: ``--world-size``,
``--mesh`` or ``--groups`` give them, as for any ``.pt2`` without a record.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commopt.errors import GraphError

#: File name of the post-grad graph in a TORCH_COMPILE_DEBUG graph folder.
POST_GRAD_FILE = "fx_graph_transformed.py"
#: Structured-trace artifact holding the post-grad graph.
POST_GRAD_ARTIFACT = "inductor_post_grad_graph"
TRACE_LOG_GLOB = "dedicated_log_torch_trace_rank_*.log"
SELECT = "::"

_ANNOTATION = re.compile(r"^(\w+)\[([^\]]*)\](?:\[([^\]]*)\])?(\w*(?::\d+)?)$")


@dataclass(frozen=True)
class DumpedGraph:
    """One post-grad graph found in a dump: its name, its text and where it was read."""

    name: str
    text: str
    file: str
    line: int = 1  # where ``text`` starts in ``file``


def is_dump(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (optionally ``PATH::NAME``) names a torch.compile dump: a directory
    holding ``fx_graph_transformed.py`` files or TORCH_TRACE logs, such a ``.py`` file, or a
    ``.log`` file."""
    p = Path(str(path).split(SELECT, 1)[0])
    if p.is_dir():
        return any(p.rglob(POST_GRAD_FILE)) or any(p.rglob(TRACE_LOG_GLOB))
    return p.is_file() and (p.name == POST_GRAD_FILE or p.suffix == ".log")


def find_graphs(path: str | os.PathLike[str]) -> list[DumpedGraph]:
    """Every post-grad graph in the dump at ``path``, in a stable order."""
    p = Path(path)
    if not p.exists():
        raise GraphError("no such file or directory", file=str(p))
    if p.is_file():
        if p.suffix == ".log":
            return _trace_graphs(p, prefix="")
        return [DumpedGraph(p.parent.name, p.read_text(encoding="utf-8"), str(p))]
    files = sorted(p.rglob(POST_GRAD_FILE))
    unique = len({f.parent.name for f in files}) == len(files)
    found = [DumpedGraph(f.parent.name if unique else str(f.parent.relative_to(p)),
                         f.read_text(encoding="utf-8"), str(f)) for f in files]
    logs = sorted(p.rglob(TRACE_LOG_GLOB))
    for log in logs:
        rank = re.search(r"rank_(\d+)_", log.name)
        found += _trace_graphs(log, prefix=f"rank{rank.group(1)}/" if rank and len(logs) > 1 else "")
    if not found:
        raise GraphError(f"no post-grad graph here: expected {POST_GRAD_FILE} files "
                         "(TORCH_COMPILE_DEBUG=1) or TORCH_TRACE logs", file=str(p))
    return found


def _trace_graphs(log: Path, prefix: str) -> list[DumpedGraph]:
    """The ``inductor_post_grad_graph`` payloads of one structured-trace log (a record's
    payload is the tab-indented lines after it), named ``graph<k>`` in log order."""
    out: list[DumpedGraph] = []
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines):
        if f'"name": "{POST_GRAD_ARTIFACT}"' not in line:
            continue
        body = []
        for follow in lines[i + 1:]:
            if not follow.startswith("\t"):
                break
            body.append(follow[1:])
        meta = _record(line)
        where = f"frame{meta.get('frame_id', '?')}.{meta.get('frame_compile_id', '?')}"
        out.append(DumpedGraph(f"{prefix}graph{len(out)}-{where}", "\n".join(body), str(log), i + 2))
    if not out:
        raise GraphError(f"the log holds no {POST_GRAD_ARTIFACT} record (was it written with "
                         "TORCH_TRACE by a run that compiled with Inductor?)", file=str(log))
    return out


def _record(line: str) -> dict[str, Any]:
    start = line.find("{")
    try:
        return json.loads(line[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        return {}


def select_graph(path: str | os.PathLike[str]) -> DumpedGraph:
    """The graph ``PATH::NAME`` names, or the only graph of ``PATH``."""
    base, sep, name = str(path).partition(SELECT)
    graphs = find_graphs(base)
    if sep:
        chosen = [g for g in graphs if g.name == name]
        if not chosen:
            raise GraphError(f"no graph named {name!r} in the dump; it holds: "
                             + ", ".join(g.name for g in graphs), file=base)
        return chosen[0]
    if len(graphs) > 1:
        raise GraphError(f"the dump holds {len(graphs)} graphs; pick one as PATH{SELECT}NAME: "
                         + ", ".join(g.name for g in graphs), file=base)
    return graphs[0]


def load_dump(path: str | os.PathLike[str], *, groups: Any = None, mesh: Any = None,
              world_size: int | None = None) -> Any:
    """The post-grad graph of a torch.compile dump as a :class:`~commopt.ir.graph.Graph`
    (written back as commopt JSON: there is no program to re-export)."""
    from commopt.io.pt2 import graph_from_torch

    dumped = select_graph(path)
    gm = parse_graph_module(dumped)
    graph = graph_from_torch(gm, groups=groups, mesh=mesh, world_size=world_size,
                             file=dumped.file, name=_safe_name(dumped.name))
    graph.source_format = "json"
    graph.payload = None
    return graph


def _safe_name(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("_") or "graph"


# --------------------------------------------------------------------------- parsing
def parse_graph_module(dumped: DumpedGraph) -> Any:
    """Rebuild the FX GraphModule ``print_readable`` printed (never executing the text)."""
    import torch

    try:
        tree = ast.parse(dumped.text)
    except SyntaxError as exc:
        raise GraphError(f"not a printed FX graph: {exc.msg}", file=dumped.file,
                         line=(exc.lineno or 1) + dumped.line - 1) from None
    forward = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        raise GraphError("not a printed FX graph: no forward function", file=dumped.file, line=dumped.line)
    builder = _Builder(dumped)
    for arg in forward.args.args[1:]:
        builder.placeholder(arg)
    for stmt in forward.body:
        builder.statement(stmt)
    builder.graph.lint()
    return torch.fx.GraphModule(torch.nn.Module(), builder.graph)


class _Builder:
    """Turns the statements of a printed ``forward`` into FX nodes."""

    def __init__(self, dumped: DumpedGraph) -> None:
        import torch

        self.dumped = dumped
        self.graph = torch.fx.Graph()
        self.env: dict[str, Any] = {}

    def error(self, message: str, at: ast.AST) -> GraphError:
        return GraphError(message, file=self.dumped.file,
                          line=getattr(at, "lineno", 1) + self.dumped.line - 1)

    def placeholder(self, arg: ast.arg) -> None:
        node = self.graph.placeholder(arg.arg)
        node.meta["val"] = self.meta_tensor(arg.annotation, arg)
        self.env[arg.arg] = node

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Return):
            self.graph.output(self.value(stmt.value))
            return
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is None:
            return  # `x = y = None`: the printed graph frees values; not a node
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, annotation, value = stmt.targets[0], None, stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            target, annotation, value = stmt.target, stmt.annotation, stmt.value
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.node_for(stmt.value, None, None)
            return
        else:
            raise self.error(f"unexpected statement in a printed FX graph: {ast.unparse(stmt)[:80]}", stmt)
        if not isinstance(target, ast.Name):
            raise self.error(f"unexpected assignment target: {ast.unparse(target)[:80]}", stmt)
        node = self.node_for(value, target.id, annotation)
        self.env[target.id] = node

    def node_for(self, value: ast.expr, name: str | None, annotation: ast.expr | None) -> Any:
        import operator

        if isinstance(value, ast.Subscript):
            node = self.graph.call_function(operator.getitem, (self.value(value.value), self.value(value.slice)))
        elif isinstance(value, ast.Call):
            target = self.op(value.func)
            args = tuple(self.value(a) for a in value.args)
            kwargs = {k.arg: self.value(k.value) for k in value.keywords if k.arg is not None}
            node = self.graph.call_function(target, args, kwargs)
        else:
            raise self.error(f"unexpected value in a printed FX graph: {ast.unparse(value)[:80]}", value)
        if name is not None:
            node.name = name
        node.meta["val"] = self.meta_tensor(annotation, value) if annotation is not None else None
        return node

    def op(self, func: ast.expr) -> Any:
        """``torch.ops.<ns>.<op>.<overload>`` resolved (nothing else is called)."""
        import torch

        dotted = ast.unparse(func)
        parts = dotted.split(".")
        if parts[:2] != ["torch", "ops"] or len(parts) != 5:
            raise self.error(f"cannot read a call to {dotted!r}: only torch.ops.<ns>.<op>.<overload> "
                             "calls are understood", func)
        try:
            target: Any = torch.ops
            for p in parts[2:]:
                target = getattr(target, p)
        except (AttributeError, RuntimeError):
            raise self.error(f"unknown operator {dotted!r} (from a library this process has not "
                             "loaded?)", func) from None
        return target

    def value(self, expr: ast.expr) -> Any:
        """An argument: a node, a constant, a list/tuple of them, or a torch enum."""
        import torch

        if isinstance(expr, ast.Name):
            if expr.id in self.env:
                return self.env[expr.id]
            if expr.id in ("inf", "nan"):
                return float(expr.id)
            raise self.error(f"{expr.id!r} is used before it is defined", expr)
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, (ast.List, ast.Tuple)):
            items = [self.value(e) for e in expr.elts]
            return items if isinstance(expr, ast.List) else tuple(items)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            inner = self.value(expr.operand)
            if isinstance(inner, (int, float)):
                return -inner
        if isinstance(expr, ast.Attribute) and ast.unparse(expr).startswith("torch."):
            value = getattr(torch, expr.attr, None)
            if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
                return value
        if isinstance(expr, ast.Call) and ast.unparse(expr.func) in ("torch.device", "device"):
            kwargs = {k.arg: self.value(k.value) for k in expr.keywords if k.arg is not None}
            return torch.device(*[self.value(a) for a in expr.args], **kwargs)
        raise self.error(f"cannot read the argument {ast.unparse(expr)[:80]!r}", expr)

    def meta_tensor(self, annotation: ast.expr | None, at: ast.AST) -> Any:
        """A meta tensor of the annotated dtype, shape and strides (``"f32[8, 16][16, 1]cpu"``),
        or None where the value is not annotated as a tensor."""
        import torch

        if not isinstance(annotation, ast.Constant) or not isinstance(annotation.value, str):
            return None
        text = annotation.value.replace(" ", "")
        m = _ANNOTATION.match(text)
        if m is None:
            if text.startswith("Sym("):
                raise self.error(f"symbolic size {annotation.value!r}: graphs compiled with dynamic "
                                 "shapes are not supported (compile with dynamic=False)", at)
            return None
        dtype = _DTYPES.get(m.group(1))
        if dtype is None:
            raise self.error(f"unknown dtype {m.group(1)!r} in {annotation.value!r}", at)
        try:
            shape = [int(s) for s in m.group(2).split(",") if s]
            stride = [int(s) for s in m.group(3).split(",") if s] if m.group(3) is not None else None
        except ValueError:
            raise self.error(f"symbolic size in {annotation.value!r}: graphs compiled with dynamic "
                             "shapes are not supported (compile with dynamic=False)", at) from None
        if stride is None:
            return torch.empty(shape, dtype=dtype, device="meta")
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


def _dtype_table() -> dict[str, Any]:
    from torch.fx.graph import dtype_abbrs

    table: dict[str, Any] = {}
    for dtype, abbr in dtype_abbrs.items():
        table.setdefault(abbr, dtype)
    return table


class _LazyDtypes(dict):
    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if not self:
            self.update(_dtype_table())
        return super().get(key, default)


_DTYPES = _LazyDtypes()
