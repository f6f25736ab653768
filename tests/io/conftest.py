"""Fixtures for IO tests: a fake process group for exporting graphs in this process."""

from __future__ import annotations

import pytest


@pytest.fixture
def fake_pg():
    """A fake-backend world of 2 ranks (rank 0) for the test; torn down afterwards."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()
