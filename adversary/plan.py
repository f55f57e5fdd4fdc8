"""Who attacks whom in a run: adversary placement, targets and ground truth (CIA paper §IV-A).

Settings (evaluation as §V-C):

- FedAvg (Algorithm 1): the server is the adversary. With no explicit target it plays every
  target at once: V_target = each user's training items, that user excluded from C and Ĉ.
- Gossip, single adversaries (Algorithm 2): ``attackers = "all"`` makes every node an adversary
  with its own training items as V_target (itself excluded); or a list of node ids.
- Gossip, colluders: ``colluder_groups`` disjoint groups of ``colluders × N`` randomly placed
  nodes; each group is one adversary with one V_target (the first member's training items, or the
  explicit target), all members excluded. The group's accuracy is read from its first member's
  observer, which folds in everything the group saw. With ``multicast = "v"`` every member keeps
  its own v_u and multicasts it to all the others (Algorithm 2 line 14 as written); with
  ``multicast = "theta"`` the others are forwarders that send the received Θ_u to the first member
  only and keep no attack state: the read observer then folds exactly what a multicast to every
  member would have given it, at a fraction of the memory and traffic.

An explicit target (resolved by the caller from item ids or a genre) replaces the per-adversary
one. The plan is pure: the caller passes every user's training items and the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from adversary.community import UserItems, true_community
from learning.params import Index


class PlanError(ValueError):
    """The attack settings do not describe a valid placement; the message names the setting."""


@dataclass(frozen=True)
class PlanSettings:
    """The settings a placement depends on (a subset of the run's configuration)."""

    nodes: int  #: users, node ids 0..nodes-1 (the FedAvg server is ``nodes``)
    seed: int  #: the run's seed: colluder placement draws from it
    fedavg: bool  #: the server is the adversary (Algorithm 1)
    target_k: int  #: K, the size of the community to find
    attackers: str = "all"  #: gossip: "all" or node ids "3,17"
    colluders: float = 0.0  #: share of nodes in each colluding group (0: none)
    colluder_groups: int = 1  #: disjoint colluding groups
    multicast: str = "theta"  #: "theta": forwarders send Θ_u to the reader; "v": Algorithm 2


@dataclass
class AdversarySpec:
    """One adversarial node: its targets, who is excluded per target, its colluding partners,
    and which of its targets are scored (with their true community C)."""

    node_id: int
    targets: list[Index]
    exclude: list[set[int]]
    partners: tuple[int, ...] = ()  #: colluders whose multicasts it takes
    evaluated: list[tuple[int, Index]] = field(default_factory=list)
    send_to: tuple[int, ...] | None = None  #: where its observations go (None: every partner)
    forwarder: bool = False  #: forwards Θ_u to ``send_to`` and keeps no observer


@dataclass
class AttackPlan:
    adversaries: dict[int, AdversarySpec]
    k: int
    n_users: int
    explicit: bool
    table: UserItems  #: every user's training items (ground truth, MIA precision)


def attacker_ids(attackers: str, n: int) -> list[int]:
    """``"all"`` or a comma-separated list of node ids in [0, n)."""
    if attackers == "all":
        return list(range(n))
    try:
        ids = sorted({int(x) for x in attackers.split(",") if x.strip()})
    except ValueError:
        raise PlanError(f"attackers: {attackers!r} is not 'all' or a list of node ids") from None
    if not ids or min(ids) < 0 or max(ids) >= n:
        raise PlanError(f"attackers: node ids must be in [0, {n})")
    return ids


def colluder_groups(nodes: int, seed: int, share: float, groups: int) -> list[list[int]]:
    """``groups`` disjoint groups of ``max(2, round(share × nodes))`` nodes drawn from the seed;
    each group's first member is its read member (the CIA's and attribute inference's alike)."""
    size = max(2, round(share * nodes))
    perm = np.random.default_rng([seed, 0xC011]).permutation(nodes)
    return [[int(x) for x in perm[g * size : (g + 1) * size]] for g in range(groups)]


def make_plan(
    settings: PlanSettings, own: Sequence[Index], n_items: int, fixed: Index | None = None
) -> AttackPlan:
    """Place the adversaries. ``own[u]`` is user u's training items; ``fixed`` an explicit target."""
    s = settings
    n = s.nodes
    table = UserItems(list(own), n_items)

    def truth(target: Index, exclude: set[int]) -> Index:
        return true_community(target, table, n_items, s.target_k, sorted(exclude))

    specs: dict[int, AdversarySpec] = {}
    if s.fedavg:
        sid = n  # the server
        if fixed is not None:
            specs[sid] = AdversarySpec(sid, [fixed], [set()], evaluated=[(0, truth(fixed, set()))])
        else:
            excl = [{u} for u in range(n)]
            ev = [(u, truth(own[u], {u})) for u in range(n)]
            specs[sid] = AdversarySpec(sid, list(own), excl, evaluated=ev)
    elif s.colluders:
        forward = s.multicast == "theta"
        for group in colluder_groups(n, s.seed, s.colluders, s.colluder_groups):
            target = fixed if fixed is not None else own[group[0]]
            members = set(group)
            c = truth(target, members)
            reader = group[0]
            for rank, m in enumerate(group):
                if rank == 0:
                    send = () if forward else None
                    specs[m] = AdversarySpec(m, [target], [members], tuple(group), [(0, c)], send)
                elif forward:
                    specs[m] = AdversarySpec(m, [target], [members], (), [], (reader,), forwarder=True)
                else:
                    specs[m] = AdversarySpec(m, [target], [members], tuple(group), [])
    else:
        for u in attacker_ids(s.attackers, n):
            target = fixed if fixed is not None else own[u]
            specs[u] = AdversarySpec(u, [target], [{u}], evaluated=[(0, truth(target, {u}))])
    return AttackPlan(specs, s.target_k, n, fixed is not None, table)
