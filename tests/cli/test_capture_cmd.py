"""``commopt capture``: bad targets are one line with exit 2; a fake-world capture writes an
archive whose groups record gives every group's ranks."""

from __future__ import annotations

import pytest

from tests.cli_run import run_cli


@pytest.mark.parametrize(("target", "message"), [
    ("no_colon", "expected MODULE:FUNCTION"),
    ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
    ("tests.cli.test_capture_cmd:missing", "has no function 'missing'"),
    ("tests.cli.test_capture_cmd:not_a_capture", "returned a int, expected the result of commopt.capture"),
    ("tests.cli.test_capture_cmd:raises", "tests.cli.test_capture_cmd:raises failed: ValueError: model code broke"),
])
def test_bad_targets_are_one_line_exit_2(target, message, tmp_path, capsys):
    assert run_cli(["capture", target, "--world-size", "2", "-o", str(tmp_path / "s.pt2")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "s.pt2").exists()


def test_output_must_be_pt2(tmp_path, capsys):
    assert run_cli(["capture", "m:f", "--world-size", "2", "-o", str(tmp_path / "s.json")]) == 2
    assert "must be a .pt2" in capsys.readouterr().err


def not_a_capture():
    return 3


def raises():
    raise ValueError("model code broke")


def tp_step():
    """A 2-layer TP MLP step (used by the test below through the CLI)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )
    from torch.func import functional_call

    import commopt

    mesh = init_device_mesh("cpu", (4, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    model = parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    params = dict(model.named_parameters())

    def step(params, x):
        loss = functional_call(model, params, (x,)).square().mean()
        return loss, torch.autograd.grad(loss, list(params.values()))

    return commopt.capture(step, params, torch.randn(4, 8))


def test_capture_in_a_fake_world_records_groups_and_mesh(tmp_path):
    from commopt.io import load_graph

    out = tmp_path / "s.pt2"
    assert run_cli(["capture", "tests.cli.test_capture_cmd:tp_step", "--world-size", "8", "--rank", "3",
                    "-o", str(out)]) == 0
    g = load_graph(out)
    assert g.world_size == 8 and g.mesh == {"dp": 4, "tp": 2}
    used = {n.collective.group for n in g.nodes if n.collective is not None}
    assert [(g.groups[u].ranks, g.groups[u].mesh_dim) for u in used] == [((2, 3), "tp")]  # rank 3's tp pair
    assert not g.meta.get("load_warnings")
