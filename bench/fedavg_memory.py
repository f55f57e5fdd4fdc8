"""Peak memory of a FedAvg run on POI-shaped data (the CIA paper's Table II setting), two revisions
side by side, each beside the memory check's estimate (p2pnode/runners/footprint.py).

Table II on a Foursquare-NYC-shaped file (1,083 clients, 38,333 venues, 4.9 MB models) is refused
on a 24 GiB machine: each client's model and Adam moments, the server's v_u of every client, and
the round's updates in flight. This bench measures what a smaller run of the same shape holds at
its largest: ``--clients`` users of a synthetic file with the full venue catalogue (``p2pnode data
synth``), the CIA at the server with every user's items as targets, as Table II runs. Each run is
its own child process (a fresh interpreter, so its peak RSS is its own) under an RSS cap
(bench/guard.py), and ``--base REV`` runs the same child in a worktree of REV first:

    .venv/bin/python -m bench.fedavg_memory [--shape gowalla-nyc] [--clients 150] [--rounds 3]
        [--model gmf|prme] [--base REV] [--cap-gib 12] [--fictive-user]
        [--mmap-threshold-mib 0,16] [--data FILE] [--spill-dir DIR]

``--mmap-threshold-mib`` runs the working tree once per glibc mmap threshold (0: glibc's own,
rising one, as in this bench's children before; p2pnode/runners/process.py set_mmap_threshold), so what
heap fragmentation adds to the peak, and what the fixed threshold costs in time, are read side by
side. The commands fix it at 32 MiB (``tune_allocator``); Table II GMF with e_A on the Gowalla
shape peaked at 13.8 GiB there too, as at glibc's own here (13.81).

``--spill-dir DIR`` runs the working tree (and ``--base``) once more with the round's updates kept
in files there (p2pnode/transport/spill.py): its resident set then holds file pages the kernel can
write out, so each run also reports its peak of resident memory less file pages ("anonymous",
sampled every 50 ms), which is what such a run needs of the machine.

It prints, per revision (or threshold), the peak RSS, the RSS once the clients are built (their
models and moments), what the rounds added above that per client (in units of one model), the
estimate, and the rounds' time with the part spent in the kernel (page faults of fresh mmaps).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: run in a fresh interpreter with ``root`` first on the path (the editable install's finder is
#: taken out, as in bench/revisions.py), under an RSS cap
PROBE = """
import json, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", ""))]
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from bench.guard import cap_rss, peak_rss_gib, rss_gib
cap_rss({cap}, anonymous={spill!r} != "")
try:
    from bench.guard import track_peak_anonymous
    anonymous = track_peak_anonymous()
except ImportError:  # a base revision from before it
    anonymous = [float("nan")]
import resource, time
if {threshold} > 0:
    from p2pnode.runners.process import set_mmap_threshold
    assert set_mmap_threshold({threshold})
from p2pnode.config import RunConfig
from p2pnode.runners.footprint import footprint_of, run_bytes
from p2pnode.runners.sim import Simulation
import p2pnode
assert p2pnode.__file__.startswith({root!r}), p2pnode.__file__
config = RunConfig(nodes={clients}, rounds={rounds}, protocol="fedavg", dataset={data!r}, seed=0,
    model={model!r}).replace(
    **{{"learning.lr": 0.01, "learning.prme_lr": 0.2, "attack.kind": "cia", "attack.target_k": 10,
       "attack.fictive_user": {fictive}}})
if {spill!r}:
    config = config.replace(**{{"sim.spill_dir": {spill!r}}})
from p2pnode.attacks.attack import lab_for
sim = Simulation(config)
lab = lab_for(sim.prep)
built = rss_gib()
t0 = time.perf_counter()
for r in range(1, {rounds} + 1):
    sim.run_round()
    lab.evaluate(r, sim.host.nodes.values())  # as an experiment does after every round
est = run_bytes(config, footprint_of(config, sim.prep)) / 2**30
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"built": built, "peak": peak_rss_gib(), "estimate": est, "model": sim.prep.model_bytes,
    "seconds": time.perf_counter() - t0, "system": ru.ru_stime, "anonymous": anonymous[0]}}))
"""


def measure(
    root: Path, args: argparse.Namespace, data: Path, threshold: float = 0.0, spill: str = ""
) -> dict[str, float]:
    """One child's figures; ``threshold``: its glibc mmap threshold in MiB (0: glibc's dynamic);
    ``spill``: the folder its frames wait in (p2pnode/transport/spill.py; "": in memory)."""
    code = PROBE.format(
        threshold=threshold,
        spill=spill,
        fictive=bool(args.fictive_user),
        root=str(root),
        cap=args.cap_gib,
        clients=args.clients,
        rounds=args.rounds,
        data=str(data),
        model=args.model,
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        raise SystemExit(f"{root}: {lines[-1] if lines else f'exit {out.returncode}'}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def line(name: str, r: dict[str, float], clients: int) -> str:
    per_client = (r["peak"] - r["built"]) * 2**30 / clients / r["model"]
    return (
        f"{name:>14}: peak {r['peak']:.2f} GiB, built {r['built']:.2f} GiB, the rounds added "
        f"{per_client:.2f} models a client; anonymous peak {r['anonymous']:.2f} GiB; estimate "
        f"{r['estimate']:.2f} GiB; rounds "
        f"{r['seconds']:.1f} s ({r['system']:.1f} s in the kernel)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gowalla-nyc", choices=("gowalla-nyc", "foursquare-nyc"))
    ap.add_argument("--model", default="gmf", choices=("gmf", "prme"))
    ap.add_argument("--clients", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", default=None, help="a revision to measure first, in a worktree")
    ap.add_argument("--cap-gib", type=float, default=12.0, help="end a child past this resident memory")
    ap.add_argument("--fictive-user", action="store_true", help="the server scores with e_A (finding 2)")
    ap.add_argument(
        "--mmap-threshold-mib",
        default="",
        help="also run the working tree with these glibc mmap thresholds, e.g. 0,16 (0: glibc's "
        "dynamic threshold, the default), one child each, side by side (process.set_mmap_threshold)",
    )
    ap.add_argument("--data", type=Path, default=None, help="this file instead of a synthetic one")
    ap.add_argument(
        "--spill-dir",
        default="",
        help="also run the working tree (at the last threshold) with its frames on their way kept "
        "in this folder (p2pnode/transport/spill.py); its cap is on memory less file pages",
    )
    args = ap.parse_args()
    thresholds = [float(t) for t in args.mmap_threshold_mib.split(",") if t.strip()] or [0.0]
    venues = {"gowalla-nyc": 32_924, "foursquare-nyc": 38_333}[args.shape]
    with tempfile.TemporaryDirectory(prefix="p2pnode-fedmem-") as tmp:
        data = args.data or Path(tmp) / f"{args.shape}-{args.clients}.txt"
        if args.data is None:
            synth = [sys.executable, "-m", "p2pnode", "data", "synth", args.shape, str(data)]
            synth += ["--users", str(args.clients), "--venues", str(venues)]
            subprocess.run(synth, cwd=ROOT, check=True, capture_output=True)
        runs: list[tuple[str, dict[str, float]]] = []
        if args.base:
            tree = Path(tmp) / "tree"
            git = ["git", "worktree", "add", "--detach", str(tree), args.base]
            subprocess.run(git, cwd=ROOT, check=True, capture_output=True)
            try:
                runs.append((f"base {args.base}", measure(tree, args, data)))
                if args.spill_dir:  # the same revision with its frames kept in files, to set beside
                    spilled = measure(tree, args, data, thresholds[-1], args.spill_dir)
                    runs.append((f"base {args.base}, spilled", spilled))
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        for threshold in thresholds:
            name = "here" if threshold == 0 else f"here, mmap {threshold:g} MiB"
            runs.append((name, measure(ROOT, args, data, threshold)))
        if args.spill_dir:
            runs.append(("here, spilled", measure(ROOT, args, data, thresholds[-1], args.spill_dir)))
    source = data.name if args.data else f"a {args.shape}-shaped file"
    said = f"{args.model}, {args.clients} clients of {source}"
    said += f", {args.rounds} rounds{', scored with e_A' if args.fictive_user else ''}"
    print(f"FedAvg, CIA at the server, {said}")
    for name, r in runs:
        print(line(name, r, args.clients))
    (first, b), rest = runs[0], runs[1:]
    pairs = [(name, h, first, b) for name, h in rest]
    named = dict(runs)
    if args.base and args.spill_dir:  # the spill of each revision side by side
        base_spilled = f"base {args.base}, spilled"
        pairs.append(("here, spilled", named["here, spilled"], base_spilled, named[base_spilled]))
    for name, h, ref, b in pairs:
        print(
            f"{name} / {ref}: peak {h['peak'] / b['peak']:.3f}, anonymous peak "
            f"{h['anonymous'] / b['anonymous']:.3f}, added above the build "
            f"{(h['peak'] - h['built']) / (b['peak'] - b['built']):.3f}, "
            f"time {h['seconds'] / b['seconds']:.2f}x"
        )


if __name__ == "__main__":
    main()
