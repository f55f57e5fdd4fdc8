"""PARD over real HTTP (paper 004 §III-D, protocols/public.py): in gossip the public users' rows
of D_pub travel between processes beside their models, and every node trains with them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from adversary.aia import public_users
from p2plab.launch import launch
from p2pnode.config import RunConfig

pytestmark = pytest.mark.functional

NODES = 40  #: two processes: nodes 0-19 and 20-39


def _seed_with_publishers_in_the_second_process() -> int:
    """A seed whose public users (η 0.1: 4 of 40) are all hosted by the second process, so a row
    held by a node of the first came over HTTP."""
    return next(s for s in range(500) if (np.flatnonzero(public_users(NODES, 0.1, s)) >= NODES // 2).all())


def test_public_rows_cross_processes_and_the_run_ends_clean(tmp_path: Path) -> None:
    seed = _seed_with_publishers_in_the_second_process()
    publishers = set(np.flatnonzero(public_users(NODES, 0.1, seed)).tolist())
    config = (
        RunConfig(nodes=NODES, rounds=3, seed=seed, model="ncf", dataset="synthetic", tick_seconds=0.05)
        .replace(
            **{
                "learning.lr": 0.01,
                "learning.defence": "pard",
                "learning.local_head": True,
                "learning.public_share": 0.1,
                "learning.ncf_dim": 8,
                "learning.ncf_hidden": 4,
            }
        )
        .validate()
    )
    total = asyncio.run(launch(config, 2, tmp_path))
    assert total["round"] == 3 and total["nodes"] == NODES
    refused = total["rejected"]
    assert not {"schema", "not-public", "oversize", "non-finite"} & set(refused), refused
    rows = {r["node"]: r["public_rows"] for r in total["per_node"]}
    assert set(rows) == set(range(NODES))
    assert all(0 <= held <= len(publishers - {n}) for n, held in rows.items())
    first = [rows[n] for n in range(NODES // 2)]
    assert sum(first) > 0, rows  # rows of the second process's publishers, received over HTTP
    assert 0.0 < total["hit_ratio_at_20"] <= 1.0 and "ndcg_at_20" in total
