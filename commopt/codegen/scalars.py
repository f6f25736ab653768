"""Python arithmetic on sizes, as the runner runs it.

torch.export writes the arithmetic on data-dependent sizes (``u2 + u3``, the range checks
``u0 >= 0`` its ``_assert_scalar`` nodes test) as ``operator.*`` / ``torch.sym_*`` nodes. They
have no aten schema, so they are not resolved as ops: each becomes the Python expression it
stands for, evaluated on the values the step computed (``.item()`` results), so every size
the runner uses is the real one of this step, never an assumed one.
"""

from __future__ import annotations

#: op name (as the IR spells Python callables) -> (arity, expression template).
_BINARY = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "truediv": "/",
           "pow": "**", "ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "==", "ne": "!=",
           "and_": "&", "or_": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_UNARY = {"neg": "-{0}", "pos": "+{0}", "not_": "not {0}", "abs": "abs({0})", "invert": "~{0}"}
_CALLS = {"torch.sym_max": "max", "torch.sym_min": "min", "torch.sym_not": "not",
          "torch.sym_float": "float", "torch.sym_int": "int", "torch.sym_sum": "sum",
          "builtins.int": "int", "builtins.float": "float", "builtins.max": "max",
          "builtins.min": "min", "builtins.abs": "abs"}
_MODULES = ("_operator.", "operator.")


def is_scalar_op(op: str) -> bool:
    """Whether ``op`` (the IR's op string) is Python arithmetic the runner writes inline."""
    if op in _CALLS:
        return True
    for mod in _MODULES:
        if op.startswith(mod):
            name = op[len(mod):]
            return name in _BINARY or name in _UNARY
    return False


def scalar_expression(op: str, args: list[str]) -> str | None:
    """The Python expression of scalar op ``op`` on argument sources ``args`` (None when the
    op or its arity is not one this module writes)."""
    if op in _CALLS:
        fn = _CALLS[op]
        if fn == "not":
            return f"(not {args[0]})" if len(args) == 1 else None
        return f"{fn}({', '.join(args)})"
    name = op.split(".", 1)[1] if "." in op else op
    if name in _BINARY and len(args) == 2:
        return f"({args[0]} {_BINARY[name]} {args[1]})"
    if name in _UNARY and len(args) == 1:
        return "(" + _UNARY[name].format(args[0]) + ")"
    return None
