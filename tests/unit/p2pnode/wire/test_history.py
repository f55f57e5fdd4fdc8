"""Bases of earlier model versions kept by rows (learning/history.py) and the deltas made on them."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest

from learning.history import BaseGone, ParamHistory
from learning.snapshots import mean_pair_rows
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder
from p2pnode.wire.tensors import unpack_tensor


def wire(body: dict[str, Any]) -> Any:
    """A body as a receiver decodes it: packed and unpacked."""
    return msgpack.unpackb(msgpack.packb(body, use_bin_type=True), raw=False)


def model(seed: int, rows: int = 200, cols: int = 8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "item": rng.standard_normal((rows, cols)).astype(np.float32),
        "user": rng.standard_normal((1, cols)).astype(np.float32),
        "h": rng.standard_normal(cols).astype(np.float32),
    }


def test_a_base_reads_back_its_version_and_holds_only_changed_rows() -> None:
    params = model(0)
    history = ParamHistory(params)
    before = {k: v.copy() for k, v in params.items()}
    base = history.open(7, tuple(params))
    history.touch_rows("item", np.array([3, 9]))
    params["item"][[3, 9]] += 1
    history.touch_all("h")
    params["h"] *= 2
    new_user = params["user"] + 1
    history.write("user", new_user)
    for k in params:
        np.testing.assert_array_equal(base[k], before[k])
    assert base.changed_rows("item", params["item"]).tolist() == [3, 9]
    assert base.cost == 2 * (4 + 32) + (4 + 32)  # two item rows and the user row, as delta bytes
    history.close(base)
    with pytest.raises(BaseGone):
        base["item"]


def test_a_limited_base_closes_once_no_delta_could_be_made_unless_one_is_on_its_way() -> None:
    params = model(1)
    history = ParamHistory(params)
    row = history.row_cost("item")
    base = history.open(1, ("item", "user"), limit=10 * row)
    history.touch_rows("item", np.arange(8))
    params["item"][:8] += 1
    assert base.alive
    history.read(base)  # a delta against it is still travelling
    history.touch_rows("item", np.arange(8, 20))
    params["item"][8:20] += 1
    assert base.alive and base.changed_rows("item", params["item"]).size == 20
    history.unread(base)
    assert not base.alive and base not in history.bases


def test_the_compiled_mean_is_numpys_bit_for_bit_and_names_the_rows_it_changes() -> None:
    rng = np.random.default_rng(2)
    own = rng.standard_normal((50, 6)).astype(np.float32)
    own[0, :3] = [-0.0, 0.0, 1e-42]
    other = own.copy()
    other[[4, 17, 30]] += 1.0
    other[0, 0] = 0.0  # -0.0 and 0.0 average to 0.0: the bits change, the value does not
    want = own.copy()
    want += other
    want *= np.float32(0.5)
    got = own.copy()
    rows, old, changed, finite = mean_pair_rows(got, other, 2)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert changed == 4 and finite and rows.tolist() == [0, 4]
    np.testing.assert_array_equal(old, own[[0, 4]])
    huge = np.full((2, 2), 3e38, dtype=np.float32)
    assert mean_pair_rows(huge.copy(), huge, -1)[3] is False


def test_a_senders_budget_closes_its_base_past_that_many_saved_rows() -> None:
    from learning.learner import Snapshot

    params = model(6)  # 200 item rows of 8 floats: a row costs 36 delta bytes
    hist = ParamHistory(params)
    row = hist.row_cost("item")
    enc = DeltaEncoder(history=hist, budget=20 * row)

    def send(version: int) -> Any:
        snap = Snapshot({k: v.copy() for k, v in params.items()})
        snap.stamp = hist.stamp
        encoded = enc.encode(1, version, snap)
        enc.acknowledged(1, version, encoded.view)
        enc.settled(encoded)
        return encoded

    send(1)
    hist.touch_rows("item", np.arange(10))
    params["item"][:10] += 1
    assert send(2).is_delta  # 10 rows: within the budget
    hist.touch_rows("item", np.arange(30))
    params["item"][:30] += 1
    # 30 changed rows would still make a delta (the rule's limit is 90% of 200 rows), but not
    # within the budget: the model goes whole, and the old base is let go
    old = enc.base_for(2)
    assert old is not None
    assert not send(3).is_delta
    assert not old.alive and old not in hist.bases


def _scripted(
    history: bool, seed: int, budget: float = float("inf"), kept: list[DeltaEncoder] | None = None
) -> list[bytes]:
    """Wire bytes of a node that trains rows, merges peers' models and sends to three peers, in
    one random order: with bases kept by rows, or as copies of what it sent."""
    from learning.learner import Snapshot

    rng = np.random.default_rng(seed)
    params = model(seed, rows=120)
    hist = ParamHistory(params)
    enc = DeltaEncoder(history=hist if history else None, budget=budget)
    out: list[bytes] = []
    version = 0
    pending = []
    for _ in range(300):
        op = rng.integers(5)
        if op == 0:  # a local step on a few rows
            rows = np.unique(rng.integers(0, 120, 6))
            hist.touch_rows("item", rows)
            hist.touch_rows("user", np.array([0]))
            hist.touch_all("h")
            params["item"][rows] += rng.standard_normal((rows.size, 8)).astype(np.float32)
            params["user"] += 0.1
            params["h"] *= np.float32(0.99)
        elif op == 1:  # a merge with a peer whose model differs in a few or in many rows
            other = params["item"].copy()
            many = rng.random() < 0.3
            rows = rng.integers(0, 120, 100 if many else 5)
            other[rows] += 1.0
            r, old, changed, _ = mean_pair_rows(params["item"], other, hist.capacity("item"))
            hist.stamp += 1
            if hist.capacity("item") >= 0 and changed > hist.capacity("item"):
                hist.overflow()
            if changed:
                hist.changed("item", r, old)
        elif op in (2, 3):  # send to a peer
            snap = Snapshot({k: v.copy() for k, v in params.items()})
            snap.stamp = hist.stamp
            version += 1
            peer = int(rng.integers(3))
            encoded = enc.encode(peer, version, snap)
            out.append(msgpack.packb(encoded.body, use_bin_type=True))
            pending.append((peer, version, encoded))
        elif pending:  # the oldest send is answered
            peer, v, encoded = pending.pop(0)
            if rng.random() < 0.9:
                enc.acknowledged(peer, v, encoded.view)
            else:
                enc.forget(peer)
            enc.settled(encoded)
    if kept is not None:
        kept.append(enc)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_bases_kept_by_rows_send_the_same_bytes_as_copies(seed: int) -> None:
    assert _scripted(True, seed) == _scripted(False, seed)
    # a budget above the delta rule's own limit (a whole model here) changes no byte
    assert _scripted(True, seed, budget=120 * 36.0) == _scripted(False, seed)


@pytest.mark.parametrize("budget", [float("inf"), 4 * 36.0])
def test_the_encoder_keeps_no_closed_base(budget: float) -> None:
    """A base per model version stayed in the encoder after it closed (a daemon's steady RSS
    growth in the hour's soak, ~1 MB a minute a process): only open ones are kept now."""
    kept: list[DeltaEncoder] = []
    _scripted(True, 0, budget=budget, kept=kept)
    enc = kept[0]
    bases = list(enc._open.values())
    assert enc.history is not None
    assert all(b.alive for b in bases), [b.alive for b in bases]  # (a closed one stayed before)
    assert {id(b) for b in bases} <= {id(b) for b in enc.history.bases}  # the history's open ones


def test_a_receiver_in_the_same_process_rebuilds_a_delta_from_the_senders_own_base() -> None:
    from learning.learner import Snapshot
    from learning.params import spec_of

    params = model(5)
    hist = ParamHistory(params)
    enc = DeltaEncoder(history=hist)
    dec = DeltaDecoder()
    spec = spec_of(params)
    snap = Snapshot({k: v.copy() for k, v in params.items()})
    snap.stamp = hist.stamp
    first = enc.encode(1, 1, snap)
    dec.decode(0, wire(first.body), spec)
    base = enc.base_for(1)
    assert base is not None
    dec.share(0, 1, base)
    enc.acknowledged(1, 1, first.view)
    enc.settled(first)
    hist.touch_rows("item", np.array([2, 3]))
    params["item"][[2, 3]] = 5.0
    snap = Snapshot({k: v.copy() for k, v in params.items()})
    snap.stamp = hist.stamp
    second = enc.encode(1, 2, snap)
    assert second.is_delta
    version, got = dec.decode(0, wire(second.body), spec)
    assert version == 2
    for k in params:
        np.testing.assert_array_equal(got[k], params[k])
    rows = wire(second.body)["r"]["item"]["i"]
    assert unpack_tensor(rows, spec_of({"i": np.zeros(2, np.int32)})["i"]).tolist() == [2, 3]


def test_receivers_in_the_same_process_keep_a_history_less_senders_model_once() -> None:
    """A FedAvg server (no history) sends one global model to every client: each client keeps
    that model as its base, not the copy it decoded, and a later delta against it decodes the
    same. Not before it was sent, and not a model sent as a delta."""
    from learning.params import spec_of

    params = model(6)
    spec = spec_of(params)
    enc = DeltaEncoder()  # no history: the FedAvg server's ParamStore
    assert enc.shared(1) is None
    sent = {k: v.copy() for k, v in params.items()}
    clients = [DeltaDecoder() for _ in range(3)]
    for peer, dec in enumerate(clients):
        first = enc.encode(peer, 1, sent)
        assert not first.is_delta
        dec.decode(0, wire(first.body), spec)
        shared = enc.shared(1)
        assert shared is sent and enc.shared(2) is None
        dec.share(0, 1, shared)
        enc.acknowledged(peer, 1, first.view)
    assert all(dec._bases[0][1] is sent for dec in clients)  # one model held, not three copies
    new = {k: v.copy() for k, v in sent.items()}
    new["item"][7] = 9.0
    second = enc.encode(0, 2, new)
    assert second.is_delta and enc.shared(2) is None  # a delta is no model to keep
    version, got = clients[0].decode(0, wire(second.body), spec)
    assert version == 2
    for k in params:
        np.testing.assert_array_equal(got[k], new[k])
    np.testing.assert_array_equal(sent["item"], params["item"])  # the shared base was not written


def test_an_acknowledged_model_the_sender_did_not_keep_stands_by_its_open_base_or_not_at_all() -> None:
    """A FedAvg client keeps neither the snapshot nor the body of an update on its way
    (p2pnode/nodes/node.py): acknowledged with no view, the base opened on its live model stands for
    it, and where that base has closed the peer's next model goes whole."""
    from learning.learner import Snapshot

    params = model(6)
    hist = ParamHistory(params)
    enc = DeltaEncoder(history=hist, budget=20 * hist.row_cost("item"))

    def snapshot() -> Snapshot:
        snap = Snapshot({k: v.copy() for k, v in params.items()})
        snap.stamp = hist.stamp
        return snap

    first = enc.encode(1, 1, snapshot())
    enc.acknowledged(1, 1, None)  # its open base stands for it
    enc.settled(first)
    hist.touch_rows("item", np.arange(5))
    params["item"][:5] += 1
    second = enc.encode(1, 2, snapshot())
    assert second.is_delta and second.nbytes < first.nbytes
    for rows in (np.arange(100), np.arange(100, 101)):  # past the budget: the base of version 2
        hist.touch_rows("item", rows)  # closes at the first write after 100 rows changed
        params["item"][rows] += 1
    enc.acknowledged(1, 2, None)
    enc.settled(second)
    assert enc.base_for(2) is None
    assert not enc.encode(1, 3, snapshot()).is_delta  # no base, no kept view: whole
