"""Shared fixtures: the ML-100k dataset (fetched by scripts/bootstrap.sh) and small configs."""

from __future__ import annotations

import pytest
import torch

from learning.interactions import Interactions
from p2pnode.data.datasets import load_ml100k
from p2pnode.runners.process import tune_allocator

torch.set_num_threads(1)
tune_allocator()


@pytest.fixture(scope="session")
def ml100k() -> Interactions:
    return load_ml100k()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2``), the functional tests run one at a time on one worker
    (``--dist loadgroup``): they start real processes on loopback ports and time real rounds,
    so two of them at once would compete for ports and for the cores their timings assume. Those
    marked ``untimed`` run no timed rounds (a Ray cluster running simulations) and go beside the
    others: the functional tests one after another are the suite's longest path."""
    for item in items:
        functional = "tests/functional/" in str(item.path).replace("\\", "/")
        if functional and not item.get_closest_marker("untimed"):
            item.add_marker(pytest.mark.xdist_group("functional"))
