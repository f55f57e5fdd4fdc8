"""What the stored DP-SGD calibrations (p2pnode/data/sigma_store.py) save: one Figure 5 run built with
an empty store, then built again by a new store reading what the first left, side by side in one
process; the σ each node gets must be the same in both.

    .venv/bin/python -m bench.dp_calibration [--row "Rand-Gossip, ε = 1000"] [--experiment fig5]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import tempfile
import time
from pathlib import Path

import torch

from learning import dp
from p2plab.experiment import load
from p2pnode.data import sigma_store
from p2pnode.runners.process import tune_allocator
from p2pnode.runners.sim import Simulation


def build(config: object, folder: str) -> tuple[float, list[float]]:
    """Seconds to build the run with a new store on ``folder`` (as a new process would have),
    and every node's σ."""
    dp.calibrate_noise.cache_clear()  # nothing from the build before, in this process
    os.environ["P2PNODE_CACHE"] = folder
    sigma_store._INSTALLED.clear()  # the build installs it afresh, reading the file
    t = time.perf_counter()
    sim = Simulation(config)  # type: ignore[arg-type]
    seconds = time.perf_counter() - t
    sigmas = [float(node.learner.dp.noise_multiplier) for node in sim.host.nodes.values()]  # type: ignore[attr-defined]
    return seconds, sigmas


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="fig5")
    parser.add_argument("--row", default="Rand-Gossip, ε = 1000")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tune_allocator()
    exp = load(args.experiment)
    (row,) = [r for r in exp.rows if r.label == args.row]
    config = exp.config(row, exp.seeds[0], {}).validate()
    with tempfile.TemporaryDirectory() as tmp:
        cold, first = build(config, tmp)
        distinct = len((Path(tmp) / sigma_store.FILE_NAME).read_text().splitlines())
        warm, again = build(config, tmp)
    print(f"{args.experiment} / {args.row}: {len(first)} nodes, {distinct} distinct calibrations")
    print(f"  build with an empty store      {cold:7.1f} s")
    print(f"  build reading the stored σ     {warm:7.1f} s   (x{warm / cold:.2f})")
    print(f"  every node's σ the same: {first == again}")


if __name__ == "__main__":
    main()
