"""Python arithmetic on sizes, as the runner runs it.

torch.export writes the arithmetic on data-dependent sizes (``u2 + u3``, the range checks
``u0 >= 0`` its ``_assert_scalar`` nodes test) as ``operator.*`` / ``torch.sym_*`` nodes. They
have no aten schema, so they are not resolved as ops: each becomes a ``'scalar'`` step calling
the Python function it stands for (the script's ``SCALARS`` table: ``operator`` functions and
builtins), on the values the step computed (``.item()`` results), so every size the runner
uses is the real one of this step, never an assumed one.
"""

from __future__ import annotations

#: operator-module functions of two arguments and of one, by the name the script knows them.
_BINARY = ("add", "sub", "mul", "floordiv", "mod", "truediv", "pow", "ge", "gt", "le", "lt",
           "eq", "ne", "and_", "or_", "xor", "lshift", "rshift")
_UNARY = ("neg", "pos", "not_", "abs", "invert")
#: Python callables of the IR -> the script's function name (any number of arguments).
_CALLS = {"torch.sym_max": "max", "torch.sym_min": "min", "torch.sym_float": "float",
          "torch.sym_int": "int", "torch.sym_sum": "sum", "builtins.int": "int",
          "builtins.float": "float", "builtins.max": "max", "builtins.min": "min",
          "builtins.abs": "abs"}
_MODULES = ("_operator.", "operator.")
#: Every name a ``'scalar'`` step may use: the keys of the script's ``SCALARS`` table.
SCALAR_NAMES = frozenset((*_BINARY, *_UNARY, *_CALLS.values()))


def is_scalar_op(op: str) -> bool:
    """Whether ``op`` (the IR's op string) is Python arithmetic the runner evaluates itself."""
    if op in _CALLS or op == "torch.sym_not":
        return True
    for mod in _MODULES:
        if op.startswith(mod):
            name = op[len(mod):]
            return name in _BINARY or name in _UNARY
    return False


def scalar_function(op: str, arity: int) -> str | None:
    """The script's name for scalar op ``op`` called with ``arity`` arguments (a key of its
    ``SCALARS`` table), or None when the op or its arity is not one the script evaluates."""
    if op == "torch.sym_not":
        return "not_" if arity == 1 else None
    if op in _CALLS:
        return _CALLS[op] if arity >= 1 else None
    name = op.split(".", 1)[1] if "." in op else op
    if name in _BINARY:
        return name if arity == 2 else None
    if name in _UNARY:
        return name if arity == 1 else None
    return None
