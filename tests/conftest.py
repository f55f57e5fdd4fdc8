"""Shared fixtures: the ML-100k dataset (fetched by scripts/bootstrap.sh) and small configs."""

from __future__ import annotations

import pytest
import torch

from learning.interactions import Interactions
from p2pnode.datasets import load_ml100k
from p2pnode.process import tune_allocator

torch.set_num_threads(1)
tune_allocator()


@pytest.fixture(scope="session")
def ml100k() -> Interactions:
    return load_ml100k()
