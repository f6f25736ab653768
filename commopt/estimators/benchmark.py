"""The benchmark estimator: time each compute op for real on this machine's device.

Each distinct (op, argument shapes, dtypes, scalars) is run on CUDA when present, else CPU,
with random tensors of the node's shapes: ``warmup`` runs, then the median of ``repeat``
timed runs (CUDA synchronized around each). Results are cached on disk per device and torch
version (``~/.cache/commopt`` or ``cache_dir``), so a second run costs nothing. Collectives
cannot be timed alone (they need peers) and defer to the next estimator, as do ops that fail
to run with the recorded arguments (noted once per op) and tensors over ``max_bytes``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from commopt.atomic import write_text
from commopt.ir.args import Symbol
from commopt.ir.graph import Graph, Node, NodeKind, Ref
from commopt.ir.ops import resolve_op

_CACHE_VERSION = 1


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/commopt`` or ``~/.cache/commopt``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "commopt"


class BenchmarkEstimator:
    """Measures compute nodes on the local device; caches by op signature."""

    name = "benchmark"

    def __init__(self, cache_dir: str | Path | None = None, *, warmup: int = 2, repeat: int = 5,
                 device: str | None = None, max_bytes: int = 1 << 30) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.warmup = warmup
        self.repeat = repeat
        self.max_bytes = max_bytes
        self.notes: list[str] = []
        self.measured = 0
        self.cache_hits = 0
        dev_name = torch.cuda.get_device_name() if self.device.startswith("cuda") else "cpu"
        tag = hashlib.sha256(f"{dev_name}|{torch.__version__}".encode()).hexdigest()[:12]
        self.cache_path = Path(cache_dir or default_cache_dir()) / f"benchmark-{self.device.split(':')[0]}-{tag}.json"
        self._cache: dict[str, float | None] = self._load_cache()
        self._dirty = False
        self._failed_ops: set[str] = set()

    def _load_cache(self) -> dict[str, float | None]:
        try:
            data = json.loads(self.cache_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
            return {}
        entries = data.get("entries")
        return dict(entries) if isinstance(entries, dict) else {}

    def save(self) -> None:
        """Write new measurements to the cache file (atomically)."""
        if not self._dirty:
            return
        payload = {"version": _CACHE_VERSION, "entries": dict(sorted(self._cache.items()))}
        write_text(self.cache_path, json.dumps(payload, indent=1))
        self._dirty = False

    def signature(self, node: Node, graph: Graph) -> str:
        """Cache key: the op and its arguments with tensors replaced by (shape, dtype)."""
        nodes = graph.nodes

        def enc(v: Any) -> Any:
            if isinstance(v, Ref):
                outs = nodes[v.index].outputs
                return ["T", list(outs[0].shape), outs[0].dtype] if outs else ["T?"]
            if isinstance(v, Symbol):
                return ["S", v.kind, v.value]
            if isinstance(v, (list, tuple)):
                return [enc(x) for x in v]
            if isinstance(v, dict):
                return {str(k): enc(x) for k, x in sorted(v.items())}
            if isinstance(v, float) and v != v:
                return "nan"
            return v

        text = json.dumps([node.op, enc(list(node.args)), enc(node.kwargs)], sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def estimate(self, node: Node, graph: Graph) -> float | None:
        """Measured median time of the node's op in microseconds, or None."""
        if node.kind is not NodeKind.COMPUTE:
            return None
        key = self.signature(node, graph)
        if key in self._cache:
            self.cache_hits += 1
            return self._cache[key]
        value = self._measure(node, graph)
        self._cache[key] = value
        self._dirty = True
        self.save()
        return value

    def _measure(self, node: Node, graph: Graph) -> float | None:
        import torch

        fn = resolve_op(node.op)
        if fn is None:
            self._note_op(node, "is not a torch op")
            return None
        nodes = graph.nodes
        total = sum(nodes[i].nbytes for i in node.inputs) + node.nbytes
        if total > self.max_bytes:
            self._note_op(node, f"moves more than {self.max_bytes >> 20} MiB")
            return None
        try:
            args = _materialize(list(node.args), nodes, self.device)
            kwargs = _materialize(dict(node.kwargs), nodes, self.device)
            cuda = self.device.startswith("cuda")
            for _ in range(self.warmup):
                fn(*args, **kwargs)
            times = []
            for _ in range(self.repeat):
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn(*args, **kwargs)
                if cuda:
                    torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e6)
        except Exception as exc:  # the recorded arguments do not run here
            self._note_op(node, f"failed to run ({type(exc).__name__})")
            return None
        self.measured += 1
        return statistics.median(times)

    def _note_op(self, node: Node, why: str) -> None:
        if node.op not in self._failed_ops:
            self._failed_ops.add(node.op)
            self.notes.append(f"benchmark: {node.op} (first at node {node.name!r}) {why}; "
                              "the next estimator answers")


def _materialize(value: Any, nodes, device: str) -> Any:
    import torch

    if isinstance(value, Ref):
        outs = nodes[value.index].outputs
        if not outs:
            return None
        t = outs[0]
        dtype = getattr(torch, t.dtype, torch.float32)
        if dtype.is_floating_point or dtype.is_complex:
            return torch.randn(t.shape, dtype=dtype, device=device)
        if dtype == torch.bool:
            return torch.zeros(t.shape, dtype=dtype, device=device)
        return torch.randint(0, 2, t.shape, dtype=dtype, device=device)
    if isinstance(value, Symbol):
        if value.kind == "dtype":
            return getattr(torch, value.value)
        if value.kind == "device":
            return torch.device(device)
        if value.kind == "layout":
            return getattr(torch, value.value, torch.strided)
        if value.kind == "memory_format":
            return getattr(torch, value.value, torch.contiguous_format)
    if isinstance(value, list):
        return [_materialize(v, nodes, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_materialize(v, nodes, device) for v in value)
    if isinstance(value, dict):
        return {k: _materialize(v, nodes, device) for k, v in value.items()}
    return value


def from_options(options) -> BenchmarkEstimator:
    """The benchmark estimator, caching under ``options.cache_dir``."""
    return BenchmarkEstimator(options.cache_dir)
