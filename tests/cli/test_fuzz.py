"""Random mutations of the sample JSON graphs through every graph-reading command, in-process.

Whatever the mutation (a field deleted, a value of another type, a number made negative,
huge, NaN or infinite, a string of control characters or a lone surrogate, deep nesting),
a command ends with exit 0, 1 (a check or verification failed) or 2 (bad input, one line),
never with a traceback (exit 3), and never touches its input file. A trace it writes is
strict JSON.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commopt.cli.main import cli

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs" / "ws2"
#: The small samples (llama_tp is ten times their size and adds only time).
GRAPHS = sorted(p for p in SAMPLES.glob("*.json") if p.stat().st_size < 50_000)
DOCS = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in GRAPHS}

#: Marks where a deeply nested value goes: json.dumps cannot write 5000 levels itself.
DEEP = "\x00commopt-fuzz-deep\x00"

NUMBERS = [-1, -(2**62), 2**62, 10**30, 10**400, float("nan"), float("inf"), float("-inf"), 1e308, 0, 0.5]
STRINGS = ["", "\x00\x01\x1b[31m\n\r\t", "\ud800", "a" * 10_000, "ref", "../../etc/passwd", "0"]
OTHER_TYPES = [None, True, [], {}, [1, 2], {"ref": "x"}, "text", 3, 2.5]

COMMANDS = ["inspect", "optimize", "plan", "codegen", "report", "check", "verify", "estimate"]


def _paths(doc: Any) -> list[tuple]:
    """Every location in ``doc`` (keys and indices from the root), root excluded."""
    out: list[tuple] = []
    stack: list[tuple[Any, tuple]] = [(doc, ())]
    while stack:
        v, loc = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            out.append((*loc, k))
            stack.append((x, (*loc, k)))
    return sorted(out, key=repr)


PATHS = {name: _paths(doc) for name, doc in DOCS.items()}


def _get(doc: Any, loc: tuple) -> Any:
    for k in loc:
        doc = doc[k]
    return doc


@st.composite
def mutated(draw) -> tuple[str, str]:
    """(sample name, JSON text of the sample with 1-3 mutations)."""
    name = draw(st.sampled_from(sorted(DOCS)))
    doc = json.loads(json.dumps(DOCS[name]))
    deep_levels = 0
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        loc = paths[draw(st.integers(0, len(paths) - 1))]
        parent, key = _get(doc, loc[:-1]), loc[-1]
        old = parent[key]
        how = draw(st.sampled_from(["delete", "type", "number", "string", "deep"]))
        if how == "delete":
            del parent[key]
        elif how == "type":
            parent[key] = draw(st.sampled_from([t for t in OTHER_TYPES if type(t) is not type(old)]))
        elif how == "number":
            parent[key] = draw(st.sampled_from(NUMBERS))
        elif how == "string":
            parent[key] = draw(st.sampled_from(STRINGS))
        elif deep_levels == 0:
            deep_levels = draw(st.sampled_from([50, 150, 5000]))
            parent[key] = DEEP
    text = json.dumps(doc, allow_nan=True)
    if deep_levels:
        text = text.replace(json.dumps(DEEP), "[" * deep_levels + "]" * deep_levels)
    return name, text


def _argv(command: str, graph: Path, original: Path, out: Path) -> list[str]:
    if command == "optimize":
        return [command, str(graph), "-o", str(out / "opt"), "--no-timings"]
    if command == "codegen":
        return [command, str(graph), "-o", str(out / "run.py")]
    if command == "plan":
        return [command, str(graph), "-o", str(out / "plan.json")]
    if command == "report":
        return [command, str(graph), "--trace", str(out / "trace.json")]
    if command == "verify":
        return [command, str(original), str(graph)]
    return [command, str(graph)]


def _strict_json(path: Path) -> None:
    """``path`` parses as JSON with no NaN or Infinity (what other tools accept)."""

    def refuse(name: str) -> None:
        raise AssertionError(f"{path.name} holds {name}")

    json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated(), command=st.sampled_from(COMMANDS))
def test_mutated_graphs_end_in_0_1_or_2_without_a_traceback(case, command):
    name, text = case
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        graph = tmp_path / name
        graph.write_text(text, encoding="utf-8", errors="surrogatepass")
        before = graph.read_bytes()
        out = tmp_path / "out"
        out.mkdir()
        result = CliRunner().invoke(cli, _argv(command, graph, SAMPLES / name, out))
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert result.exception is None or isinstance(result.exception, SystemExit), output
        assert result.exit_code in (0, 1, 2), output
        assert "Traceback" not in output and "internal error" not in output, output
        if result.exit_code == 2:
            errors = [ln for ln in result.stderr.splitlines() if ln.startswith("commopt: error: ")]
            assert len(errors) == 1, output
        assert graph.read_bytes() == before
        trace = out / "trace.json"
        if result.exit_code == 0 and trace.exists():
            _strict_json(trace)


def test_the_mutations_reach_every_kind_of_value():
    """The strategy's building blocks are what the docstring promises (a guard on the guard)."""
    assert any(isinstance(n, float) and math.isnan(n) for n in NUMBERS)
    assert any(isinstance(n, float) and math.isinf(n) for n in NUMBERS)
    assert any(isinstance(n, int) and n > 2**63 for n in NUMBERS)
    assert "\ud800" in STRINGS and any("\x00" in s for s in STRINGS)
    assert len(GRAPHS) >= 4 and all(PATHS[p.name] for p in GRAPHS)
    assert set(COMMANDS) >= {"inspect", "optimize", "plan", "codegen", "report", "check", "verify", "estimate"}
