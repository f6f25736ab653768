"""Classify torch FX nodes into IR node kinds, from op schemas rather than op-name lists.

One function, :func:`classify`, decides for one ``call_function`` target what the IR needs to
schedule it safely: its kind, the collective it issues, which arguments it writes, which it
aliases, and whether it is an ordering barrier. Schema facts are cached per overload, so
classifying a 100,000-node graph costs one dictionary lookup per node after the first of
each op.

Rules (see docs/design.md, "The graph IR"):

- ``_c10d_functional.*`` collectives (and ``_c10d_functional_autograd.*``) are COLLECTIVE, with
  their type, group name, reduce op; ``wait_tensor`` is WAIT;
- legacy ``c10d.*`` ops (which take a ProcessGroup object and complete through ``Work``) are
  not modelled: they are ordering barriers that write every tensor they take;
- an op whose schema writes an argument (``Tensor(a!)``) mutates it, and aliases it when the
  result carries the same alias set; an op whose result aliases an argument without writing
  anything is a VIEW;
- RNG ops (``nondeterministic_seeded``) are ``rng``: ordered among themselves and around
  side effects, but collectives may cross them (communication draws no random numbers);
- ops with neither result nor write, and targets with no schema (Python callables,
  higher-order ops) are side effects, except pure Python arithmetic on sizes
  (``operator.*``, ``math.*``, ``torch.sym_*``).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any

from commopt.ir.graph import NodeKind

#: ``_c10d_functional`` op name -> (IR collective type, coalesced, in_place, output argument).
COLLECTIVE_OPS: dict[str, tuple[str, bool, bool, str | None]] = {
    "all_reduce": ("all_reduce", False, False, None),
    "all_reduce_": ("all_reduce", False, True, None),
    "all_reduce_coalesced": ("all_reduce", True, False, None),
    "all_reduce_coalesced_": ("all_reduce", True, True, None),
    "all_gather_into_tensor": ("all_gather", False, False, None),
    "all_gather_into_tensor_out": ("all_gather", False, False, "out"),
    "all_gather_into_tensor_coalesced": ("all_gather", True, False, None),
    "reduce_scatter_tensor": ("reduce_scatter", False, False, None),
    "reduce_scatter_tensor_out": ("reduce_scatter", False, False, "out"),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", True, False, None),
    "all_to_all_single": ("all_to_all", False, False, None),
    "broadcast": ("broadcast", False, False, None),
    "broadcast_": ("broadcast", False, True, None),
    "isend": ("send", False, False, None),
    "irecv": ("recv", False, False, None),
    "batch_p2p_ops": ("send", True, False, None),
}

COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd")

#: Python callables that are pure arithmetic on sizes and scalars (no schema, no effect).
_PURE_MODULES = ("_operator", "operator", "math", "builtins")


@dataclass(frozen=True, slots=True)
class OpFacts:
    """What the IR needs to know about one call target, independent of its arguments.

    ``writes`` / ``alias_arg`` name schema arguments; ``arg_names`` lists the schema's
    arguments in order (to map positional FX args to names); ``None`` when there is no schema.
    """

    kind: NodeKind
    side_effect: bool = False
    rng: bool = False
    collective: tuple[str, bool, bool, str | None] | None = None
    writes: tuple[str, ...] = ()
    alias_arg: str | None = None
    arg_names: tuple[str, ...] | None = None
    legacy_c10d: bool = False


_CACHE: dict[Any, OpFacts] = {}


def classify(target: Any) -> OpFacts:
    """The :class:`OpFacts` of a ``call_function`` target (cached per target)."""
    facts = _CACHE.get(target)
    if facts is None:
        facts = _classify(target)
        _CACHE[target] = facts
    return facts


def _classify(target: Any) -> OpFacts:
    import torch

    if target is operator.getitem:
        return OpFacts(NodeKind.VIEW)
    if isinstance(target, torch._ops.OpOverload):
        schema = target._schema
        arg_names = tuple(a.name for a in schema.arguments)
        ns = target.namespace
        name = target._opname
        if ns in COLLECTIVE_NAMESPACES:
            if name == "wait_tensor":
                return OpFacts(NodeKind.WAIT, arg_names=arg_names)
            coll = COLLECTIVE_OPS.get(name)
            if coll is not None:
                writes, alias_arg = _schema_alias(schema)
                return OpFacts(NodeKind.COLLECTIVE, collective=coll, writes=writes,
                               alias_arg=alias_arg, arg_names=arg_names)
            return OpFacts(NodeKind.COMPUTE, side_effect=True, arg_names=arg_names)
        if ns == "c10d":
            tensor_args = tuple(a.name for a in schema.arguments if _is_tensorish(a.type))
            return OpFacts(NodeKind.COMPUTE, side_effect=True, writes=tensor_args,
                           arg_names=arg_names, legacy_c10d=True)
        writes, alias_arg = _schema_alias(schema)
        seeded = torch.Tag.nondeterministic_seeded in target.tags
        if writes:
            return OpFacts(NodeKind.COMPUTE, rng=seeded, writes=writes,
                           alias_arg=alias_arg, arg_names=arg_names)
        if alias_arg is not None:
            return OpFacts(NodeKind.VIEW, alias_arg=alias_arg, arg_names=arg_names)
        # an op that returns nothing and writes nothing exists for its effect, except the
        # metadata assertions export inserts (they only raise; making them barriers would pin
        # every collective around them)
        no_effect_visible = not schema.returns and not name.startswith("_assert")
        return OpFacts(NodeKind.COMPUTE, side_effect=no_effect_visible, rng=seeded and not no_effect_visible,
                       arg_names=arg_names)
    module = getattr(target, "__module__", None) or ""
    if module in _PURE_MODULES or target in (math.ceil, math.floor) or _is_sym_function(target):
        return OpFacts(NodeKind.COMPUTE)
    return OpFacts(NodeKind.COMPUTE, side_effect=True)


def _is_sym_function(target: Any) -> bool:
    import torch

    name = getattr(target, "__name__", "")
    return name.startswith("sym_") and getattr(torch, name, None) is target


def _is_tensorish(t: Any) -> bool:
    text = str(t)
    return text.startswith("Tensor") or text.startswith("List[Tensor") or text.startswith("Optional[Tensor")


def _schema_alias(schema: Any) -> tuple[tuple[str, ...], str | None]:
    """(arguments the op writes, argument its first result aliases) from alias annotations."""
    writes: list[str] = []
    sets: dict[frozenset[str], str] = {}
    for a in schema.arguments:
        info = a.alias_info
        if info is None:
            continue
        if info.is_write:
            writes.append(a.name)
        sets.setdefault(frozenset(info.before_set), a.name)
    alias_arg = None
    if schema.returns:
        ret = schema.returns[0]
        rset = frozenset(ret.alias_info.before_set) if ret.alias_info is not None else frozenset()
        if not rset:
            # list results carry the annotation on their element ("Tensor(a)[]")
            returns_text = str(schema).rsplit(" -> ", 1)[-1]
            m = re.match(r"\(?\s*Tensor\(([a-z]+)!?\)", returns_text)
            rset = frozenset({m.group(1)}) if m else frozenset()
        if rset:
            alias_arg = sets.get(rset)
    return tuple(writes), alias_arg


def bind_args(facts: OpFacts, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Schema argument name -> value for an FX call (positional args bound by position)."""
    if facts.arg_names is None:
        return dict(kwargs)
    bound = dict(zip(facts.arg_names, args, strict=False))
    bound.update(kwargs)
    return bound
