"""How a process judges the views a PeerSwap swap would hand its nodes (THREAT_MODEL.md
"Its own views").

A member's own build can run whole PeerSwap transactions whose far side is its word (paper 002,
§PeerSwap: a swap hands the partner the initiator's views and the other way round), so the views a
node is handed may name the member's ids where no edge exists: the node then sends to ids that
drop its models and waits for models from in-neighbours that never send. Two bounds, both on what
one other member (the holder of a credential, whatever number of ids it names) may hold:

- **a node's places** (:func:`one_member_bound`): at most five of its six places with views of 3
  (``share`` 0.85, at least one place), so no node is handed views of one member's ids only;
- **the process's places** (:class:`SwapJudge`): over all the process's nodes, a member may hold at
  most its share of the ids, ``p = m / (N - 1)``, plus a margin of standard deviations of a
  binomial count over the process's places (:func:`line_sd`: tighter the larger ``p``), plus one.
  A swap that would lift a member above that is refused; one that lowers or keeps it never is,
  so a process above the line comes back by honest swaps.
  Without it a member that keeps one real neighbour in every claimed view moves the process's
  places toward its own ids five at a time (``takeover-keep`` in ``bench.hostile_members``).

The count of places by member is kept as swaps move views (``PeerSwap.watch``) and counted afresh
every ``recount_every`` judgements, so owners learnt later (a credential first shown after an id
was counted) are not missed for long. The lab installs no judge: a simulated network has no
members, and its numbers do not move.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from statistics import NormalDist

from peer_sampling.peerswap import PeerSwap

#: the share of the places a swap hands a node (its out- and in-view) that one other member's ids
#: may hold: with views of 3, five of six
SWAP_OWNER_SHARE = 0.85
#: the chance, summed over as many members of one's size as the network could hold, that an honest
#: network's count of one member's places crosses its line at a given moment: a member holding a
#: share ``p`` of the ids gets the line at the ``1 - SWAP_CROSS_CHANCE * p`` quantile of a normal
#: count (:func:`line_sd`), so the larger a member, and the fewer members, the tighter its line
SWAP_CROSS_CHANCE = 0.3
#: judgements between two fresh counts of the process's places
RECOUNT_EVERY = 256

OwnerOf = Callable[[int], Hashable | None]


@functools.lru_cache(maxsize=256)
def line_sd(share: float, cross_chance: float = SWAP_CROSS_CHANCE) -> float:
    """How far above its expected count, in standard deviations, a member holding ``share`` of
    the ids may hold a process's places: the normal quantile ``1 - cross_chance * share``.

    One line for all members (two standard deviations, in an earlier version) was either loose where a
    member holds half the ids (2 x 20 nodes: ``takeover-keep`` held A's places naming A at 0.39
    against 0.49 expected) or, tightened, refused honest swaps where a process faces many small
    members (10 x 10 nodes at one deviation: 11% fewer swaps committed). A Bonferroni share of
    ``cross_chance`` across the ``1 / share`` members of that size a network could hold gives
    about one deviation with 2 x 20 (p = 0.51), 1.3 with 3 x 20 and 1.9 with 10 x 10."""
    tail = min(max(cross_chance * share, 1e-9), 0.5)
    return NormalDist().inv_cdf(1.0 - tail)


def one_member_bound(
    owner_of: OwnerOf, places: Sequence[int], share: float = SWAP_OWNER_SHARE
) -> Counter[Hashable]:
    """The places each other member holds among ``places``, or an empty Counter with a None key
    set when one member holds more than ``share`` of them (at least one place is always let)."""
    held = Counter(o for v in places if (o := owner_of(v)) is not None)
    if max(held.values(), default=0) > max(1, int(share * len(places))):
        held[None] = 1  # marks the refusal (no member is None)
    return held


class SwapJudge:
    """The views a swap would hand one of a process's nodes, judged by who holds their ids.

    ``owner_of`` names the member holding an id (None: the process's own nodes, and ids no
    credential seen names); ``ids_held`` how many ids of the network's ``population`` a member's
    credential names (None: unknown, only the per-node bound applies to it)."""

    def __init__(
        self,
        owner_of: OwnerOf,
        ids_held: Callable[[Hashable], int | None],
        population: int,
        share: float = SWAP_OWNER_SHARE,
        margin_sd: float | None = None,
        recount_every: int = RECOUNT_EVERY,
    ) -> None:
        self._owner_of = owner_of
        self._ids_held = ids_held
        self.population = population
        self.share = share
        self.margin_sd = margin_sd
        self.recount_every = recount_every
        self._samplers: Mapping[int, PeerSwap] = {}
        self._owners: dict[int, Hashable | None] = {}
        self.held: Counter[Hashable] = Counter()  #: places of the process's nodes by member
        self.places = 0  #: places of the process's nodes
        self._judged = 0
        self.refused_node = 0  #: swaps refused by the per-node bound
        self.refused_process = 0  #: swaps refused by the process's bound

    def attach(self, samplers: Mapping[int, PeerSwap]) -> None:
        """Judge the swaps of these samplers (a process's PeerSwap nodes) from now on."""
        self._samplers = samplers
        for node, sampler in samplers.items():
            sampler.vet = functools.partial(self.judge, node)
            sampler.watch = self.moved
        self.recount()

    def sizes(self) -> dict[str, int]:
        """Its table's entries (``p2pnode_cache_entries``): one per node id of the population."""
        return {"swap-owners": len(self._owners)}

    def owner(self, node: int) -> Hashable | None:
        if node in self._owners:
            return self._owners[node]
        owner = self._owners[node] = self._owner_of(node)
        return owner

    def _count(self, places: Iterable[int]) -> Counter[Hashable]:
        return Counter(o for v in places if (o := self.owner(v)) is not None)

    def recount(self) -> None:
        """Count the process's places afresh (owners looked up again)."""
        self._owners.clear()
        self.held = Counter()
        self.places = 0
        for sampler in self._samplers.values():
            places = [*sampler.out_view(), *sampler.in_view()]
            self.held.update(self._count(places))
            self.places += len(places)
        self._judged = 0

    def moved(
        self,
        node: int,
        old_out: Sequence[int],
        old_in: Sequence[int],
        new_out: Sequence[int],
        new_in: Sequence[int],
    ) -> None:
        """``PeerSwap.watch``: a swap moved one of the process's nodes."""
        self.held.subtract(self._count([*old_out, *old_in]))
        self.held.update(self._count([*new_out, *new_in]))
        self.places += len(new_out) + len(new_in) - len(old_out) - len(old_in)

    def limit(self, member: Hashable) -> float | None:
        """The most places of this process ``member`` may hold (None: its ids are unknown)."""
        ids = self._ids_held(member)
        if ids is None or self.population < 2:
            return None
        expected = min(1.0, ids / (self.population - 1))
        spread = math.sqrt(self.places * expected * (1.0 - expected))
        margin = line_sd(expected) if self.margin_sd is None else self.margin_sd
        return self.places * expected + margin * spread + 1.0

    def judge(
        self, node: int, far: int, out_view: Sequence[int], in_view: Sequence[int], *, settled: bool = False
    ) -> bool:
        """``PeerSwap.vet`` for ``node``: may it take these views from a swap with ``far``? The
        process's bound is judged before anything is locked (the proposal, the accept), not at a
        settled adopt: the initiator has committed, and the count may have moved since."""
        places = [*out_view, *in_view]
        new = one_member_bound(self.owner, places, self.share)
        if None in new:
            self.refused_node += 1
            return False
        sampler = self._samplers.get(node)
        if sampler is None or settled:
            return True
        self._judged += 1
        if self._judged >= self.recount_every:
            self.recount()
        old = [*sampler.out_view(), *sampler.in_view()]
        change = Counter(new)
        change.subtract(self._count(old))
        far_owner = self.owner(far)
        if far_owner is not None:
            # the process's nodes that named ``node`` name ``far`` after the swap, and those that
            # named ``far`` (now in the handed views) name ``node``
            change[far_owner] += sum(v in self._samplers for v in old if v != far) - sum(
                v in self._samplers for v in places if v != node
            )
        for member, more in change.items():
            if more > 0:
                limit = self.limit(member)
                if limit is not None and self.held[member] + more > limit:
                    self.refused_process += 1
                    return False
        return True
