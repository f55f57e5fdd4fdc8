"""A mutation fuzz run of the wire decoder: valid frames, damaged at random, must only be refused.

Starts from valid frames of every kind a node decodes (a full GMF model, a delta against an
acknowledged base, peer-sampling messages), applies random damage (bit flips, byte changes,
deletions, insertions, truncation, splicing two frames, duplicated runs) and decodes each result
exactly as a node does. Every outcome must be a decoded message with finite values of the local
shapes, or a ``WireError`` with a known reason and a 4xx status; any other exception is a bug
and stops the run with the input that caused it.

    .venv/bin/python -m bench.wire_fuzz [--iterations 200000] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from learning import gmf
from learning.params import spec_of
from p2pnode.wire.codec import (
    decode_frame,
    decode_model,
    decode_sampling,
    encode_model_frame,
    encode_sampling_frame,
)
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder
from p2pnode.wire.schema import DECODE_REASONS, MsgType, WireError
from peer_sampling.messages import LockRequest, ShuffleRequest, SwapAccept
from protocols.messages import ModelMessage

LIMIT = 1 << 22


def seeds() -> tuple[list[bytes], Callable[[bytes], object]]:
    """Valid frames and a decode function with a fresh decoder holding the delta's base."""
    base = gmf.init_params(60, 8, 0)
    spec = spec_of(base)
    enc = DeltaEncoder()
    full = enc.encode(7, 1, base)
    frames = [encode_model_frame(3, 7, full)]
    enc.acknowledged(7, 1, full.view)
    changed = {k: v.copy() for k, v in base.items()}
    changed["item"][:3] += 0.5
    delta = enc.encode(7, 2, changed)
    frames.append(encode_model_frame(3, 7, delta))
    frames.append(encode_sampling_frame(3, 7, LockRequest((3, 1))))
    frames.append(encode_sampling_frame(3, 7, SwapAccept((3, 1), (1, 2, 4), (5, 6, 8))))
    frames.append(encode_sampling_frame(3, 7, ShuffleRequest(((3, "3@h:1", 0), (9, "9@h:2", 4)))))

    def decode(data: bytes) -> object:
        decoder = DeltaDecoder()
        decoder.decode(3, _body_of(frames[0]), spec)  # the receiver holds version 1 as a base
        frame = decode_frame(data, LIMIT)
        if frame.type in (MsgType.MODEL,):
            return decode_model(frame, spec, decoder)
        return decode_sampling(frame)

    return frames, decode


def _body_of(data: bytes) -> object:
    return decode_frame(data, LIMIT).body


def mutate(rng: random.Random, frames: list[bytes]) -> bytes:
    data = bytearray(rng.choice(frames))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if not data:
            break
        i = rng.randrange(len(data))
        if op == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[i] = rng.randrange(256)
        elif op == 2:
            del data[i : i + rng.randint(1, 8)]
        elif op == 3:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 4:
            del data[i:]
        elif op == 5:
            other = rng.choice(frames)
            j = rng.randrange(len(other))
            data[i:] = other[j:]
        else:
            j = rng.randrange(len(data))
            data[i:i] = data[j : j + rng.randint(1, 32)]
    return bytes(data)


KNOWN = DECODE_REASONS


def run(iterations: int, seed: int) -> Counter[str]:
    """Outcomes by reason ("ok" for a clean decode); raises on any outcome that is not clean."""
    rng = random.Random(seed)
    frames, decode = seeds()
    outcomes: Counter[str] = Counter()
    for _ in range(iterations):
        data = mutate(rng, frames)
        try:
            msg = decode(data)
        except WireError as err:
            if err.reason not in KNOWN or not 400 <= err.status < 500:
                raise AssertionError(f"unexpected refusal {err.reason}/{err.status} for {data!r}") from None
            outcomes[err.reason] += 1
            continue
        except Exception as exc:  # the point of the run: nothing else may escape
            raise AssertionError(f"{type(exc).__name__}: {exc} for input {data!r}") from exc
        if isinstance(msg, ModelMessage):
            for k, v in msg.params.items():
                if not np.all(np.isfinite(v)):
                    raise AssertionError(f"non-finite {k} accepted from {data!r}")
        outcomes["ok"] += 1
    return outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    outcomes = run(args.iterations, args.seed)
    secs = time.perf_counter() - t0
    print(
        f"{args.iterations} mutated frames in {secs:.0f} s ({args.iterations / secs:.0f}/s), "
        "no unexpected outcome"
    )
    for reason, n in outcomes.most_common():
        print(f"  {reason:14s} {n}")


if __name__ == "__main__":
    main()
