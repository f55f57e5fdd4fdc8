"""Cyclon shuffle (Voulgaris et al., 2005) for open membership bootstrapped from seed addresses.

Each node keeps a cache of at most ``capacity`` entries (node id, address, age). Once per
``period_ticks`` it ages every entry, takes the oldest peer q out of the cache and sends q a random
subset of ``shuffle_length - 1`` entries plus itself at age 0. q answers with up to
``shuffle_length`` of its own entries and merges what it got; p merges the answer. Merging fills
empty slots first, then replaces the entries that were sent. A peer that cannot be reached is
simply not put back, which is Cyclon's failure detection; a node whose cache runs dry falls back
on its seeds. A reply is taken only from a peer this node is shuffling with, and only the first
entry per id counts.

Relayed entries are weighed by who vouches for them (THREAT_MODEL.md): when the process says who stands
behind each sender (:attr:`Cyclon.owner`: with identities the member whose credential names it),
the entries one owner relayed hold at most ``max(1, capacity // 2)`` of the cache, and a node
takes one owner's shuffle requests at the rate an honest owner's come, one a period on average
(``request_burst`` at once; every node starts one shuffle a period, so a node is asked about
once a period in all, by each owner for its share of that): a member's shuffles, however many of
its ids send them, then steer a node's cache no more than its honest nodes' would. The lab sets
no owner, and nothing is weighed.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from p2pcore.effects import Effect, Learned, NodeId, Send, SetTimer
from peer_sampling.base import PeerSampler
from peer_sampling.messages import CyclonEntry, Leave, ShuffleReply, ShuffleRequest

SHUFFLE_TIMER = "ps:shuffle"


@dataclass(frozen=True)
class CyclonConfig:
    """Cache capacity (the out-view size), shuffle length and period."""

    capacity: int = 3
    shuffle_length: int = 0  # 0: ceil(capacity / 2) + 1
    period_ticks: float = 100.0
    #: entries older than this many shuffles are dropped: a node that left (or crashed) makes no
    #: new entry of itself, and every copy of its old ones ages one per round wherever it is, so
    #: it is out of every live cache within max_age + 2 rounds; live nodes renew theirs each round
    max_age: int = 10
    #: shuffle requests one owner (a member, :attr:`Cyclon.owner`) may have this node take at once;
    #: it earns one a period back
    request_burst: float = 4.0

    @property
    def length(self) -> int:
        return self.shuffle_length or (self.capacity + 1) // 2 + 1


def _nobody(sender: NodeId) -> Hashable:
    return None


class Cyclon(PeerSampler):
    """A node's Cyclon cache state machine."""

    def __init__(
        self,
        node_id: NodeId,
        address: str,
        seeds: Sequence[tuple[NodeId, str]],
        config: CyclonConfig = CyclonConfig(),
    ) -> None:
        self.node_id = node_id
        self.address = address
        self.config = config
        self.seeds = [(n, a) for n, a in seeds if n != node_id]
        self.cache: dict[NodeId, tuple[str, int]] = {}
        self._sent: dict[NodeId, list[NodeId]] = {}
        self.ignored = 0  #: replies to no shuffle this node started
        #: who stands behind a sender (the process sets it: the member whose credential names it,
        #: None for its own nodes); None for every sender by default: no entry is weighed
        self.owner: Callable[[NodeId], Hashable] = _nobody
        #: the owner that relayed each cache entry taken second hand (entries it holds only)
        self._voucher: dict[NodeId, Hashable] = {}
        self.unvouched = 0  #: relayed entries not taken: their voucher's share of the cache was full
        self._asked: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()  #: owner: (credit, at)
        self.unheard = 0  #: shuffle requests not taken: their owner asked faster than one a period
        for n, a in self.seeds[: config.capacity]:
            self.cache[n] = (a, 0)

    def out_view(self) -> tuple[NodeId, ...]:
        return tuple(sorted(self.cache))

    def state(self) -> dict[str, Any]:
        return {
            "cache": [[n, a, age] for n, (a, age) in sorted(self.cache.items())],
            "seeds": [[n, a] for n, a in self.seeds],
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.cache = {int(n): (str(a), int(age)) for n, a, age in state["cache"]}
        self.seeds = [(int(n), str(a)) for n, a in state["seeds"]]
        self._sent = {}
        self._voucher = {}

    def add_seeds(self, seeds: Sequence[tuple[NodeId, str]]) -> None:
        """Contacts given after construction (a real process's peers at bootstrap, a node coming
        back after churn): the freshest come first in the seed list, which the node falls back on
        when its cache runs dry, and fill the cache's free slots."""
        given = [(n, a) for n, a in dict(seeds).items() if n != self.node_id]
        if given:  # rotate so that nodes given the same seed list start from different seeds
            k = self.node_id % len(given)
            given = given[k:] + given[:k]
        ids = {n for n, _ in given}
        self.seeds = given + [(n, a) for n, a in self.seeds if n not in ids]
        for n, a in self.seeds:
            if len(self.cache) >= self.config.capacity:
                break
            self.cache.setdefault(n, (a, 0))

    def away(self, ticks: float) -> None:
        """Back after ``ticks`` offline: every entry ages by the shuffles missed, and those past
        ``max_age`` go, so a returning node does not bring back peers that left meanwhile."""
        missed = math.ceil(ticks / self.config.period_ticks)  # at least the shuffles it missed
        if missed > 0:
            limit = self.config.max_age
            self.cache = {n: (a, age + missed) for n, (a, age) in self.cache.items() if age + missed <= limit}
        self._sent = {}

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        first = now + rng.uniform(0, self.config.period_ticks)
        return [SetTimer(SHUFFLE_TIMER, first)]

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        if key != SHUFFLE_TIMER:
            return []
        effects: list[Effect] = [SetTimer(SHUFFLE_TIMER, now + self.config.period_ticks)]
        if not self.cache:
            effects += self._reseed()
        if not self.cache:
            return effects
        limit = self.config.max_age
        self.cache = {n: (a, age + 1) for n, (a, age) in self.cache.items() if age + 1 <= limit}
        if not self.cache:
            return effects
        oldest = max(sorted(self.cache), key=lambda n: self.cache[n][1])
        del self.cache[oldest]
        others = sorted(self.cache)
        chosen = rng.sample(others, min(len(others), self.config.length - 1))
        self._sent[oldest] = chosen
        entries = [(self.node_id, self.address, 0), *((n, *self.cache[n]) for n in chosen)]
        effects.append(Send(oldest, ShuffleRequest(tuple(entries))))
        return effects

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        match message:
            case ShuffleRequest(entries=entries):
                if not self._heard(self.owner(sender), now):
                    self.unheard += 1  # no answer and nothing merged, as for a request lost
                    return []
                others = sorted(n for n in self.cache if n != sender)
                chosen = rng.sample(others, min(len(others), self.config.length))
                reply = tuple((n, *self.cache[n]) for n in chosen)
                return [Send(sender, ShuffleReply(reply)), *self._merge(entries, chosen, sender)]
            case Leave():
                self.cache.pop(sender, None)
                self._sent.pop(sender, None)
                self.failures.pop(sender, None)
                return []
            case ShuffleReply(entries=entries):
                if sender not in self._sent:  # a reply to no shuffle of ours: ignored
                    self.ignored += 1
                    return []
                return self._merge(entries, self._sent.pop(sender), sender)
        return []

    def _heard(self, owner: Hashable, now: float) -> bool:
        """Whether a shuffle request of ``owner`` is taken now: one a period on average, at most
        ``request_burst`` at once (a token bucket per owner, the last 1,024 owners)."""
        if owner is None:
            return True
        burst = self.config.request_burst
        credit, at = self._asked.get(owner, (burst, now))
        credit = min(burst, credit + max(0.0, now - at) / self.config.period_ticks)
        taken = credit >= 1.0
        self._asked[owner] = (credit - 1.0 if taken else credit, now)
        self._asked.move_to_end(owner)
        while len(self._asked) > 1024:
            self._asked.popitem(last=False)
        return taken

    def leave(self) -> list[Effect]:
        """Leaving for good: tell the peers in the cache (they drop this node at once; nodes
        holding relayed entries drop them by age, within ``max_age`` + 2 rounds)."""
        return [Send(n, Leave()) for n in sorted(self.cache)]

    def on_unreachable(self, peer: NodeId, now: float, rng: random.Random) -> list[Effect]:
        self.cache.pop(peer, None)
        self._sent.pop(peer, None)
        self.failures.pop(peer, None)  # out of the cache: a later shuffle may bring it back afresh
        if any(n == peer for n, _ in self.seeds):  # a seed that failed is tried last
            self.seeds = [s for s in self.seeds if s[0] != peer] + [s for s in self.seeds if s[0] == peer]
        return self._reseed() if not self.cache else []

    def _reseed(self) -> list[Effect]:
        effects: list[Effect] = []
        for n, a in self.seeds[: self.config.capacity]:
            self.cache[n] = (a, 0)
            effects.append(Learned(n, a))
        return effects

    def _merge(self, entries: Sequence[CyclonEntry], sent: list[NodeId], sender: NodeId) -> list[Effect]:
        """Fold received entries into the cache. An entry naming the sender is the sender's own
        address (first hand); entries about others are relayed. Only the first entry per id counts."""
        replaceable = [n for n in sent if n in self.cache]
        effects: list[Effect] = []
        seen: set[NodeId] = set()
        voucher = self.owner(sender)
        if self._voucher:
            self._voucher = {n: v for n, v in self._voucher.items() if n in self.cache}
        share = max(1, self.config.capacity // 2)
        for node, address, age in entries:
            if node == self.node_id or node in seen or age > self.config.max_age:
                continue
            seen.add(node)
            if node == sender:
                effects.append(Learned(node, address, first_hand=True))
            if node in self.cache:
                if age < self.cache[node][1]:
                    self.cache[node] = (address, age)
                if node == sender:
                    self._voucher.pop(node, None)  # vouched for by itself now
                continue
            relayed = node != sender and voucher is not None
            if relayed and sum(v == voucher for v in self._voucher.values()) >= share:
                self.unvouched += 1
                continue
            if len(self.cache) >= self.config.capacity:
                if not replaceable:
                    continue
                gone = replaceable.pop()
                del self.cache[gone]
                self._voucher.pop(gone, None)
            self.cache[node] = (address, age)
            if relayed:
                self._voucher[node] = voucher
            else:
                self._voucher.pop(node, None)
            if node != sender:
                effects.append(Learned(node, address))
        return effects
