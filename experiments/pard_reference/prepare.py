"""Set up paper 004's code (XuHao-bit/PARD) to run beside p2pnode on the same ML-100k split.

    python experiments/pard_reference/prepare.py CHECKOUT

CHECKOUT is a copy of the authors' repository outside this one (never committed here). This
writes ``CHECKOUT/../data/ml-100k/{ratings,users}.dat`` from p2pnode's ML-100k cache, and makes
the few changes the code needs to run here, each marked ``# PATCH`` where it is made:

- ``data.py``: ``_binarize`` assigns through ``.loc`` (pandas 3's copy-on-write silently drops the
  chained assignment, which left ratings 1-5 as BCE targets); ``random.sample`` of a set becomes
  one of the sorted set (Python 3.11 refuses sets).
- ``config.py``/``trainer.py``: ``--share_mlp True`` sends the MLP to the server with the item
  table (004's FedNCF as its paper describes it, §IV-A-3: "item embeddings and the prediction
  layer are shared"); the repository's trainer keeps the MLP on the client.
- ``trainer.py``: fine-tuning loads its pre-training file with ``weights_only=False`` (torch 2.6
  made ``True`` the default, which refuses the numpy scalars the file holds).
- ``run_experiment.py``/``run_grid_search.py``: one torch thread, and p2pnode's batched
  evaluation (``fast_eval.py``, our code: the same scores as ``fed_evaluate`` from the same
  parameters, no random draw; checked equal to six decimals on the logged figures).

The split: ratings sorted by user, time, then item id descending, so that the code's
``rank(method='first')`` picks the same test and validation items as p2pnode's leave-one-out
(ties in time broken by the larger item id last). Users' attributes: gender (F 0, M 1), age in
<25 / 25-44 / >=45 (p2pnode's inferred groups) and occupation by sorted name, as p2pnode codes them.
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

from p2pnode.data.datasets import ML100K, dataset_path

HERE = Path(__file__).resolve().parent


def write_data(checkout: Path) -> None:
    root = checkout.parent / "data" / "ml-100k"
    root.mkdir(parents=True, exist_ok=True)
    cache = dataset_path(None, ML100K)
    if not (cache / "ml-100k.inter").is_file():
        raise SystemExit(f"no ML-100k in {cache}: run p2pnode data get ml-100k")
    rows = []
    with open(cache / "ml-100k.inter") as f:
        r = csv.reader(f, delimiter="\t")
        next(r)
        for u, i, rating, t in r:
            rows.append((int(u), int(i), int(float(rating)), int(float(t))))
    rows.sort(key=lambda x: (x[0], x[3], -x[1]))
    with open(root / "ratings.dat", "w") as f:
        f.writelines(f"{u},{i},{rating},{t}\n" for u, i, rating, t in rows)
    users = []
    with open(cache / "ml-100k.user") as f:
        r = csv.reader(f, delimiter="\t")
        next(r)
        for u, a, g, o, _zip in r:
            users.append((int(u), int(a), g, o))
    users.sort()
    occupations = sorted({u[3] for u in users})
    with open(root / "users.dat", "w") as f:
        f.write("uid,age,gender,occupation\n")
        for u, a, g, o in users:
            group = 0 if a < 25 else (1 if a < 45 else 2)
            f.write(f"{u},{group},{1 if g == 'M' else 0},{occupations.index(o)}\n")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if new in text:
        return
    if old not in text:
        raise SystemExit(f"{path}: the line to change is not there (another version of the code?): {old!r}")
    path.write_text(text.replace(old, new))


def patch(checkout: Path) -> None:
    _replace(
        checkout / "data.py",
        "ratings['rating'][ratings['rating'] > 0] = 1.0",
        "ratings.loc[ratings['rating'] > 0, 'rating'] = 1.0  # PATCH: pandas 3 copy-on-write",
    )
    _replace(
        checkout / "data.py",
        "random.sample(x, self.NUM_NEG))\n",
        "random.sample(sorted(x), self.NUM_NEG))  # PATCH\n",
    )
    _replace(checkout / "data.py", "random.sample(x,\n", "random.sample(sorted(x),  # PATCH\n")
    _replace(
        checkout / "config.py",
        "    args = parser.parse_args()",
        "    parser.add_argument('--share_mlp', type=boolean_string, default=False)  # PATCH\n"
        "    args = parser.parse_args()",
    )
    keys = "        self.server_keys = ['embedding_item.weight'] # param saved in server\n"
    _replace(
        checkout / "trainer.py",
        keys
        + "        self.client_keys = ['embedding_puser.weight', 'embedding_euser.weight'] + self.mlp_keys"
        " + self.pestimator_keys + self.priemb_keys \n",
        keys
        + "        self.client_keys = ['embedding_puser.weight', 'embedding_euser.weight'] + self.mlp_keys"
        " + self.pestimator_keys + self.priemb_keys \n"
        "        if config.get('share_mlp'):  # PATCH: FedAvg FedNCF, the MLP shared\n"
        "            self.server_keys = ['embedding_item.weight'] + self.mlp_keys\n"
        "            self.client_keys = [k for k in self.client_keys if k not in self.mlp_keys]\n",
    )
    _replace(
        checkout / "trainer.py",
        "all_param = torch.load(path)\n",
        "all_param = torch.load(path, weights_only=False)  # PATCH: torch >= 2.6\n",
    )
    for script in ("run_experiment.py", "run_grid_search.py"):
        _replace(
            checkout / script, "from trainer import *\n", "from trainer import *\nimport fast_eval  # PATCH\n"
        )
        _replace(
            checkout / script,
            "import os\n",
            "import os\nimport torch as _t; _t.set_num_threads(1)  # PATCH\n",
        )
    shutil.copy(HERE / "fast_eval.py", checkout / "fast_eval.py")
    for d in ("log", "saved_model/ml-100k", "sh_result"):
        (checkout / d).mkdir(parents=True, exist_ok=True)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python experiments/pard_reference/prepare.py CHECKOUT")
    checkout = Path(sys.argv[1]).resolve()
    if not (checkout / "trainer.py").is_file():
        raise SystemExit(f"{checkout}: no trainer.py (a checkout of XuHao-bit/PARD?)")
    write_data(checkout)
    patch(checkout)
    print(f"ready: cd {checkout} && python run_experiment.py --dataset ml-100k --device_id cpu ...")


if __name__ == "__main__":
    main()
