"""The benchmark estimator times real ops on this machine and caches them on disk."""

from __future__ import annotations

from commopt.estimators.benchmark import BenchmarkEstimator
from commopt.ir.builder import GraphBuilder


def _graph():
    b = GraphBuilder(world_size=2)
    b.group("g", ranks=[0, 1])
    a = b.input("a", (128, 128))
    w = b.input("w", (128, 128))
    mm = b.compute("mm", "aten.mm.default", [a, w], (128, 128))
    mm2 = b.compute("mm2", "aten.mm.default", [mm, w], (128, 128))
    bad = b.compute("bad", "aten.mm.default", [mm, b.input("v", (3, 5))], (128, 5))
    c = b.collective("ar", "all_reduce", "g", mm2)
    b.output([b.wait("w1", c), bad])
    return b.build()


def test_measures_once_then_reads_the_cache(tmp_path):
    g = _graph()
    est = BenchmarkEstimator(tmp_path, warmup=1, repeat=3)
    t = est.estimate(g.node("mm"), g)
    assert t is not None and t > 0
    assert est.estimate(g.node("mm2"), g) == t  # same signature: cached in memory
    assert est.measured == 1 and est.cache_hits == 1
    assert est.estimate(g.node("ar"), g) is None  # collectives need peers
    assert est.estimate(g.node("bad"), g) is None  # shapes that do not multiply
    assert any("aten.mm.default" in n and "failed to run" in n for n in est.notes)
    again = BenchmarkEstimator(tmp_path, warmup=1, repeat=3)
    assert again.estimate(g.node("mm"), g) == t and again.measured == 0
    assert est.cache_path.parent == tmp_path
