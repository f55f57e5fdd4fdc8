"""Admission without sockets: each check of p2pnode/transport/admission.py in the order a
POST meets them, each refusal counted once against its addressee, a slot held until it is left."""

from __future__ import annotations

from typing import Any

from p2pnode.transport.admission import Admission
from p2pnode.transport.base import Memo, Outcome, Payload
from p2pnode.trust.auth import KeyHolder, Keyring, sign
from p2pnode.trust.limits import Limits
from p2pnode.wire.schema import Channel, SharedFrame

PATH = "/v1/nodes/4/gossip"
BODY = b"\x85frame-bytes"
NOW = 1_800_000_000.0
MAX_FRAME = 1000


class FakeHost:
    """The side of a host admission sees: whether it accepts, and the refusals it counts."""

    def __init__(self) -> None:
        self.max_frame_bytes = MAX_FRAME
        self.accepting = True
        self.metrics: Any = None
        self.refused: list[tuple[int, str]] = []

    @property
    def nodes(self) -> dict[int, Any]:
        return {}

    def receive(
        self,
        dest: int,
        channel: Channel,
        data: Payload | SharedFrame,
        sender: int | None = None,
        certified: set[int] | None = None,
        local: bool = False,
        memo: Memo | None = None,
    ) -> Outcome:
        return Outcome(200)

    def refuse(self, dest: int, reason: str) -> None:
        self.refused.append((dest, reason))


def keys() -> KeyHolder:
    return KeyHolder(Keyring("lab", {"k1": b"a" * 32}, "k1"), known_sender=lambda s: 0 <= s < 10)


def signed(sender: int = 3, body: bytes = BODY, at: float = NOW, path: str = PATH) -> dict[str, str]:
    return sign(Keyring("lab", {"k1": b"a" * 32}, "k1"), "POST", path, sender, body, int(at * 1000))


def test_a_good_post_passes_every_step_and_names_its_sender() -> None:
    host = FakeHost()
    adm = Admission(host, keys(), Limits())
    headers = signed()
    assert adm.authenticate_request(PATH, headers, 4, NOW) == (None, 3, None)
    assert adm.enter(4, "10.0.0.1", len(BODY)) is None
    assert adm.gate.inflight == 1
    assert adm.check_length(4, len(BODY)) is None
    assert adm.check_body(4, headers, BODY) is None
    adm.leave("10.0.0.1")
    assert adm.gate.inflight == 0 and host.refused == []


def test_step_1_headers_then_rate_each_refusal_counted_once() -> None:
    host = FakeHost()
    adm = Admission(host, keys(), Limits(rate_per_s=1.0, burst=2.0))
    assert adm.authenticate_request(PATH, {}, 4, NOW) == (Outcome(401, "no-auth"), None, None)
    theirs = sign(Keyring("lab", {"k1": b"b" * 32}, "k1"), "POST", PATH, 3, BODY, int(NOW * 1000))
    refused, _, _ = adm.authenticate_request(PATH, theirs, 4, NOW)
    assert refused is not None and refused.status == 401
    stranger = signed(sender=42)
    refused, _, _ = adm.authenticate_request(PATH, stranger, 4, NOW)
    assert refused is not None and refused.status == 403
    headers = signed()
    assert adm.authenticate_request(PATH, headers, 4, NOW) == (None, 3, None)
    assert adm.authenticate_request(PATH, headers, 4, NOW)[0] == Outcome(409, "replay")
    # the rate: a burst of 2 per (sender, node), then refused; another node has its own bucket
    assert adm.authenticate_request(PATH, signed(at=NOW + 0.001), 4, NOW + 0.001)[0] is None
    third = adm.authenticate_request(PATH, signed(at=NOW + 0.002), 4, NOW + 0.002)
    assert third == (Outcome(429, "rate-limited"), None, None)
    other = "/v1/nodes/5/gossip"
    assert adm.authenticate_request(other, signed(at=NOW + 0.003, path=other), 5, NOW + 0.003)[0] is None
    reasons = [r for _d, r in host.refused]
    assert reasons[:3] == ["no-auth", refused_reason(theirs), refused_reason(stranger)]
    assert reasons[3:] == ["replay", "rate-limited"] and all(d == 4 for d, _r in host.refused)


def refused_reason(headers: dict[str, str]) -> str:
    verdict = keys().verifier.check_headers("POST", PATH, headers, int(NOW * 1000))
    return verdict.reason


def test_step_1_a_batch_entrys_frame_must_match_its_digest_and_a_batch_is_not_rate_limited() -> None:
    host = FakeHost()
    adm = Admission(host, keys(), Limits(rate_per_s=1.0, burst=1.0))
    headers = signed()
    assert adm.authenticate(PATH, headers, 4, NOW, frame=b"other bytes") == (Outcome(401, "bad-digest"), None)
    assert host.refused == [(4, "bad-digest")]
    for k in range(3):  # dest -1: the batch itself; its entries are limited one by one
        assert adm.authenticate("/v1/batch", signed(at=NOW + k, path="/v1/batch"), -1, NOW + k)[0] is None


def test_an_open_cluster_authenticates_nobody_and_limits_no_sender() -> None:
    host = FakeHost()
    adm = Admission(host, None, Limits(rate_per_s=1.0, burst=1.0))
    for _ in range(5):
        assert adm.authenticate_request(PATH, {}, 4, NOW) == (None, None, None)
    assert adm.check_body(4, {}, BODY) is None and host.refused == []


def test_step_2_starting_then_the_address_then_the_loops_lag_then_the_process() -> None:
    host = FakeHost()
    adm = Admission(host, keys(), Limits(max_inflight=2, max_inflight_per_address=1, max_lag_s=0.1))
    host.accepting = False
    assert adm.enter(4, "a", 10) == Outcome(503, "starting")
    host.accepting = True
    assert adm.enter(4, "a", 10) is None
    assert adm.enter(4, "a", 10) == Outcome(503, "busy")  # the address's one slot is taken
    for _ in range(10):
        adm.shedder.record(1.0)
    assert adm.shedder.overloaded()
    assert adm.enter(4, "b", MAX_FRAME) == Outcome(503, "busy")  # a model-sized body is shed
    assert adm.shedder.shed == 1 and adm.guard.inflight("b") == 0  # the address slot given back
    assert adm.enter(4, "b", 10) is None  # a small frame is served in spite of the lag
    assert adm.enter(4, "c", 10) == Outcome(503, "busy")  # the process's 2 slots are taken
    adm.leave("a")
    adm.leave("b")
    assert adm.gate.inflight == 0
    assert [r for _d, r in host.refused] == ["starting", "busy", "busy", "busy"]


def test_step_2_a_member_holds_at_most_its_share_from_all_its_addresses() -> None:
    host = FakeHost()
    limits = Limits(max_inflight=10, max_inflight_per_address=3, max_inflight_per_member=4)
    adm = Admission(host, keys(), limits)
    # member "serial 7" spreads its slow uploads over three addresses: 4 slots, then busy
    entered = [adm.enter(4, addr, 10, "serial 7") for addr in ("a", "a", "b", "b", "c", "c")]
    assert entered == [None] * 4 + [Outcome(503, "busy")] * 2
    assert adm.guard.inflight("c") == 0 and adm.members.counts.get("serial 7") == 4
    assert adm.enter(4, "c", 10, "serial 8") is None  # another member, and the process, have room
    assert adm.enter(4, "d", 10) is None  # a request with no credential (an open cluster) is not capped
    adm.leave("a", "serial 7")
    assert adm.enter(4, "c", 10, "serial 7") is None  # a slot given back is taken again
    for addr in ("a", "b", "b", "c"):
        adm.leave(addr, "serial 7")
    adm.leave("c", "serial 8")
    adm.leave("d")
    assert adm.gate.inflight == 0 and "serial 7" not in adm.members.counts


def test_steps_3_and_4_length_then_the_body() -> None:
    host = FakeHost()
    adm = Admission(host, keys(), Limits())
    assert adm.check_length(4, MAX_FRAME + 1) == Outcome(413, "too-large")
    assert adm.check_length(4, None) is None  # not declared: the read is bounded instead
    assert adm.body_failed(4, "too-large") == Outcome(413, "too-large")
    assert adm.body_failed(4, "slow-body") == Outcome(408, "slow-body")
    assert adm.body_failed(4, "truncated") == Outcome(400, "truncated")
    assert adm.check_body(4, signed(), b"tampered") == Outcome(401, "bad-digest")
    reasons = [r for _d, r in host.refused]
    assert reasons == ["too-large", "too-large", "slow-body", "truncated", "bad-digest"]
