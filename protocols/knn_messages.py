"""Messages of the peer-to-peer KNN service (protocols/knn.py; paper 003 run by its users)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KnnProbe:
    """A querier's own profile, shown to a candidate neighbour so that it can say how similar the
    two are (003 eq. 2's cosine over co-rated items): item ids ascending and their ratings."""

    items: tuple[int, ...]
    ratings: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class KnnProfile:
    """A candidate's answer to a probe: the cosine similarity of the two profiles, how many items
    both rated, and the ids (never the ratings) of the items it rated, by which the querier knows
    whom to ask for an item and estimates item popularity for Expect (eq. 5). With ranked
    candidates, ``near``: the ids of the candidate's own most similar peers, for the querier to
    probe next (empty otherwise)."""

    sim: float
    co: int
    items: tuple[int, ...]
    near: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class KnnAsk:
    """Query ``query`` of the sender wants this node's rating of ``item`` (eq. 1: one neighbour's
    part of a prediction). Answering it is one use of this node's data (DataUsage, eq. 15)."""

    query: int
    item: int


@dataclass(frozen=True, slots=True)
class KnnAnswer:
    """The answer to a :class:`KnnAsk`: the rating, through randomized response once the
    answering node is past τ (eq. 7-8), or None where it declines (it did not rate the item, or
    the querier asks faster than its allowance)."""

    query: int
    item: int
    rating: float | None


KnnMessage = KnnProbe | KnnProfile | KnnAsk | KnnAnswer
