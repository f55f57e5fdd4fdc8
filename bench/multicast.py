"""A colluder's multicast (000 Algorithm 2, line 14): frames for every partner, packed per partner
or packed once, side by side.

One observation of a GMF user (ML-100k, 32 factors), kept at the rows of a target of ``--items``
items, goes to ``--partners`` colluding partners (a 20% group of 943 nodes has 188). The per-
partner path is what a node did before: encode the whole frame for each partner. The packed-once
path is what it does now: pack the body once and wrap it in each partner's envelope. Both give
byte-identical frames (checked here). Best of ``--blocks`` interleaved blocks per side.

    .venv/bin/python -m bench.multicast [--partners 188] [--items 100] [--blocks 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from adversary.messages import CollusionMessage
from learning import gmf
from p2pnode.wire.codec import encode_collusion_frame, frame_with_body, pack_collusion_body
from p2pnode.wire.schema import MsgType


def observation(items: int, factors: int = 32, seed: int = 0) -> CollusionMessage:
    rng = np.random.default_rng(seed)
    kept = {
        gmf.ITEM: rng.normal(size=(items, factors)).astype(np.float32),
        gmf.USER: rng.normal(size=(1, factors)).astype(np.float32),
        gmf.H: rng.normal(size=(factors,)).astype(np.float32),
        gmf.B: rng.normal(size=(1,)).astype(np.float32),
    }
    return CollusionMessage(17, kept)


def per_partner(message: CollusionMessage, partners: list[int]) -> list[bytes]:
    return [encode_collusion_frame(3, p, message) for p in partners]


def packed_once(message: CollusionMessage, partners: list[int]) -> list[bytes]:
    body = pack_collusion_body(message)
    return [frame_with_body(MsgType.COLLUDE, 3, p, body) for p in partners]


def best_block(fn: Callable[[], object], seconds: float) -> float:
    """Seconds per call, over one block of at least ``seconds``."""
    k, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        k += 1
    return (time.perf_counter() - t0) / k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partners", type=int, default=188)
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.5)
    args = ap.parse_args()
    message = observation(args.items)
    partners = list(range(100, 100 + args.partners))
    assert per_partner(message, partners) == packed_once(message, partners), "frames differ"
    old: list[float] = []
    new: list[float] = []
    for _ in range(args.blocks):
        old.append(best_block(lambda: per_partner(message, partners), args.seconds))
        new.append(best_block(lambda: packed_once(message, partners), args.seconds))
    nbytes = len(packed_once(message, partners)[0])
    print(f"one multicast to {args.partners} partners, {nbytes} B per frame, best of {args.blocks} blocks:")
    print(f"  packed per partner: {min(old) * 1e3:8.2f} ms")
    print(f"  packed once:        {min(new) * 1e3:8.2f} ms")
    print(f"  packed once / per partner: {min(new) / min(old):.2f}")


if __name__ == "__main__":
    main()
