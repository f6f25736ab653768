"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_graphs"

# Derandomized in CI so a property-test failure reproduces; locally random.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """The committed sample graphs."""
    return SAMPLES
