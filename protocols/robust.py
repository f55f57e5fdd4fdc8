"""What a gossip node does so that one poisoning member cannot wreck its model (issue #31).

Two parts, each pure and per node (the distance bound, ``GossipProtocol.vet``, is the third):

- :class:`SenderGate` decides, from the sender id alone and before a received model's body is
  read, whether the node takes it at all: only from an in-neighbour (the samplers whose views are
  a graph, static and PeerSwap, know who may send to them: 002 §2.4, j ∈ out(i) ⇔ i ∈ in(j)), and
  at most about one model per sender per shortest honest wake-up period (a token bucket). A member can then
  reach only the nodes whose in-view holds one of its own ids (identities stop it from signing as
  another), at about the rate an honest neighbour could.
- :class:`ClipRadius` is ClippedGossip (He, Karimireddy, Jaggi, "Byzantine-robust decentralized
  learning via ClippedGossip", 2022): a taken model θ_j enters the merge as
  θ_i + min(1, τ / ‖θ_j − θ_i‖)·(θ_j − θ_i), its difference clipped to an adaptive radius τ.
  The guarantee of that paper holds when the Byzantine share of each node's *neighbours* is small,
  which is what the gate provides. The daemon's commands turn it on (C = 1), the lab's leave it
  off unless ``--clip-factor`` (``--preset safe``): THREAT_MODEL.md has why.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable

from p2pcore.effects import NodeId


class SenderGate:
    """Which senders' models a node takes, judged from the id before the body is read.

    ``expects(sender, now)`` says whether ``sender`` may send models to this node (the sampler's
    in-neighbours, or None for samplers that do not track them, Cyclon and Pers-Gossip: then every
    member may). Each sender has a bucket of ``burst`` tokens refilled at one token per
    ``interval`` ticks: an honest sender sends to one peer at most once per own wake-up period
    Δ_j, and every node draws Δ_j ~ N(100, 10²) ticks (002 §3.1), so with ``interval`` the mean
    less four standard deviations (60 ticks) an honest sender never runs dry, even SAMO's, which
    sends to every out-neighbour at each wake-up; a member sending more often is refused
    (``too-often``). Buckets are kept for the last ``senders`` senders only.
    """

    def __init__(
        self,
        expects: Callable[[NodeId, float], bool] | None,
        interval: float,
        burst: float = 2.0,
        senders: int = 256,
    ) -> None:
        self.expects = expects
        self.interval = max(1.0, interval)
        self.burst = burst
        self.senders = senders
        self._buckets: OrderedDict[NodeId, tuple[float, float]] = OrderedDict()  #: (tokens, at)
        self.refused: dict[str, int] = {"not-neighbour": 0, "too-often": 0}

    def check(self, sender: NodeId, now: float) -> str | None:
        """Why a model from ``sender`` must be refused at ``now`` (None: read it)."""
        if self.expects is not None and not self.expects(sender, now):
            self.refused["not-neighbour"] += 1
            return "not-neighbour"
        if self._tokens(sender, now) < 1.0:
            self.refused["too-often"] += 1
            return "too-often"
        return None

    def spend(self, sender: NodeId, now: float) -> None:
        """A model from ``sender`` was taken, or admitted and then refused by the decoder or the
        distance bound (``GossipNode.charge``): one of its tokens is spent."""
        self._buckets[sender] = (self._tokens(sender, now) - 1.0, now)
        self._buckets.move_to_end(sender)
        if len(self._buckets) > self.senders:
            self._buckets.popitem(last=False)

    def _tokens(self, sender: NodeId, now: float) -> float:
        tokens, at = self._buckets.get(sender, (self.burst, now))
        return min(self.burst, tokens + max(0.0, now - at) / self.interval)


def _itself(sender: NodeId) -> Hashable:
    return sender


class ClipRadius:
    """ClippedGossip's adaptive radius τ for one node.

    τ = ``factor`` × the median of the last ``window`` distances ‖θ_j − θ_i‖ of taken models, in
    which one sender holds at most ``per_sender`` places (its newest replace its oldest), and with
    process identities one *member* (``owner``: all the ids its credential names) does: a member
    flooding from its ids, or from the in-neighbour places they hold, cannot fill the window, so
    it moves the median by a few places at most, either way (issue #61: keyed by id, a member
    with 20 ids in half of a node's in-neighbour places filled the window with its own 90x
    distances and nothing was clipped). The distances kept are the
    raw ones (before clipping), so escalating frames do not raise the next radius and frames just
    under any fixed bound end at τ.

    Warm-up: until ``warmup`` distances from at least ``min_senders`` senders are in the window,
    τ is not defined by the window (a first sender cannot set it) but is ``factor`` × the own
    model's norm: two honest models of one network are never farther apart than a few own norms
    (``python -m bench.model_distance``), a member's frame at 90x is.
    """

    def __init__(
        self,
        factor: float,
        window: int = 16,
        per_sender: int = 4,
        warmup: int = 8,
        min_senders: int = 3,
    ) -> None:
        self.factor = factor
        self.window = window
        self.per_sender = per_sender
        self.warmup = warmup
        self.min_senders = min_senders
        #: who stands behind a sender id (the process sets it: with identities, the member whose
        #: credential names it, so that one member's ids share ``per_sender`` places; None: the id)
        self.owner: Callable[[NodeId], Hashable] = _itself
        self._recent: deque[tuple[Hashable, NodeId, float]] = deque()  #: (owner, sender, distance)
        self.clipped = 0  #: models clipped

    def radius(self, own_norm: float) -> float:
        """τ now, for a node whose own model has norm ``own_norm``."""
        senders = {o for o, _, _ in self._recent}
        if len(self._recent) < self.warmup or len(senders) < self.min_senders:
            return self.factor * own_norm
        ranked = sorted(d for _, _, d in self._recent)
        mid = len(ranked) // 2
        median = ranked[mid] if len(ranked) % 2 else 0.5 * (ranked[mid - 1] + ranked[mid])
        return self.factor * median

    def scale(self, sender: NodeId, dist: float, own_norm: float) -> float:
        """The factor ``sender``'s difference is taken at (1: unclipped; 0 for a non-finite
        distance); then the distance joins the window."""
        tau = self.radius(own_norm)
        if math.isfinite(dist):
            key = self._key(sender)
            mine = [i for i, (o, _, _) in enumerate(self._recent) if o == key]
            if len(mine) >= self.per_sender:
                del self._recent[mine[0]]
            self._recent.append((key, sender, dist))
            while len(self._recent) > self.window:
                self._recent.popleft()
        if math.isfinite(dist) and dist <= tau:
            return 1.0
        self.clipped += 1
        return tau / dist if math.isfinite(dist) and dist > 0 else 0.0

    def _key(self, sender: NodeId) -> Hashable:
        owner = self.owner(sender)
        return sender if owner is None else owner

    def state(self) -> list[list[float]]:
        return [[float(s), d] for _, s, d in self._recent]

    def restore(self, state: list[list[float]]) -> None:
        self._recent = deque((self._key(int(s)), int(s), float(d)) for s, d in state[-self.window :])


class NormBand:
    """Where a taken model may move the node's own, bounded by the own model alone (issue #61).

    :class:`ClipRadius` sets its radius from the distances of recent models; a member in half of a
    node's in-neighbour places holds half of that window, so the radius follows its frames (with
    two owners, 4 of the 8 places), and its frames, each at the radius, grow the model's norm (90x
    or escalating frames) or shrink and reverse it (frames at −30x or zero), and the network's
    models follow. ``NormBand`` bounds a taken model θ̃_j (after the clip, if any) by the
    receiver's own θ_i, which a sender cannot steer:

    - its difference from θ_i is at most ``reach`` × ‖θ_i‖ (``reach`` < 1 keeps the merge on θ_i's
      side of the origin: a reversed frame can no longer flip the model);
    - then its norm is moved into [(1 − ``band``)‖θ_i‖, (1 + ``band``)‖θ_i‖] by scaling it whole
      (its direction is kept).

    An honest neighbour's model differs from the own in direction, which the band keeps, and grows
    in norm over training by far less than ``band`` a merge; what a frame can still do is rotate
    the model by at most ``reach`` a merge, which the honest merges between undo.
    """

    def __init__(self, band: float, reach: float = 0.25) -> None:
        if not 0.0 < band < 1.0 or not 0.0 < reach < 1.0:
            raise ValueError(f"a norm band needs 0 < band < 1 and 0 < reach < 1 (got {band}, {reach})")
        self.band = band
        self.reach = reach

    def reach_scale(self, dist: float, own_norm: float) -> float:
        """The factor a difference of ``dist`` is taken at so that it is at most reach × ‖θ_i‖."""
        limit = self.reach * own_norm
        if not math.isfinite(dist) or dist <= limit:
            return 1.0 if math.isfinite(dist) else 0.0
        return limit / dist

    def norm_scale(self, norm: float, own_norm: float) -> float:
        """The factor the whole model of norm ``norm`` is scaled by to lie in the band."""
        if not math.isfinite(norm) or norm <= 0.0 or own_norm <= 0.0:
            return 1.0
        high, low = (1.0 + self.band) * own_norm, (1.0 - self.band) * own_norm
        if norm > high:
            return high / norm
        if norm < low:
            return low / norm
        return 1.0
