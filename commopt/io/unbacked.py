"""Unbacked (data-dependent) symbols of an exported FX graph and the values assumed for them.

torch.export gives a size computed from data (``.tolist()``, ``.item()``, ``nonzero``) a
fresh *unbacked* symbol (``u0``, ``u1``, ...) with no example value. commopt needs numbers to
estimate, simulate and plan, so :func:`resolve_sizes` assumes one value per symbol, in this
order of precedence:

1. ``--assume SYMBOL=N`` (``given``), then ``--assume '*=N'`` for every symbol not named
   (``given-default``);
2. ``even-split``: a split size of an ``all_to_all_single`` is the tensor's rows divided
   evenly over the group (every rank sends as many rows to every peer, and receives as many
   as it sends): balanced routing, the load a mixture-of-experts router is trained towards;
3. ``range``: the largest value torch.export proved the symbol can take (a finite bound).

A symbol none of these covers is an error naming it and the node computing it: the user
gives its value with ``--assume``. What was assumed is recorded on the graph
(:mod:`commopt.ir.sizes`) and shown next to every number derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commopt.errors import GraphError, OptionError
from commopt.io.classify import classify
from commopt.ir.sizes import EVERY_SYMBOL, DataDependentSize


@dataclass
class SizeResolver:
    """Evaluates an FX graph's sizes to integers with assumed values for its unbacked symbols."""

    values: dict[Any, int] = field(default_factory=dict)  # sympy Symbol -> assumed value
    records: list[DataDependentSize] = field(default_factory=list)

    def evaluate(self, size: Any) -> int:
        """An FX size (int or SymInt) as an int: static sizes as they are, backed symbols at
        their example value, unbacked ones at the assumed value."""
        if isinstance(size, int):
            return size
        node = getattr(size, "node", None)
        expr = getattr(node, "expr", None)
        if expr is None:
            return int(size)
        shape_env = getattr(node, "shape_env", None)
        attr = "backed_var_to_val" if hasattr(shape_env, "backed_var_to_val") else "var_to_val"
        hints = dict(getattr(shape_env, attr, None) or {})
        hints.update(self.values)
        import sympy

        value = sympy.sympify(sympy.sympify(expr).xreplace(hints))  # a whole-symbol match is an int
        if value.free_symbols:
            hint = getattr(node, "hint", None)
            if hint is not None:
                return int(hint)
            raise GraphError(f"size {expr} has symbols with no value "
                             f"({', '.join(sorted(map(str, value.free_symbols)))})")
        return int(value)

    def text(self, size: Any) -> int | str:
        """A dimension as the IR records it: an int, or its expression when data-dependent."""
        if isinstance(size, int):
            return size
        expr = getattr(getattr(size, "node", None), "expr", None)
        if expr is not None and any(s in self.values for s in expr.free_symbols):
            return str(expr)
        return self.evaluate(size)


def resolve_sizes(fx_graph: Any, range_constraints: dict | None, assume: dict[str, int],
                  file: str | None) -> SizeResolver:
    """Find the unbacked symbols of ``fx_graph`` and assume a value for each (module doc).

    ``assume``: ``{symbol: value}`` from ``--assume`` (``"*"``: every symbol not named). A
    name in ``assume`` that is no symbol of the graph is an error (a typo would otherwise
    change nothing, silently).
    """
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found: dict[Any, Any] = {}  # symbol -> defining FX node (first node whose value has it)
    sized: dict[Any, int] = {}
    for fx in fx_graph.nodes:
        syms = free_unbacked_symbols(fx.meta.get("val"))
        for s in syms:
            found.setdefault(s, fx)
        for s in syms:
            if found[s] is not fx or not _is_scalar(fx):
                sized[s] = sized.get(s, 0) + 1
    names = {str(s): s for s in found}
    if assume and not found:
        raise OptionError("--assume: the graph has no data-dependent sizes (every size is static)",
                          file=file, field="--assume")
    unknown = sorted(k for k in assume if k != EVERY_SYMBOL and k not in names)
    if unknown:
        have = ", ".join(sorted(names, key=_symbol_key))
        raise OptionError(f"--assume names {', '.join(unknown)}, which the graph does not have "
                          f"(its data-dependent sizes: {have})", file=file, field="--assume")
    if not found:
        return SizeResolver()
    ranges = {s: _bounds(r) for s, r in (range_constraints or {}).items()}
    collectives = _collectives_of(fx_graph, found)
    chosen: dict[Any, tuple[int, str, str]] = {}
    for name, s in names.items():
        if name in assume:
            chosen[s] = (assume[name], "given", f"--assume {name}={assume[name]}")
        elif EVERY_SYMBOL in assume:
            chosen[s] = (assume[EVERY_SYMBOL], "given-default", f"--assume '*={assume[EVERY_SYMBOL]}'")
    resolver = SizeResolver(values={s: v for s, (v, _, _) in chosen.items()})
    for s, (value, reason) in _even_splits(fx_graph, found, resolver).items():
        if s not in chosen:
            chosen[s] = (value, "even-split", reason)
            resolver.values[s] = value
    for s in found:
        if s in chosen:
            continue
        low, high = ranges.get(s, (None, None))
        if high is None:
            raise GraphError(
                f"data-dependent size {s} (computed at run time by node {found[s].name!r}) has "
                f"no basis for an estimate: give the value to assume with --assume {s}=N "
                "(or --assume '*=N' for every such size)", file=file, node=found[s].name)
        chosen[s] = (high, "range", f"the largest value torch.export allows ({low}..{high})")
        resolver.values[s] = high
    for s in sorted(found, key=lambda s: _symbol_key(str(s))):
        value, basis, reason = chosen[s]
        low, high = ranges.get(s, (None, None))
        resolver.records.append(DataDependentSize(
            symbol=str(s), assumed=value, basis=basis, reason=reason,
            defined_by=found[s].name, collectives=tuple(collectives.get(s, ())),
            nodes=sized.get(s, 0), low=low, high=high))
    return resolver


def _is_scalar(fx: Any) -> bool:
    import torch

    return not isinstance(fx.meta.get("val"), torch.Tensor)


def _symbol_key(name: str) -> tuple[str, int]:
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz_")
    return (name[:len(name) - len(digits)], int(digits) if digits.isdigit() else -1)


def _bounds(vr: Any) -> tuple[int | None, int | None]:
    """(low, high) of a torch ValueRanges as ints (None: unbounded)."""
    out = []
    for v in (getattr(vr, "lower", None), getattr(vr, "upper", None)):
        try:
            out.append(int(v) if v is not None and abs(float(v)) != float("inf") else None)
        except (TypeError, ValueError):
            out.append(None)
    return out[0], out[1]


def _split_args(fx: Any) -> tuple[Any, list, list] | None:
    """(input node, output splits, input splits) of an ``all_to_all_single`` FX node."""
    if fx.op != "call_function":
        return None
    facts = classify(fx.target)
    if facts.collective is None or facts.collective[0] != "all_to_all" or facts.arg_names is None:
        return None
    bound = dict(zip(facts.arg_names, fx.args, strict=False))
    bound.update(fx.kwargs)
    outs, ins = bound.get("output_split_sizes"), bound.get("input_split_sizes")
    if not isinstance(outs, (list, tuple)) or not isinstance(ins, (list, tuple)):
        return None
    return bound.get("input"), list(outs), list(ins)


def _symbol_of(arg: Any) -> Any:
    """The unbacked symbol an FX argument is exactly (a ``.tolist()`` element), else None."""
    import sympy

    val = getattr(arg, "meta", {}).get("val") if hasattr(arg, "meta") else None
    expr = getattr(getattr(val, "node", None), "expr", None)
    if isinstance(expr, sympy.Symbol) and str(expr).startswith("u"):
        return expr
    return None


def _even_splits(fx_graph: Any, found: dict, resolver: SizeResolver) -> dict[Any, tuple[int, str]]:
    """Each all_to_all split symbol at ``rows // ranks`` of the tensor sent (module doc)."""
    out: dict[Any, tuple[int, str]] = {}
    for fx in fx_graph.nodes:
        parts = _split_args(fx)
        if parts is None:
            continue
        source, outs, ins = parts
        n = len(ins) or len(outs)
        val = getattr(source, "meta", {}).get("val") if source is not None else None
        if not n or val is None or not getattr(val, "shape", None):
            continue
        try:
            rows = resolver.evaluate(val.shape[0])
        except GraphError:
            continue
        each = rows // n
        reasons = {"input": f"{fx.name} sends its {rows} rows evenly to {n} ranks: {each} each",
                   "output": f"{fx.name} receives as many rows as it sends ({rows}), evenly "
                             f"from {n} ranks: {each} each"}
        for side, splits in (("input", ins), ("output", outs)):
            for arg in splits:
                s = _symbol_of(arg)
                if s is not None and s in found and s not in out and s not in resolver.values:
                    out[s] = (each, reasons[side])
        for s, (value, _) in out.items():
            resolver.values.setdefault(s, value)
    return out


def _collectives_of(fx_graph: Any, found: dict) -> dict[Any, list[str]]:
    """Symbol -> collectives whose split sizes or tensor sizes it sets, in graph order."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    out: dict[Any, list[str]] = {}
    for fx in fx_graph.nodes:
        if fx.op != "call_function" or classify(fx.target).collective is None:
            continue
        syms = set(free_unbacked_symbols(fx.meta.get("val")))
        for a in fx.all_input_nodes:
            syms |= set(free_unbacked_symbols(a.meta.get("val")))
        for s in sorted(syms, key=lambda s: _symbol_key(str(s))):
            if s in found:
                out.setdefault(s, []).append(fx.name)
    return out
