"""A graph whose names and strings try to break out of generated code."""

from __future__ import annotations

from commopt.ir.builder import GraphBuilder
from commopt.ir.graph import Graph

#: Marker file a successful injection would create (relative to the working directory).
PWNED = "PWNED"
EVIL = f"x'); __import__('os').system('touch {PWNED}'); ('"
NAMES = [
    EVIL,
    'a"""b\nc = __import__("os")',
    "ünïcødé 💥 名前",
    "line\nbreak\r\n# comment",
    "\\x00\\' \" '''",
    "class",
]


def hostile_graph() -> Graph:
    """The tiny graph's computation with hostile node, group, role and graph names."""
    b = GraphBuilder(name=f"evil\n{EVIL}", world_size=2)
    group = b.group(f"0'); __import__('os').system('touch {PWNED}') #", ranks=[0, 1])
    x = b.input(NAMES[0], (4, 8), role=f"user'\n{EVIL}")
    w = b.input(NAMES[1], (8, 8), role="parameter")
    y = b.compute(NAMES[2], "aten.mm.default", [x, w], (4, 8))
    r = b.compute(NAMES[3], "aten.relu.default", [y], (4, 8))
    ar = b.collective(NAMES[4], "all_reduce", group, r)
    ar_w = b.wait(NAMES[5], ar)
    e = b.compute("emu" + EVIL, f"__import__('os').system('touch {PWNED}')", [ar_w], (4, 8),
                  duration_us=5.0)
    d = b.compute("div" + EVIL, "aten.div.Tensor_mode", [e, y], (4, 8),
                  args=None, kwargs={"rounding_mode": "trunc"})
    b.output([d, ar_w])
    return b.build()
