"""The optimize output set when a piece cannot be produced."""

import commopt
from commopt.ir.builder import GraphBuilder


def test_graph_the_runner_cannot_launch_still_gets_the_rest_of_the_outputs(tmp_path):
    b = GraphBuilder(name="p2p", world_size=2)
    b.group("0", ranks=[0, 1])
    x = b.input("x", (64, 64))
    y = b.compute("y", "aten.relu.default", [x], (64, 64), duration_us=5)
    s = b.collective("send", "send", "0", y, reduce_op=None, duration_us=20)
    w = b.wait("send_wait", s)
    z = b.compute("z", "aten.relu.default", [x], (64, 64), duration_us=30)
    b.output([w, z])
    result = commopt.optimize(b.build(), output_dir=tmp_path, timings=False)
    names = [p.name for p in result.written]
    assert "run_p2p.py" not in names
    assert names == ["p2p.json", "buffer_plan.json", "report.html", "trace.json", "summary.json"]
    assert any(n.startswith("runner not generated:") and "send" in n for n in result.summary.notes)
