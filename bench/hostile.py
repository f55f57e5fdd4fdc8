"""Every attack of THREAT_MODEL.md against a live cluster: what it gets, and the state afterwards.

Two keyed ``p2pnode run`` processes on loopback (A hosts nodes 0-3, B nodes 4-15, PeerSwap views,
GMF on ML-100k). A stranger (no key, from 127.0.0.2) and a member (holding the cluster key, so
able to sign as any node id) attack A's node 0; for each attack the script prints the answer A
gave and what was true afterwards, read from A's own ``/status`` and ``/metrics``:

    .venv/bin/python -m bench.hostile [--seconds 6]

The stranger's floods are measured as in ``bench/hostile_outsiders.py`` (honest models taken by
A per second, under attack against quiet). THREAT_MODEL.md has the attacks and what must hold.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from bench.hostile_outsiders import Cluster, cluster, counter, get, measure
from p2pnode.config import RunConfig
from p2pnode.nodes.prepare import prepare
from p2pnode.trust.auth import load_keyring, sign
from p2pnode.wire.codec import encode_model_frame, encode_sampling_frame
from p2pnode.wire.delta import DeltaEncoder
from peer_sampling.messages import ShuffleRequest, SwapAdopt

VICTIM = 0


def post(c: Cluster, key: Path, sender: int, channel: str, body: bytes, ts_ms: int | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:  # fmt: skip
    """POST a frame to node 0 of A, signed as ``sender`` with the cluster key; (status, reason, headers)."""
    path = f"/v1/nodes/{VICTIM}/{channel}"
    signed = headers or sign(load_keyring(key), "POST", path, sender, body, ts_ms or int(time.time() * 1000))
    request = urllib.request.Request(f"http://{c.a}{path}", data=body, headers=signed, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers.get("X-P2P-Reason", "") or "ok", signed
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("X-P2P-Reason", ""), signed


def rate(quiet: float, attacked: float) -> str:
    return f"honest models taken {attacked:.1f}/s against {quiet:.1f}/s quiet ({attacked / quiet:.2f})"


def victim(c: Cluster) -> dict[str, Any]:
    status = json.loads(get(c.a, "/status"))
    return next(n for n in status["nodes"] if n["node"] == VICTIM)


def model_frame(shapes: dict[str, np.ndarray], sender: int, version: int, value: float | None) -> bytes:
    params = {k: np.full_like(v, value) if value is not None else v.copy() for k, v in shapes.items()}
    return bytes(encode_model_frame(sender, VICTIM, DeltaEncoder(False).encode(VICTIM, version, params)))


def rows(c: Cluster, key: Path, seconds: float) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    quiet, attacked = measure(c, {"slow-body": 64, "slowloris": 200}, seconds)
    refused = counter(c.a, "p2pnode_refused_connections_total")
    out.append(
        (
            "stranger: 64 slow bodies + 200 slowloris, one address",
            f"401 from the headers; {refused:.0f} connections closed at accept",
            rate(quiet, attacked),
        )
    )
    quiet, attacked = measure(c, {"get-flood": 64}, seconds)
    out.append(
        (
            "stranger: 64 clients looping GET /metrics",
            "a 0.5 s page cache, 4 GETs at a time",
            rate(quiet, attacked),
        )
    )
    shapes = prepare(RunConfig(nodes=16)).init
    life = int(time.time()) << 32  # a plausible incarnation for a sender started now

    before = victim(c)
    status, reason, _ = post(c, key, 5, "gossip", model_frame(shapes, 5, life + 1, 1e6))
    after = victim(c)
    out.append(("member: one model of 1e6 values", f"{status} {reason}",
                f"node 0's model version {before['model_version']} -> {after['model_version']}, "
                f"A's HR@20 {json.loads(get(c.a, '/status'))['hit_ratio']:.3f}"))  # fmt: skip

    status, reason, _ = post(c, key, 6, "gossip", model_frame(shapes, 6, 2**64 - 1, None))
    s2, r2, _ = post(c, key, 6, "gossip", model_frame(shapes, 6, life + 7, None))
    out.append(("member: a model of version 2^64-1 as node 6", f"{status} {reason}",
                f"node 6's next model (version {life + 7}): {s2} {r2 or 'ok'}"))  # fmt: skip

    view = victim(c)["view"]
    adopt = SwapAdopt((9, 1), (9,) * 3, (9,) * 3)
    status, reason, _ = post(c, key, 9, "sampling", encode_sampling_frame(9, VICTIM, adopt))
    time.sleep(0.6)  # past the /status cache
    after = victim(c)["view"]
    taken = after.count(9) > 1 or len(set(after)) != len(after)
    out.append(
        (
            "member: an unsolicited PeerSwap SwapAdopt (views of one id)",
            f"{status} {reason} (ignored: no transaction of node 0)",
            f"node 0's view {view} -> {after}: {'ADOPTED' if taken else 'not adopted'} "
            "(PeerSwap's own swaps go on)",
        )
    )

    entries = ShuffleRequest(((9, "9@127.0.0.9:1", 0), (4096, "4096@127.0.0.9:1", 0)))
    status, reason, _ = post(c, key, 9, "sampling", encode_sampling_frame(9, VICTIM, entries))
    out.append(
        ("member: Cyclon entries with an id beyond the network", f"{status} {reason}", "nothing taken")
    )

    frame = model_frame(shapes, 7, life + 3, None)
    first = post(c, key, 7, "gossip", frame)
    again = post(c, key, 7, "gossip", frame, headers=first[2])
    out.append(("member or eavesdropper: a captured request posted again", f"{again[0]} {again[1]}",
                f"the original was {first[0]} {first[1]}"))  # fmt: skip
    status, reason, _ = post(c, key, 8, "gossip", model_frame(shapes, 8, life + 3, None),
                             ts_ms=int(time.time() * 1000) + 60_000)  # fmt: skip
    out.append(("member: a request dated 60 s ahead", f"{status} {reason}", "timestamps may run 5 s ahead"))
    rejected = json.loads(get(c.a, "/status"))
    reasons = next(n for n in rejected["nodes"] if n["node"] == VICTIM)["rejected"]
    out.append(("(node 0's refusals, by reason)", "", json.dumps(reasons, sort_keys=True)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="each measured window of the floods")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, cluster(Path(tmp), sampling="peerswap") as c:
        table = rows(c, Path(tmp) / "k", args.seconds)
    width = max(len(a) for a, _, _ in table)
    print(f"{'attack':<{width}}  {'response':<44}  state afterwards")
    for attack, response, state in table:
        print(f"{attack:<{width}}  {response:<44}  {state}")


if __name__ == "__main__":
    main()
