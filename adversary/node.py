"""An honest-but-curious node: the honest protocol, untouched, plus a CIA observer (000 §IV-A).

``AdversaryNode`` hands every timer and message to the same protocol and sampler an honest node
runs and returns their effects unchanged, so its protocol traffic is exactly an honest node's
(a test compares the two frame by frame). It only adds:

- an observation of every model it receives (a gossip model, or a FedAvg client update at the
  server) before the protocol merges it;
- for a colluder, ``Send(partner, CollusionMessage(u, v_u))`` to every partner (Alg. 2 l.14), and
  folding partners' multicasts into its own state (``multicast="theta"``: the received Θ_u, kept
  rows only, instead of v_u, as §IV-B.2's text says: "she forwards models received from her
  neighbors to her colluders"). ``send_to`` narrows who gets them: when colluders forward Θ_u,
  only the group's read observer needs them, and the others are ``ForwardingColluder`` nodes,
  which keep no attack state at all;
- attribute inference (paper 004, ``aia``): the eq. 7 features of every model it receives; a
  colluder sends them to its group's read member (``aia_send_to``), inside the CIA's multicast
  when it sends one, else alone, as ``CollusionMessage(u, {"aia": features})``; the read member
  pools what its ``aia_partners`` send;
- membership inference (``mia``, with ``--mia`` and a placement): the catalogue scores of every
  model it receives, kept per sender (adversary/mia_observer.py); a colluding group's members
  each keep their own and the scorer pools them by the group's name;
- under Share less (or ``fictive_user``), a refresh of the fictive user e_A against its own
  current model (with a head kept home, of the head it scores with: models.OwnHead) every
  ``refresh_every`` wake-ups of a gossip node, and every round at the FedAvg server (right after
  it aggregates, so the updates of a round are scored against that round's global model), with
  its own RNG (the protocol's RNG stream is left alone).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

import numpy as np

from adversary.aia import MULTICAST_KEY, AttributeObserver
from adversary.cia import CIAObserver
from adversary.messages import CollusionMessage
from adversary.mia_observer import MembershipWatch
from adversary.models import AttackModel
from learning.params import Array, Checked, Index, l2_norm
from p2pcore.effects import Effect, NodeId, Send
from protocols.fedavg import ROUND_TIMER
from protocols.gossip import WAKE_TIMER, GossipNode, GossipProtocol
from protocols.messages import FedMessage, ModelMessage


def is_observation(message: object) -> TypeGuard[ModelMessage | FedMessage]:
    """A model the CIA observes: a gossip model, or a client's update at the FedAvg server."""
    return isinstance(message, ModelMessage) or (isinstance(message, FedMessage) and message.kind == "update")


class AdversaryNode(GossipNode):
    """A node that follows its protocol exactly and runs the CIA on what it receives."""

    def __init__(
        self,
        protocol: GossipProtocol,
        observer: CIAObserver | None,
        partners: Sequence[NodeId] = (),
        reference: Callable[[], Mapping[str, Array]] | None = None,
        refresh_every: int = 10,
        seed: int = 0,
        multicast: str = "v",
        send_to: Sequence[NodeId] | None = None,
        aia: AttributeObserver | None = None,
        aia_partners: Sequence[NodeId] = (),
        aia_send_to: Sequence[NodeId] = (),
        mia: MembershipWatch | None = None,
    ) -> None:
        super().__init__(protocol)
        self.mia = mia  #: the MPE attack on what this node receives (``--mia`` with a placement)
        if multicast not in ("v", "theta"):
            raise ValueError("multicast must be 'v' or 'theta'")
        self.multicast_theta = multicast == "theta"
        self.observer = observer  #: the CIA's (None: this node infers attributes only)
        self.aia = aia  #: attribute inference's (paper 004; None: the CIA only)
        self.aia_partners = tuple(p for p in aia_partners if p != protocol.node_id)  #: features pooled from
        self.aia_send_to = tuple(p for p in aia_send_to if p != protocol.node_id)  #: features sent to
        #: a member of a colluding group of attribute inference: its multicasts carry features
        self.aia_pool = aia is not None and bool(self.aia_partners or self.aia_send_to)
        self.partners = tuple(p for p in partners if p != protocol.node_id)  #: multicasts taken from
        targets = self.partners if send_to is None else send_to
        self.send_to = tuple(p for p in targets if p != protocol.node_id)  #: multicasts sent to
        self.reference = reference
        self.refresh_every = max(1, refresh_every)
        self.multicasts_sent = 0
        self.multicasts_received = 0
        self._rng = np.random.default_rng([seed, int(protocol.node_id), 0xC1A])
        self._wakes = 0
        self.refreshes = 0  #: how many times e_A was trained
        self._kept: tuple[int, float] | None = None  #: (model version, norm of its kept rows)
        if observer is not None and observer.needs_reference:
            self._refresh()

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        effects = super().on_timer(key, now, rng)
        if self.observer is None or not self.observer.needs_reference:
            return effects
        if key == WAKE_TIMER:
            self._wakes += 1
            if self._wakes % self.refresh_every == 0:
                self._refresh()
        elif key == ROUND_TIMER:  # the FedAvg server: one adversary, a new global model each round
            self._refresh()
        return effects

    def admit(self, sender: NodeId, now: float, collusion: bool = False) -> str | None:
        """A multicast is taken only from a partner of this node's own group (with
        process identities no other member can sign as one)."""
        if collusion:
            return None if sender in self.partners or sender in self.aia_partners else "not-partner"
        return super().admit(sender, now)

    def vet(self, message: object) -> str | None:
        """A multicast passes the checks a gossip model does: finite, and within the distance
        bound of the node's own model over the rows it carries (``--max-model-distance``)."""
        if not isinstance(message, CollusionMessage):
            return super().vet(message)
        if not _finite(message.params):
            return "non-finite"
        cia = _cia_part(message.params)  # a partner's features only feed the group's own attack
        bound = self.protocol.max_distance
        if cia and self.observer is not None and bound > 0 and l2_norm(cia) > (1 + bound) * self._kept_norm():
            return "too-far"
        return None

    def _kept_norm(self) -> float:
        """‖own model‖ over the rows a multicast carries, once per model version (a reader
        takes many multicasts between two of its own updates)."""
        assert self.observer is not None  # a multicast is taken only by a CIA colluder
        version = self.protocol.learner.version
        if self._kept is None or self._kept[0] != version:
            self._kept = (version, l2_norm(self.observer.keep(self.protocol.learner.params)))
        return self._kept[1]

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        if isinstance(message, CollusionMessage):
            self._take_multicast(sender, message)
            return []
        observed: list[Effect] = []
        features = None
        if self.aia is not None and is_observation(message):  # before the merge may reuse its arrays
            features = self.aia.observe(int(sender), message.params)
        if self.mia is not None and is_observation(message):
            self.mia.observe(int(sender), message.params, now)
        carried = features if self.aia_pool else None  # what this node's multicasts carry
        if self.observer is not None and is_observation(message):
            theta = self.observer.keep(message.params) if self.multicast_theta and self.send_to else None
            v = self.observer.observe(int(sender), message.params)
            if self.send_to:
                params = v if theta is None else theta
                if carried is not None:
                    params = {**params, MULTICAST_KEY: carried}
                    carried = None  # on its way to the read member inside the CIA's multicast
                multicast = CollusionMessage(int(sender), params)  # one for all
                observed.extend(Send(partner, multicast) for partner in self.send_to)
                self.multicasts_sent += len(self.send_to)
        if carried is not None and self.aia_send_to:
            share = CollusionMessage(int(sender), {MULTICAST_KEY: carried})
            observed.extend(Send(p, share) for p in self.aia_send_to)
            self.multicasts_sent += len(self.aia_send_to)
        return [*super().on_message(sender, message, now, rng), *observed]

    def _take_multicast(self, sender: NodeId, message: CollusionMessage) -> None:
        """A partner's multicast: its features to the pooled attribute observer, the rest to the
        CIA's observer (each only from a partner of that attack)."""
        params = message.params
        taken = False
        features = params.get(MULTICAST_KEY)
        if features is not None and self.aia is not None and self.aia.keep and sender in self.aia_partners:
            self.aia.take(message.user, np.asarray(features, dtype=np.float32), pooled=True)
            taken = True
        cia = _cia_part(params)
        if cia and sender in self.partners and self.observer is not None:
            self.observer.fold(message.user, cia)
            taken = True
        self.multicasts_received += taken

    def state(self) -> dict[str, Any]:
        out = {**super().state(), "observer": None if self.observer is None else self.observer.state()}
        if self.aia is not None:  # a checkpoint of a CIA-only node stays as it was
            out["aia"] = self.aia.state()
        if self.mia is not None:
            out["mia"] = self.mia.state()
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        super().restore(state)
        if self.observer is not None:
            self.observer.restore(state["observer"])
        if self.aia is not None and state.get("aia") is not None:
            self.aia.restore(state["aia"])
        if self.mia is not None and state.get("mia") is not None:
            self.mia.restore(state["mia"])

    def collusion_template(self, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """A partner's multicast carries the target rows of the model (v_u or Θ_u alike), and in a
        colluding group of attribute inference the features of the model (:data:`MULTICAST_KEY`)."""
        obs = self.observer
        out: dict[str, Any] = {}
        if self.partners and obs is not None:
            out.update(obs.model.keep(params, obs.rows))
        if self.aia_pool and (self.partners or self.aia_partners):
            out[MULTICAST_KEY] = _feature_template(self.aia, int(self.protocol.node_id), params)
        return out or None

    def observed_users(self) -> int:
        """The users the CIA keeps a model of (without it: attribute inference's, else the
        membership watch's)."""
        if self.observer is None:
            if self.aia is not None:
                return len(self.aia.features)
            return len(self.mia.held()) if self.mia is not None else 0
        return len(self.observer.v)

    def _refresh(self) -> None:
        if self.reference is not None and self.observer is not None:
            self.observer.set_reference(self.reference(), self._rng)
            self.refreshes += 1


class ForwardingColluder(GossipNode):
    """A colluder that only forwards: every model it receives, restricted to the rows the group's
    target needs (the observer's ``keep``), goes to the group's read observer as a
    ``CollusionMessage(u, Θ_u)`` (§IV-B.2: "she forwards models received from her neighbors to
    her colluders"). It keeps no v_u and scores nothing: when only one member's prediction is
    read, the others' state would never be looked at. Its protocol traffic is an honest node's."""

    def __init__(
        self,
        protocol: GossipProtocol,
        model: AttackModel,
        rows: Index,
        observers: Sequence[NodeId],
        aia: AttributeObserver | None = None,
        mia: MembershipWatch | None = None,
    ) -> None:
        super().__init__(protocol)
        self.mia = mia  #: the MPE attack on what it receives: its group's view pools it
        self.model = model
        self.rows = np.asarray(rows, dtype=np.int64)
        self.send_to = tuple(p for p in observers if p != protocol.node_id)
        self.aia = aia  #: attribute inference: its features ride along (it keeps none)
        self.multicasts_sent = 0

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        if isinstance(message, CollusionMessage):
            return []  # nobody sends to a forwarder; a stray multicast changes nothing
        forwards: list[Effect] = []
        if self.mia is not None and is_observation(message):
            self.mia.observe(int(sender), message.params, now)
        if self.send_to and is_observation(message):  # kept before the merge, which may reuse arrays
            kept = self.model.keep(message.params, self.rows)
            if self.aia is not None:
                kept[MULTICAST_KEY] = self.aia.observe(int(sender), message.params)
            forward = CollusionMessage(int(sender), kept)
            forwards.extend(Send(p, forward) for p in self.send_to)
            self.multicasts_sent += len(self.send_to)
        return [*super().on_message(sender, message, now, rng), *forwards]

    def state(self) -> dict[str, Any]:
        out = super().state()
        if self.mia is not None:
            out["mia"] = self.mia.state()
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        super().restore(state)
        if self.mia is not None and state.get("mia") is not None:
            self.mia.restore(state["mia"])


def _cia_part(params: Mapping[str, Array]) -> Mapping[str, Array]:
    """A multicast's tensors less attribute inference's features."""
    if MULTICAST_KEY not in params:
        return params
    return {k: v for k, v in params.items() if k != MULTICAST_KEY}


def _feature_template(aia: AttributeObserver | None, node_id: int, params: Mapping[str, Any]) -> Array:
    """The shape of the features a colluder sends: its own model's, featurized as any other (I'_u
    from moved rows: against itself, which gives the same shape)."""
    assert aia is not None
    return np.zeros_like(np.asarray(aia.featurize(node_id, params, params), dtype=np.float32))


def _finite(params: Mapping[str, Array]) -> bool:
    """Whether every value of a multicast is finite. A tensor the wire decode already checked
    (learning.params.Checked: it holds the square the check computed) is not read again."""
    checked = params.squares if isinstance(params, Checked) else {}
    return all(name in checked or bool(np.isfinite(a).all()) for name, a in params.items())
