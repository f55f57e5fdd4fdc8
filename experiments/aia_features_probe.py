"""How much of ML-100k's attributes eq. 7's item part can hold, whatever trained the item rows.

Attribute inference (paper 004, adversary/aia.py) reads a user's attributes off the mean of the
item rows of the user's positives (and the user row). The rows a federated model learns are one
source; this probe scores the same attack, with the same classifier, split and public users, on
item rows that do not come from any run:

- ``svd``: the top-d right singular vectors of the users' training matrix, scaled by the square
  roots of their singular values (what a well-trained factorisation of the same data holds);
- ``random``: Gaussian rows (the mean over I'_u is then a random projection of the user's
  multi-hot row: what the item sets alone give with untrained rows).

Prints, per seed and source, gender AUC and age and occupation micro-F1 with the majority-class
figure of the same split, for the classifier's last epoch (``--aia-select last``, the default), the
epoch of least log-loss on a validation quarter of the public users (``validation``) and its best
epoch on the scored users (``best-test``, optimistic).

    .venv/bin/python experiments/aia_features_probe.py [--dim 64] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse

import numpy as np

from adversary.aia import AiaSettings, Features, attack_all, public_users
from learning.attribute_mlp import train
from p2pnode.attacks.attributes import attributes_for
from p2pnode.config import RunConfig
from p2pnode.nodes.prepare import prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    prep = prepare(RunConfig().validate())
    attributes = attributes_for(prep)
    n = len(prep.users)
    n_items = int(prep.init["item"].shape[0])
    matrix = np.zeros((n, n_items), np.float32)
    for u, data in enumerate(prep.users):
        matrix[u, data.train_items] = 1.0
    _, s, vt = np.linalg.svd(matrix, full_matrices=False)
    tables = {
        "svd": (vt[: args.dim].T * np.sqrt(s[: args.dim])).astype(np.float32),
        "random": np.random.default_rng(0).standard_normal((n_items, args.dim)).astype(np.float32),
    }
    print("source  seed  select     gender AUC  age F1 (maj)   occupation F1 (maj)")
    for seed in (int(x) for x in args.seeds.split(",")):
        public = public_users(n, 0.2, seed)
        for name, table in tables.items():
            features: dict[int, Features] = {
                u: table[d.train_items].mean(0) for u, d in enumerate(prep.users)
            }
            for select in ("last", "validation", "best-test"):
                out = attack_all(features, attributes, public, AiaSettings(seed=seed, select=select), train)
                a = out["attributes"]
                print(
                    f"{name:7s} {seed:4d}  {select:9s}  {a['gender']['auc']:.3f}       "
                    f"{a['age']['micro_f1']:.3f} ({a['age']['majority']['micro_f1']:.3f})  "
                    f"{a['occupation']['micro_f1']:.3f} ({a['occupation']['majority']['micro_f1']:.3f})"
                )


if __name__ == "__main__":
    main()
