"""p2pnode's simulator next to gossipy (PyPI ``gossipy-dfl``), the same setting, seconds per round.

gossipy is not a dependency of p2pnode; it lives in its own environment, made once with

    python3.11 -m venv .venv-gossipy
    .venv-gossipy/bin/pip install torch==2.13.0 gossipy-dfl==0.0.1

(gossipy also imports torchvision, for image datasets only; it is left out, see ``GOSSIPY``.)

The setting is the closest gossipy allows to p2pnode's Base GL on ML-100k: 943 nodes, one per
user, each with a GMF-sized torch model (user row, 1,682 × 32 item table, h, b) trained with
Adam (lr 0.001, batches of 256, one local epoch) on its positives and 4 negatives each (drawn
once: gossipy cannot redraw them per epoch), PUSH gossip with merge-then-update over a random
3-out graph (p2pnode: PeerSwap with views of 3), no evaluation. gossipy runs in a child process
of the other environment; the two alternate, ``--repeats`` times each, and the medians' ratio
is printed.

    .venv/bin/python -m bench.vs_gossipy [--gossipy-python .venv-gossipy/bin/python] [--nodes 943]
        [--rounds 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_allocator
from p2pnode.runners.sim import Simulation

ROOT = Path(__file__).resolve().parents[1]

#: run by gossipy's interpreter: argv = data.npz, rounds; prints seconds per round as JSON
GOSSIPY = """
import json, sys, time, types
import numpy as np, torch
torch.set_num_threads(1)
# gossipy.data imports torchvision for its image datasets alone; PyPI's torchvision wheels need
# CUDA torch, so an empty module stands in (nothing here loads an image dataset)
sys.modules.setdefault("torchvision", types.ModuleType("torchvision"))
from gossipy.core import AntiEntropyProtocol, CreateModelMode, StaticP2PNetwork
from gossipy.model import TorchModel
from gossipy.model.handler import TorchModelHandler
from gossipy.node import GossipNode
from gossipy.simul import GossipSimulator

class GMF(TorchModel):
    def __init__(self, n_items, f):
        super().__init__()
        self.user = torch.nn.Parameter(torch.randn(1, f) * 0.01)
        self.item = torch.nn.Embedding(n_items, f)
        self.h = torch.nn.Parameter(torch.rand(f) * 0.6 - 0.3)
        self.b = torch.nn.Parameter(torch.zeros(1))
    def init_weights(self):
        torch.nn.init.normal_(self.item.weight, 0.0, 0.01)
    def forward(self, x):
        return torch.sigmoid((self.item(x) * self.user) @ self.h + self.b)

class NoEval:
    def has_test(self):
        return False

data = np.load(sys.argv[1])
rounds = int(sys.argv[2])
items, labels, first, outs = data["items"], data["labels"], data["first"], data["outs"]
n = len(first) - 1
n_items = int(data["n_items"][0])
topology = np.zeros((n, n))
for u in range(n):
    topology[u, outs[u]] = 1
net = StaticP2PNetwork(n, topology)
nodes = {}
for u in range(n):
    x = torch.from_numpy(items[first[u]:first[u + 1]])
    y = torch.from_numpy(labels[first[u]:first[u + 1]])
    handler = TorchModelHandler(
        net=GMF(n_items, 32), optimizer=torch.optim.Adam, optimizer_params={"lr": 0.001},
        criterion=torch.nn.functional.binary_cross_entropy, local_epochs=1, batch_size=256,
        create_model_mode=CreateModelMode.MERGE_UPDATE,
    )
    nodes[u] = GossipNode(idx=u, data=((x, y), None), round_len=100, model_handler=handler, p2p_net=net)
sim = GossipSimulator(nodes=nodes, data_dispatcher=NoEval(), delta=100, protocol=AntiEntropyProtocol.PUSH)
sim.init_nodes(seed=42)
t = time.perf_counter()
sim.start(n_rounds=rounds)
print(json.dumps({"per_round": (time.perf_counter() - t) / rounds}))
"""


def gossipy_data(sim: Simulation, path: Path, seed: int) -> None:
    """Every node's training examples (positives, 4 fixed negatives each) and a 3-out graph."""
    rng = np.random.default_rng(seed)
    learners = [n.learner for _, n in sorted(sim.host.nodes.items())]
    items, labels = zip(*(lrn.examples() for lrn in learners), strict=True)
    first = np.concatenate(([0], np.cumsum([len(x) for x in items])))
    n = len(learners)
    outs = np.array([rng.choice([v for v in range(n) if v != u], 3, replace=False) for u in range(n)])
    np.savez(
        path,
        items=np.concatenate(items),
        labels=np.concatenate(labels).astype(np.float32),
        first=first,
        outs=outs,
        n_items=np.array([learners[0].data.n_items]),
    )


def run_gossipy(python: str, data: Path, rounds: int) -> float:
    out = subprocess.run(
        [python, "-c", GOSSIPY, str(data), str(rounds)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"gossipy failed:\n{out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["per_round"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gossipy-python", default=str(ROOT / ".venv-gossipy" / "bin" / "python"))
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if not Path(args.gossipy_python).exists():
        raise SystemExit(f"no gossipy environment at {args.gossipy_python}: see this module's docstring")
    torch.set_num_threads(1)
    tune_allocator()
    sim = Simulation(RunConfig(nodes=args.nodes, rounds=1000))
    sim.run_round()  # allocation and the kernel's first call
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        gossipy_data(sim, data, seed=0)
        for _ in range(args.repeats):
            theirs.append(run_gossipy(args.gossipy_python, data, args.rounds))
            t = time.perf_counter()
            for _ in range(args.rounds):
                sim.run_round()
            ours.append((time.perf_counter() - t) / args.rounds)
            print(f"gossipy {theirs[-1]:.2f} s/round   p2pnode {ours[-1]:.2f} s/round", flush=True)
    g, p = statistics.median(theirs), statistics.median(ours)
    print(
        f"{args.nodes} nodes: gossipy {g:.2f} s/round, p2pnode {p:.2f} s/round, "
        f"gossipy / p2pnode = {g / p:.1f}x"
    )


if __name__ == "__main__":
    main()
