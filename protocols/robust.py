"""What a gossip node does so that one poisoning member cannot wreck its model (THREAT_MODEL.md).

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
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

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
    it moves the median by a few places at most, either way (keyed by id, a member
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
    """Where a taken model may move the node's own, bounded by the own model alone (THREAT_MODEL.md).

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


_SKETCH_SEED = 61  #: the sketch's signs are fixed (a node's memory survives its restart)
_SIGNS: dict[tuple[str, int], npt.NDArray[np.float32]] = {}


def _signs(name: str, size: int) -> npt.NDArray[np.float32]:
    """The sketch's random sign (±1) for each coordinate of tensor ``name`` (fixed, shared)."""
    found = _SIGNS.get((name, size))
    if found is None:
        rng = np.random.default_rng([_SKETCH_SEED, zlib.crc32(name.encode()), size])
        found = _SIGNS[(name, size)] = np.where(rng.random(size) < 0.5, -1.0, 1.0).astype(np.float32)
    return found


def _fold(flat: npt.NDArray[np.float32], buckets: int) -> npt.NDArray[np.float32]:
    """Coordinate k of ``flat`` summed into bucket k mod ``buckets``."""
    whole = flat.size // buckets * buckets
    out = flat[:whole].reshape(-1, buckets).sum(axis=0) if whole else np.zeros(buckets, np.float32)
    out[: flat.size - whole] += flat[whole:]
    return out


class SteadyPull:
    """Damps one member's models when they keep pulling the own model the same way (THREAT_MODEL.md).

    :class:`NormBand` bounds what one taken model does; a member in half of a node's in-neighbour
    places still moves it, because every frame it sends pulls toward one fixed point (a 90x model,
    sent every round) and half the places outweigh the honest merges between. Honest models pull
    from where each neighbour's own training took it, which changes from one model to the next.
    ``SteadyPull`` keeps, per owner (a member: all the ids its credential names; without
    identities, an id), an average of the directions of the differences it had taken,
    m ← ``memory`` · m + (1 − ``memory``) · u, u = (θ̃_j − θ_i) / ‖θ̃_j − θ_i‖ (θ̃_j as the clip and
    the band left it), and its length c = ‖m‖ (1: every difference one direction; an honest
    owner's stay near 0.6). Above ``limit`` the difference is taken at (1 − c) / (1 − ``limit``),
    down to 0 for a member whose every frame points one way.

    The directions are kept as count-sketches (Charikar, Chen, Farach-Colton 2002) of ``buckets``
    numbers: a fixed random sign per coordinate, coordinate k summed into bucket k mod
    ``buckets``. The sketch is linear, O(model) to compute, and, the signs being independent, the
    inner product of two sketches is that of the two vectors in expectation with a spread of
    about ‖x‖‖y‖/√``buckets``: the length of a sum of sketched directions estimates the length of
    the sum of the directions. The memory is kept for the last ``owners`` owners.

    What it does not stop: a member without identities spreads its frames over its ids, each of
    which pulls the same way less often (keyed by id, a 20-id member's 90x frames were not held);
    a member whose frames change direction is what the band bounds, one frame at a time.
    """

    def __init__(self, limit: float, memory: float = 0.8, buckets: int = 256, owners: int = 64) -> None:
        if not 0.0 < limit < 1.0 or not 0.0 < memory < 1.0 or buckets < 1 or owners < 1:
            raise ValueError(
                f"a steady-pull limit needs 0 < limit < 1, 0 < memory < 1 (got {limit}, {memory})"
            )
        self.limit = limit
        self.memory = memory
        self.buckets = buckets
        self.owners = owners
        #: who stands behind a sender id (the process sets it, as for :class:`ClipRadius`)
        self.owner: Callable[[NodeId], Hashable] = _itself
        self._pulls: OrderedDict[Hashable, npt.NDArray[np.float64]] = OrderedDict()

    def direction(
        self, own: Mapping[str, npt.NDArray[np.float32]], taken: Mapping[str, npt.NDArray[np.float32]]
    ) -> npt.NDArray[np.float64] | None:
        """The sketch of (taken − own) / ‖taken − own‖ over the tensors both have (None: no
        difference, or not finite)."""
        acc = np.zeros(self.buckets)
        square = 0.0
        for name in sorted(taken):
            mine = own.get(name)
            if mine is None:
                continue
            diff = (taken[name] - mine).ravel()
            square += float(np.dot(diff, diff))
            diff *= _signs(name, diff.size)
            acc += _fold(diff, self.buckets)
        if not (math.isfinite(square) and square > 0.0) or not np.all(np.isfinite(acc)):
            return None
        return acc / math.sqrt(square)

    def scale(
        self,
        sender: NodeId,
        own: Mapping[str, npt.NDArray[np.float32]],
        taken: Mapping[str, npt.NDArray[np.float32]],
    ) -> float:
        """The factor ``taken``'s difference from ``own`` enters the merge at (1: as it is); the
        direction joins its owner's memory first."""
        u = self.direction(own, taken)
        if u is None:
            return 1.0
        return self._factor(self._remember(self._key(sender), u))

    def steadiness(self, sender: NodeId) -> float:
        """c = ‖m‖ of ``sender``'s owner now (0 for one not remembered)."""
        m = self._pulls.get(self._key(sender))
        return 0.0 if m is None else float(np.linalg.norm(m))

    def _remember(self, key: Hashable, u: npt.NDArray[np.float64]) -> float:
        m = self._pulls.get(key)
        m = (1.0 - self.memory) * u if m is None else self.memory * m + (1.0 - self.memory) * u
        self._pulls[key] = m
        self._pulls.move_to_end(key)
        while len(self._pulls) > self.owners:
            self._pulls.popitem(last=False)
        return float(np.linalg.norm(m))

    def _factor(self, c: float) -> float:
        if c <= self.limit:
            return 1.0
        return max(0.0, (1.0 - c) / (1.0 - self.limit))

    def _key(self, sender: NodeId) -> Hashable:
        owner = self.owner(sender)
        return sender if owner is None else owner

    def state(self) -> list[list[Any]]:
        """[owner, [m...]] for each remembered owner, oldest first (owners are ids or strings)."""
        return [[k, [float(x) for x in m]] for k, m in self._pulls.items() if isinstance(k, int | str)]

    def restore(self, state: list[list[Any]]) -> None:
        """The memory a checkpoint kept; entries of another sketch size, or not finite, are left
        out (their owners start afresh: damped again once their frames repeat a direction)."""
        self._pulls = OrderedDict()
        for entry in state[-self.owners :]:
            if not isinstance(entry, list | tuple) or len(entry) != 2 or not isinstance(entry[0], int | str):
                continue
            try:
                m = np.asarray(entry[1], dtype=np.float64)
            except (TypeError, ValueError):
                continue
            if m.shape == (self.buckets,) and np.all(np.isfinite(m)):
                self._pulls[entry[0]] = m
