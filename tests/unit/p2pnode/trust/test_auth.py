"""Request authentication: HMAC over the request, keyring rotation, cluster label, replays."""

from __future__ import annotations

from pathlib import Path

import pytest

from p2pnode.config import ConfigError
from p2pnode.trust.auth import (
    H_CLUSTER,
    H_DIGEST,
    H_KEY,
    H_MAC,
    H_NONCE,
    H_SENDER,
    H_TIME,
    KeyHolder,
    Keyring,
    Verifier,
    body_digest,
    body_matches,
    keyring_from_env,
    load_keyring,
    save_keyring,
    sign,
)

PATH = "/v1/nodes/4/gossip"
BODY = b"\x85frame-bytes"
NOW = 1_800_000_000_000


def ring(cluster: str = "lab") -> Keyring:
    return Keyring(cluster, {"k1": b"a" * 32}, "k1")


def verifier(keyring: Keyring | None = None, **kw: int) -> Verifier:
    return Verifier(keyring or ring(), known_sender=lambda s: 0 <= s < 10, **kw)


def test_a_signed_request_is_accepted_and_names_its_sender() -> None:
    headers = sign(ring(), "POST", PATH, 3, BODY, NOW)
    verdict = verifier().check("POST", PATH, headers, BODY, NOW + 50)
    assert verdict.ok and verdict.sender == 3


@pytest.mark.parametrize(
    ("tamper", "status", "reason"),
    [
        (lambda h: h.pop(H_MAC), 401, "no-auth"),
        (lambda h: h.update({H_MAC: "0" * 64}), 401, "bad-mac"),
        (lambda h: h.update({H_KEY: "k9"}), 401, "unknown-key"),
        (lambda h: h.update({H_SENDER: "5"}), 401, "bad-mac"),  # the sender is signed
        (lambda h: h.update({H_TIME: str(NOW + 1)}), 401, "bad-mac"),
        (lambda h: h.update({H_NONCE: "zz"}), 401, "bad-auth"),
        (lambda h: h.update({H_SENDER: "x"}), 401, "bad-auth"),
        (lambda h: h.update({H_CLUSTER: "other"}), 403, "wrong-cluster"),
    ],
)
def test_tampered_headers_are_refused(tamper, status: int, reason: str) -> None:  # type: ignore[no-untyped-def]
    headers = sign(ring(), "POST", PATH, 3, BODY, NOW)
    tamper(headers)
    verdict = verifier().check("POST", PATH, headers, BODY, NOW)
    assert (verdict.status, verdict.reason) == (status, reason)


def test_body_digest_path_and_method_are_bound_into_the_mac() -> None:
    headers = sign(ring(), "POST", PATH, 3, BODY, NOW)
    v = verifier()
    assert v.check("POST", "/v1/nodes/5/gossip", headers, BODY, NOW).reason == "bad-mac"
    assert v.check("PUT", PATH, headers, BODY, NOW).reason == "bad-mac"
    forged = dict(headers, **{H_DIGEST: body_digest(BODY + b"x")})  # a digest for another body
    assert v.check("POST", PATH, forged, BODY + b"x", NOW).reason == "bad-mac"
    forged[H_DIGEST] = "not hex"
    assert v.check("POST", PATH, forged, BODY, NOW).reason == "bad-auth"
    assert v.remembered == 0  # nothing unauthenticated reaches the nonce cache


def test_headers_are_judged_before_the_body_and_the_body_must_match_them() -> None:
    headers = sign(ring(), "POST", PATH, 3, BODY, NOW)
    v = verifier()
    verdict = v.check_headers("POST", PATH, headers, NOW)  # what the server does before reading
    assert verdict.ok and verdict.sender == 3
    assert body_matches(headers, BODY) and not body_matches(headers, BODY + b"x")
    swapped = sign(ring(), "POST", PATH, 3, BODY, NOW + 1)
    verdict = v.check("POST", PATH, swapped, b"another body", NOW)
    assert (verdict.status, verdict.reason) == (401, "bad-digest")
    assert verifier().check_headers("POST", PATH, {}, NOW).reason == "no-auth"


def test_another_clusters_key_and_label_are_refused() -> None:
    theirs = Keyring("lab-b", {"k1": b"b" * 32}, "k1")
    headers = sign(theirs, "POST", PATH, 3, BODY, NOW)
    assert verifier().check("POST", PATH, headers, BODY, NOW).status == 403
    headers[H_CLUSTER] = "lab"  # claims our label but cannot sign for it
    assert verifier().check("POST", PATH, headers, BODY, NOW).status == 401


def test_unknown_senders_are_refused_after_the_mac() -> None:
    headers = sign(ring(), "POST", PATH, 42, BODY, NOW)
    verdict = verifier().check("POST", PATH, headers, BODY, NOW)
    assert (verdict.status, verdict.reason) == (403, "unknown-sender")


def test_replays_and_stale_requests_are_refused() -> None:
    v = verifier(window_ms=1000)
    headers = sign(ring(), "POST", PATH, 3, BODY, NOW)
    assert v.check("POST", PATH, headers, BODY, NOW).ok
    again = v.check("POST", PATH, headers, BODY, NOW + 10)
    assert (again.status, again.reason) == (409, "replay")
    assert v.check("POST", PATH, headers, BODY, NOW + 5000).reason == "stale"  # after the window
    future = sign(ring(), "POST", PATH, 3, BODY, NOW + 60_000)
    assert v.check("POST", PATH, future, BODY, NOW).reason == "stale"


def test_a_full_nonce_cache_never_lets_a_replay_through() -> None:
    v = verifier(window_ms=10_000, max_nonces=3)
    sent = [sign(ring(), "POST", PATH, 3, BODY, NOW + i) for i in range(5)]
    for h in sent:
        assert v.check("POST", PATH, h, BODY, NOW + 10).ok
    assert v.remembered == 3
    for h in sent:  # evicted or remembered: every replay is refused
        assert v.check("POST", PATH, h, BODY, NOW + 20).status == 409


def test_expired_nonces_are_forgotten() -> None:
    v = verifier(window_ms=1000)
    for i in range(5):
        assert v.check("POST", PATH, sign(ring(), "POST", PATH, 3, BODY, NOW + i), BODY, NOW + i).ok
    v.check("POST", PATH, sign(ring(), "POST", PATH, 3, BODY, NOW + 5000), BODY, NOW + 5000)
    assert v.remembered == 1


def test_rotation_install_use_remove_loses_no_message() -> None:
    """Two nodes rotate one step at a time, in either order; every message between is accepted."""
    a = b = Keyring("lab", {"old": b"o" * 32}, "old")
    new = b"n" * 32
    steps = [
        lambda r: r.install("new", new),
        lambda r: r.use("new"),
        lambda r: r.remove("old"),
    ]
    for step in steps:
        for who in ("a", "b"):  # a changes first, then b: the mixed state must work both ways
            if who == "a":
                a = step(a)
            else:
                b = step(b)
            for src, dst in ((a, b), (b, a)):
                headers = sign(src, "POST", PATH, 3, BODY, NOW)
                assert verifier(dst).check("POST", PATH, headers, BODY, NOW).ok, (who, src.keys.keys())
    assert list(a.keys) == ["new"] and a.primary == "new"
    retired = Keyring("lab", {"old": b"o" * 32}, "old")
    late = sign(retired, "POST", PATH, 3, BODY, NOW)
    assert verifier(a).check("POST", PATH, late, BODY, NOW).reason == "unknown-key"
    with pytest.raises(ConfigError, match="signs"):
        a.remove("new")
    with pytest.raises(ConfigError, match="already"):
        a.install("new")
    with pytest.raises(ConfigError, match="not installed"):
        a.use("nope")


def test_weak_or_malformed_keyrings_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least 16"):
        Keyring("lab", {"k1": b"short"}, "k1")
    with pytest.raises(ConfigError, match="primary"):
        Keyring("lab", {"k1": b"a" * 32}, "k2")
    with pytest.raises(ConfigError, match="cluster label"):
        Keyring("two words", {"k1": b"a" * 32}, "k1")


def test_key_file_round_trip_permissions_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "cluster.key"
    original = Keyring.generate("lab").install("k2")
    save_keyring(path, original)
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_keyring(path) == original
    path.write_text("cluster = 'lab'\n")
    with pytest.raises(ConfigError, match="malformed"):
        load_keyring(path)
    with pytest.raises(ConfigError, match="p2pnode keys new"):
        load_keyring(tmp_path / "missing.key")


def test_key_holder_reloads_a_changed_file_and_keeps_keys_on_a_broken_one(tmp_path: Path) -> None:
    path = tmp_path / "cluster.key"
    save_keyring(path, Keyring("lab", {"k1": b"a" * 32}, "k1"))
    errors: list[str] = []
    holder = KeyHolder.from_file(path, on_error=errors.append)
    save_keyring(path, holder.keyring.install("k2", b"b" * 32).use("k2"))
    assert holder.reload() and holder.keyring.primary == "k2" and holder.verifier.keyring.primary == "k2"
    assert not holder.reload()  # unchanged
    path.write_text("garbage = [")
    assert not holder.reload() and holder.keyring.primary == "k2"
    assert errors and "keeping the previous keys" in errors[0]


def test_keyring_from_the_environment() -> None:
    assert keyring_from_env({}) is None
    r = keyring_from_env({"P2PNODE_CLUSTER_KEY": "ab" * 16, "P2PNODE_CLUSTER": "lab"})
    assert r is not None and r.cluster == "lab" and r.keys["env"] == bytes.fromhex("ab" * 16)
    with pytest.raises(ConfigError, match="hex"):
        keyring_from_env({"P2PNODE_CLUSTER_KEY": "nothex"})


@pytest.mark.slow
def test_keys_command_rotates_a_key_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "c.key"

    def keys(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "p2pnode", "keys", *argv], capture_output=True, text=True, timeout=60
        )

    assert keys("new", str(path), "--cluster", "lab").returncode == 0
    assert keys("install", str(path), "k2").returncode == 0
    assert keys("use", str(path), "k2").returncode == 0
    refused = keys("remove", str(path), "k2")
    assert (
        refused.returncode == 2 and refused.stderr.startswith("p2pnode: error:") and "signs" in refused.stderr
    )
    assert keys("remove", str(path), "k1").returncode == 0
    shown = keys("show", str(path))
    assert "cluster 'lab', keys k2 (signs)" in shown.stdout
    assert load_keyring(path).keys["k2"].hex() not in shown.stdout
    assert keys("new", str(path)).returncode == 2  # never overwrites a keyring


def test_requests_signed_before_the_start_or_far_ahead_are_stale() -> None:
    """A frame captured before a restart is not accepted again after it (the nonce cache starts
    empty), and future-dated nonces cannot hold the cache's floor ahead for long."""
    v = Verifier(ring(), known_sender=lambda s: 0 <= s < 10, not_before_ms=NOW)
    captured = sign(ring(), "POST", PATH, 3, BODY, NOW - 1000)  # within the window, before the start
    assert v.check("POST", PATH, captured, BODY, NOW + 10).reason == "stale"
    assert v.check("POST", PATH, sign(ring(), "POST", PATH, 3, BODY, NOW + 4000), BODY, NOW).ok
    ahead = sign(ring(), "POST", PATH, 3, BODY, NOW + 6000)
    assert v.check("POST", PATH, ahead, BODY, NOW).reason == "stale"


def test_version_pins_refuse_older_models_and_expire_after_ten_rounds() -> None:
    from p2pnode.clock import VirtualClock
    from p2pnode.nodes.node import PIN_TTL_TICKS, VersionPins

    clock = VirtualClock()
    pins = VersionPins(clock)
    pins.take(3, 2**64 - 1)  # a member pins sender 3 at the largest version
    pins.take(3, 5)
    assert pins.get(3) == 2**64 - 1 and list(pins) == [3] and len(pins) == 1
    clock.run_until(PIN_TTL_TICKS + 1)  # ten rounds with no model taken from 3
    assert pins.get(3) is None and len(pins) == 0  # 3 is heard again, not muted for good
    pins.take(3, 5)
    assert pins[3] == 5
    pins.load([(4, 9)])
    assert dict(pins) == {4: 9}
