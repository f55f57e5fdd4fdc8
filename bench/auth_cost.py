"""What judging one request's headers costs a receiver, per kind of authentication, side by side.

The header checks of ``p2pnode.trust.auth.Verifier`` alone (no HTTP, no body): the cluster MAC, the MAC
and a process identity (one Ed25519 verification of the request signature; the credential is
verified once and cached), and a batch entry vouched for by its batch (the batch's
signed digest covers its entries, so an entry carrying the batch's credential is not verified
again). Each kind runs on fresh nonces, interleaved in rounds so that a noisy machine slows all
alike.

    .venv/bin/python -m bench.auth_cost [--requests 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from p2pnode.trust.auth import Keyring, Verifier, sign
from p2pnode.trust.identity import Authority

PATH = "/v1/nodes/4/sampling"
NOW = 1_800_000_000_000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    authority = Authority.generate("lab")
    identity = authority.issue([(0, 19)])
    hmac_ring = Keyring("lab", {"k1": b"a" * 32}, "k1")
    id_ring = hmac_ring.trust(authority.public_key)
    vouched = identity.credential.encode()
    kinds = {
        "hmac": (hmac_ring, None, None),
        "identity": (id_ring, identity, None),
        "identity, vouched by its batch": (id_ring, identity, vouched),
    }
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for name, (ring, ident, vouch) in kinds.items():
            verifier = Verifier(ring, known_sender=lambda s: True)
            headers = [sign(ring, "POST", PATH, 7, b"x", NOW, identity=ident) for _ in range(args.requests)]
            t0 = time.perf_counter()
            for h in headers:
                if not verifier.check_headers("POST", PATH, h, NOW, vouch).ok:
                    raise SystemExit(f"{name}: a genuine request was refused")
            times[name].append((time.perf_counter() - t0) / args.requests)
    base = statistics.median(times["hmac"])
    print(f"{args.requests} requests x {args.rounds} rounds, median per request:")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:<32} {med * 1e6:7.1f} µs   {med / base:5.1f}x the MAC alone")


if __name__ == "__main__":
    main()
