"""A colluder's multicast (000 Algorithm 2, line 14): v_u by default, the received Θ_u as a variant."""

from __future__ import annotations

import random

import numpy as np
import pytest

from adversary.aia import MULTICAST_KEY, AttributeObserver
from adversary.cia import CIAObserver
from adversary.messages import CollusionMessage
from adversary.models import GMFAttack
from adversary.node import AdversaryNode, ForwardingColluder
from learning import gmf
from p2pcore.effects import Send
from peer_sampling.base import StaticView
from protocols.base_gl import BaseGossip
from protocols.gossip import TimingConfig
from protocols.messages import ModelMessage
from tests.unit.fakes import FakeLearnerBase


class StillLearner(FakeLearnerBase):
    """A learner whose merges and updates change nothing (the observer is under test)."""

    def __init__(self) -> None:
        self.params = model(0.0, 0.0)
        self.version = 0

    def merge(self, models, how="mean") -> None:  # type: ignore[no-untyped-def]
        self.version += 1

    def local_update(self) -> int:
        return 0


def model(user: float, item: float) -> dict[str, np.ndarray]:
    return {
        gmf.USER: np.full((1, 2), user, np.float32),
        gmf.ITEM: np.full((4, 2), item, np.float32),
        gmf.H: np.ones(2, np.float32),
        gmf.B: np.zeros(1, np.float32),
    }


def colluder(multicast: str, partners: tuple[int, ...] = (5, 6)) -> AdversaryNode:
    proto = BaseGossip(0, StillLearner(), StaticView(0, [1], []), TimingConfig())  # type: ignore[arg-type]
    observer = CIAObserver(GMFAttack(), [np.array([1, 2])], k=1, momentum=0.5)
    return AdversaryNode(proto, observer, partners, multicast=multicast)


def multicasts(effects: list[object]) -> list[Send]:
    return [e for e in effects if isinstance(e, Send) and isinstance(e.message, CollusionMessage)]


def test_colluder_multicasts_its_momentum_model_to_every_partner_once() -> None:
    node = colluder("v")
    rng = random.Random(0)
    node.on_message(9, ModelMessage(1, model(1.0, 2.0)), 0.0, rng)
    sent = multicasts(node.on_message(9, ModelMessage(2, model(1.0, 4.0)), 1.0, rng))
    assert [s.to for s in sent] == [5, 6]
    assert sent[0].message is sent[1].message  # one message for all partners, packed once
    message = sent[0].message
    assert isinstance(message, CollusionMessage) and message.user == 9
    np.testing.assert_allclose(message.params[gmf.ITEM], np.full((2, 2), 3.0))  # 0.5·2 + 0.5·4
    assert node.multicasts_sent == 4


def test_theta_variant_multicasts_the_received_model_rows_and_still_folds_it() -> None:
    node = colluder("theta")
    rng = random.Random(0)
    node.on_message(9, ModelMessage(1, model(1.0, 2.0)), 0.0, rng)
    received = model(1.0, 4.0)
    sent = multicasts(node.on_message(9, ModelMessage(2, received), 1.0, rng))
    message = sent[0].message
    assert isinstance(message, CollusionMessage)
    np.testing.assert_allclose(message.params[gmf.ITEM], np.full((2, 2), 4.0))  # Θ_u, target rows
    received[gmf.ITEM][:] = -1.0  # the multicast is a copy, not a view of the sender's arrays
    np.testing.assert_allclose(message.params[gmf.ITEM], np.full((2, 2), 4.0))
    np.testing.assert_allclose(node.observer.v[9][gmf.ITEM], np.full((2, 2), 3.0))  # v_u as before


def test_a_partner_folds_multicasts_only_from_its_group() -> None:
    node = colluder("v")
    rng = random.Random(0)
    kept = {name: arr.copy() for name, arr in GMFAttack().keep(model(1.0, 2.0), np.array([1, 2])).items()}
    assert node.on_message(5, CollusionMessage(9, kept), 0.0, rng) == []
    assert node.on_message(7, CollusionMessage(8, kept), 0.0, rng) == []  # 7 is no partner
    assert node.observer.observed == {9} and node.multicasts_received == 1


def test_unknown_multicast_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="multicast"):
        colluder("everything")


def test_a_forwarder_sends_the_received_rows_to_the_reader_only_and_keeps_nothing() -> None:
    proto = BaseGossip(3, StillLearner(), StaticView(3, [1], []), TimingConfig())  # type: ignore[arg-type]
    node = ForwardingColluder(proto, GMFAttack(), np.array([1, 2]), observers=(0, 3))
    rng = random.Random(0)
    received = model(1.0, 4.0)
    sent = multicasts(node.on_message(9, ModelMessage(1, received), 0.0, rng))
    assert [s.to for s in sent] == [0]  # never to itself
    message = sent[0].message
    assert isinstance(message, CollusionMessage) and message.user == 9
    assert message.params.keys() == received.keys()
    np.testing.assert_array_equal(message.params[gmf.ITEM], np.full((2, 2), 4.0))
    received[gmf.ITEM][:] = -1.0  # a copy, not a view
    np.testing.assert_array_equal(message.params[gmf.ITEM], np.full((2, 2), 4.0))
    assert node.on_message(0, message, 1.0, rng) == []  # takes no multicasts
    assert not hasattr(node, "observer") and node.multicasts_sent == 1


@pytest.mark.parametrize("estimator", ["first", "zero", "debiased"])
def test_a_groups_read_observer_equals_one_observer_fed_every_group_observation(estimator: str) -> None:
    """Reader 0 with forwarders 1 and 2 (multicast Θ_u): its state is a lone observer's that saw,
    in the reader's arrival order, every model the group received."""
    target = [np.array([1, 2])]

    def observer() -> CIAObserver:
        return CIAObserver(GMFAttack(), target, k=2, momentum=0.8, estimator=estimator)

    def proto(i: int) -> BaseGossip:
        return BaseGossip(i, StillLearner(), StaticView(i, [9], []), TimingConfig())  # type: ignore[arg-type]

    reader = AdversaryNode(proto(0), observer(), (0, 1, 2), multicast="theta", send_to=())
    forwarders = {i: ForwardingColluder(proto(i), GMFAttack(), target[0], (0,)) for i in (1, 2)}
    lone = observer()
    rng = np.random.default_rng(5)
    prng = random.Random(0)
    for step in range(40):
        at = int(rng.integers(0, 3))  # which member hears from which user
        user = int(rng.integers(10, 16))
        params = model(float(rng.normal()), float(rng.normal()))
        params[gmf.ITEM][:] = rng.normal(size=(4, 2)).astype(np.float32)
        if at == 0:
            effects = reader.on_message(user, ModelMessage(step, params), float(step), prng)
            assert multicasts(effects) == []  # the reader tells nobody
            lone.observe(user, params)
            continue
        (sent,) = multicasts(forwarders[at].on_message(user, ModelMessage(step, params), float(step), prng))
        assert sent.to == 0
        assert reader.on_message(at, sent.message, float(step), prng) == []
        lone.observe(user, params)
    assert reader.observer.counts == lone.counts and sum(lone.counts.values()) == 40
    for u in lone.v:
        np.testing.assert_array_equal(reader.observer._buf[u], lone._buf[u])
    assert reader.observer.predict(0) == lone.predict(0)


def test_a_multicast_with_a_nan_is_refused_whether_or_not_the_wire_checked_it() -> None:
    """vet reads a tensor for finiteness unless the wire decode already checked it (a Checked
    tensor with its square); a NaN planted in an unchecked tensor is caught either way."""
    from learning.params import Checked

    node = colluder("v")
    kept = node.observer.keep(model(1.0, 2.0))
    assert node.vet(CollusionMessage(3, kept)) is None
    bad = {k: v.copy() for k, v in kept.items()}
    bad[gmf.H][0] = np.nan
    assert node.vet(CollusionMessage(3, bad)) == "non-finite"
    squares = {k: float(v.ravel() @ v.ravel()) for k, v in kept.items() if k != gmf.H}
    assert node.vet(CollusionMessage(3, Checked(bad, squares))) == "non-finite"  # h was not checked
    assert node.vet(CollusionMessage(3, Checked(kept, dict(squares, h=2.0)))) is None


def _features(user: int, params: dict[str, np.ndarray], reference: object = None) -> np.ndarray:
    """Eq. 7 with the oracle I'_u = {1, 2}: [user row, mean of item rows 1 and 2]."""
    return np.concatenate([params[gmf.USER][0], params[gmf.ITEM][[1, 2]].mean(0)]).astype(np.float32)


def aia_node(
    node_id: int, keep: bool, partners: tuple[int, ...] = (), send_to: tuple[int, ...] = ()
) -> AdversaryNode:
    proto = BaseGossip(node_id, StillLearner(), StaticView(node_id, [1], []), TimingConfig())  # type: ignore[arg-type]
    return AdversaryNode(
        proto, None, aia=AttributeObserver(_features, keep=keep), aia_partners=partners, aia_send_to=send_to
    )


def test_attribute_colluders_send_their_features_to_the_read_member_which_pools_them() -> None:
    reader, member, lone = (
        aia_node(0, True, partners=(7,)),
        aia_node(7, False, send_to=(0,)),
        aia_node(8, True),
    )
    rng = random.Random(0)
    sent = multicasts(member.on_message(9, ModelMessage(1, model(1.0, 2.0)), 0.0, rng))
    assert [s.to for s in sent] == [0] and member.aia is not None and member.aia.features == {}
    share = sent[0].message
    assert isinstance(share, CollusionMessage) and share.params.keys() == {MULTICAST_KEY}
    assert (
        reader.admit(7, 0.0, collusion=True) is None and reader.admit(8, 0.0, collusion=True) == "not-partner"
    )
    assert reader.vet(share) is None
    reader.on_message(7, share, 1.0, rng)
    reader.on_message(4, ModelMessage(1, model(3.0, 5.0)), 1.0, rng)  # one it heard itself
    assert reader.aia is not None and sorted(reader.aia.features) == [4, 9] and reader.aia.pooled == 1
    np.testing.assert_allclose(reader.aia.features[9], [1, 1, 2, 2])
    assert reader.collusion_template(model(0.0, 0.0)).keys() == {MULTICAST_KEY}  # type: ignore[union-attr]
    lone.on_message(7, share, 1.0, rng)  # not a partner: nothing is taken
    assert lone.aia is not None and lone.aia.features == {} and lone.collusion_template(model(0, 0)) is None
    assert not multicasts(reader.on_message(5, ModelMessage(1, model(1.0, 1.0)), 2.0, rng))  # it sends none


def test_a_cia_colluders_multicast_carries_its_features_and_a_forwarder_adds_them_too() -> None:
    proto = BaseGossip(0, StillLearner(), StaticView(0, [1], []), TimingConfig())  # type: ignore[arg-type]
    observer = CIAObserver(GMFAttack(), [np.array([1, 2])], k=1, momentum=0.5)
    both = AdversaryNode(
        proto,
        observer,
        (5, 6),
        multicast="theta",
        aia=AttributeObserver(_features, keep=False),
        aia_send_to=(5,),
    )
    rng = random.Random(0)
    sent = multicasts(both.on_message(9, ModelMessage(1, model(1.0, 2.0)), 0.0, rng))
    assert [s.to for s in sent] == [5, 6]  # one multicast, the CIA's, with the features inside
    assert sent[0].message.params.keys() == {gmf.USER, gmf.ITEM, gmf.H, gmf.B, MULTICAST_KEY}  # type: ignore[attr-defined]
    proto2 = BaseGossip(3, StillLearner(), StaticView(3, [1], []), TimingConfig())  # type: ignore[arg-type]
    forwarder = ForwardingColluder(
        proto2, GMFAttack(), np.array([1, 2]), (0,), aia=AttributeObserver(_features, keep=False)
    )
    sent = multicasts(forwarder.on_message(9, ModelMessage(1, model(1.0, 2.0)), 0.0, rng))
    np.testing.assert_allclose(sent[0].message.params[MULTICAST_KEY], [1, 1, 2, 2])  # type: ignore[attr-defined]


def test_an_attribute_observer_keeps_the_latest_features_or_their_running_mean() -> None:
    latest, mean = AttributeObserver(_features), AttributeObserver(_features, momentum=0.5)
    for obs in (latest, mean):
        obs.observe(9, model(1.0, 2.0))
        obs.observe(9, model(3.0, 4.0))
    np.testing.assert_allclose(latest.features[9], [3, 3, 4, 4])
    # debiased eq. 4 with β = 0.5: α_2 = 0.5 / 0.75 = 2/3 -> 1/3·1 + 2/3·3 = 7/3
    np.testing.assert_allclose(mean.features[9], [7 / 3, 7 / 3, 10 / 3, 10 / 3], rtol=1e-6)
    again = AttributeObserver(_features, momentum=0.5)
    again.restore(mean.state())
    again.observe(9, model(3.0, 4.0))
    mean.observe(9, model(3.0, 4.0))
    np.testing.assert_allclose(again.features[9], mean.features[9])  # the counts survive a checkpoint
    with pytest.raises(ValueError, match="momentum"):
        AttributeObserver(_features, momentum=1.0)
