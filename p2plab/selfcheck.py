"""A real run checked against the simulator: does the network behave as the same setting does
on the virtual clock, given the delays the real network had?

The simulator's frames take the delays it is configured with (none by default), so with its
defaults PeerSwap's swaps never overlap and never meet a locked node; a real network's take
milliseconds, swaps overlap, and some of them meet a node another swap holds and abort (to be
tried again: PeerSwap's backoff). So the simulator runs the same configuration with the delays
the real run measured: PeerSwap's round trips in ticks (``swap_rtt``, both ends of a frame
halved), drawn from their quantiles (``LinkConfig.delays``). Then the real run's rates per node
and round are set against three seeds' (the run's and the next two):

- view swaps committed, and the share of swaps aborted (PeerSwap);
- refusals other than the ones any start-up has (``starting``, ``no-base``, and whatever was
  refused in the first round, when every node sends its first model at once), by reason.

Those are the invariants: a rate outside the seeds' range by more than a margin that absorbs
small counts (:func:`compare`) means the real network did not do what the protocol does, and the
verdict says "diverged". How the machine kept its tick is read apart from them: the rounds'
stretch (the processes' clocks hold back while they run behind, p2pnode.clock.ElasticClock),
late rounds, and refusals of overload (``busy`` and the like). Where the invariants held but
the machine was slow, the verdict says so with the measured factor and the tick that would hold
(p2pnode.runners.real.hold_tick), and not "diverged".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from p2pcore import roundtrips
from p2pnode.config import RunConfig
from p2pnode.transport.memory import LinkConfig

#: refusals every run has while its nodes start (p2pnode/transport/refusals.py)
START_UP = frozenset({"starting", "no-base"})
#: refusals that mean a node was too loaded to take a frame, or took it too slowly
OVERLOAD = frozenset({"busy", "slow-body", "shed", "overloaded"})
PROBE_ROUNDS = 10  #: the simulator runs this many rounds per seed (fewer if the run had fewer)
SEEDS = 3
QUANTILES = 64  #: the measured delays are drawn from this many quantiles
MIN_TRIPS = 20  #: fewer measured round trips than this: the simulator runs without delays
STRETCHED = 1.1  #: rounds that took this much longer than their ticks are a slow machine's
LATE = 0.05  #: as are late rounds in more than this share of the rounds
#: an aborted share this far above the seeds' highest is a divergence (see :func:`compare`)
ABORT_MARGIN = 0.25
COMMIT_SHARE = 0.7  #: committed swaps below this share of the seeds' lowest are a divergence


@dataclass(frozen=True)
class Rates:
    """One run's figures per node and round."""

    committed: float  #: view swaps committed
    aborted_share: float  #: aborted / tried (0 where none was tried)
    refused: dict[str, float] = field(default_factory=dict)  #: refusals past start-up, by reason
    late: float = 0.0  #: share of rounds that started late
    stretch: float = 1.0  #: wall time over the ticks the slowest process's clock showed

    @property
    def refused_total(self) -> float:
        return sum(self.refused.values())


def rates(summary: Mapping[str, Any]) -> Rates:
    """The rates of a run's summary (a launch's merged one, or a simulation's). Refusals counted
    by the end of the first round (its history's first row, where it has one) are left out with
    the start-up ones."""
    nodes = max(int(summary.get("nodes", 0)), 1)
    rounds = max(int(summary.get("round", 0)), 1)
    per = float(nodes * rounds)
    swaps = summary.get("view_swaps") or {}
    committed, aborted = int(swaps.get("committed", 0)), int(swaps.get("aborted", 0))
    tried = committed + aborted
    history = summary.get("history") or []
    first = history[0].get("rejected") if history and history[0].get("round") == 1 else None
    at_start = first if isinstance(first, dict) and rounds > 1 else {}
    refused = {}
    for k, v in (summary.get("rejected") or {}).items():
        past = int(v) - int(at_start.get(k, 0))
        if k not in START_UP and past > 0:
            refused[k] = past / per
    pace = summary.get("pace") or {}
    return Rates(
        committed=committed / per,
        aborted_share=aborted / tried if tried else 0.0,
        refused=refused,
        late=int(summary.get("late_rounds", 0)) / rounds,
        stretch=float(pace.get("stretch", 1.0)),
    )


def measured_link(summary: Mapping[str, Any]) -> LinkConfig | None:
    """The delays a real run's frames had, for the simulator: half of each PeerSwap round trip
    it measured (``swap_rtt``), as :data:`QUANTILES` quantiles; None with fewer than
    :data:`MIN_TRIPS` round trips (no PeerSwap, or too short a run)."""
    hist = summary.get("swap_rtt")
    if not isinstance(hist, Mapping) or sum(hist.get("counts", ())) < MIN_TRIPS:
        return None
    delays = [0.5 * roundtrips.quantile(hist, (k + 0.5) / QUANTILES) for k in range(QUANTILES)]
    return LinkConfig(delays=tuple(max(0.0, d) for d in delays))


def reference(
    config: RunConfig, rounds: int | None = None, seeds: int = SEEDS, link: LinkConfig | None = None
) -> list[Rates]:
    """What the simulator's runs of ``config`` do over its first ``rounds`` rounds (default
    :data:`PROBE_ROUNDS`, or the run's own if fewer), one :class:`Rates` per seed; ``link``: the
    frames' delays (default: the configuration's)."""
    from p2pnode.runners.sim import Simulation

    probe = min(config.rounds, rounds or PROBE_ROUNDS)
    out = []
    for k in range(seeds):
        sim = Simulation(config.replace(seed=config.seed + k, rounds=probe).validate(), link=link)
        first: dict[str, int] = {}
        for r in range(probe):
            sim.run_round()
            if r == 0:  # the first round's refusals, left out as a real run's are (``rates``)
                for node in sim.host.nodes.values():
                    for why, n in node.counters.rejected.items():
                        first[why] = first.get(why, 0) + n
        out.append(rates({**sim.stats(), "history": [{"round": 1, "rejected": first}]}))
    return out


@dataclass(frozen=True)
class Verdict:
    diverged: bool
    line: str
    findings: tuple[str, ...] = ()
    slow: tuple[str, ...] = ()  #: how the machine fell short of its tick (not a divergence)


def compare(
    real: Rates,
    ref: Sequence[Rates],
    config: RunConfig,
    processes: int = 0,
    delays: str = "",
) -> Verdict:
    """The real run against the simulator's seeds: each invariant outside their range by more
    than the margin is a finding (the run diverged); the machine's pace is read apart.

    Margins: committed swaps below :data:`COMMIT_SHARE` of the seeds' lowest (the protocol's
    own figure: views change at the rate it sets); an aborted share :data:`ABORT_MARGIN` above
    the seeds' highest (an aborted swap is tried again, and the simulator draws each frame's
    delay on its own where a busy process delays all of its frames together, so the real
    network's locks meet more often: on this 2-core machine 11% aborted against the seeds'
    2-5% with the same delays on a quiet machine, 19% against 4-9% beside two busy processes,
    with as many committed); refusals past start-up above the seeds' highest plus 0.01 a
    node-round (one refusal every 100 node-rounds). A slow machine: rounds stretched by more than
    :data:`STRETCHED`, late rounds in more than :data:`LATE` of the rounds, or overload
    refusals past the margin. ``delays``: how the simulator's delays were set, for the line."""
    findings: list[str] = []
    slow: list[str] = []
    tried = any(r.committed > 0 for r in ref)
    if tried:
        top = max(r.aborted_share for r in ref)
        if real.aborted_share > top + ABORT_MARGIN:
            findings.append(f"{real.aborted_share:.0%} of view swaps aborted (simulator at most {top:.0%})")
        low = min(r.committed for r in ref)
        if real.committed < COMMIT_SHARE * low:
            findings.append(
                f"{real.committed:.2f} view swaps committed a node-round (simulator at least {low:.2f})"
            )
    for reason, rate in sorted(real.refused.items(), key=lambda kv: -kv[1]):
        top = max((r.refused.get(reason, 0.0) for r in ref), default=0.0)
        if rate > top + 0.01:
            said = f"'{reason}' refusals {rate:.3f} a node-round (simulator {top:.3f})"
            (slow if reason in OVERLOAD else findings).append(said)
    tick = config.tick_seconds
    if real.stretch > STRETCHED:
        slow.insert(0, f"rounds took {real.stretch:.1f}x their {100 * tick:g} s (100 ticks of {tick:g} s)")
    if real.late > LATE:
        slow.append(f"{real.late:.0%} of rounds started late")
    seeds = len(ref)
    against = f"({seeds} seeds{', ' + delays if delays else ''})"
    if not findings and not slow:
        return Verdict(
            False,
            f"self-check: as the simulator {against}: swaps aborted {real.aborted_share:.0%}, "
            f"{real.refused_total:.3f} refusals past start-up a node-round, "
            f"rounds {real.stretch:.2f}x their tick",
        )
    cores = os.cpu_count() or 1
    more = (
        f", or use more --processes (now {processes}, this machine has {cores} cores)"
        if 0 < processes < cores
        else ""
    )
    from p2pnode.runners.real import hold_tick

    advice = f"--tick-seconds {hold_tick(tick, max(real.stretch, 1.5 if slow else 1.0)):g} would hold{more}"
    if not findings:
        return Verdict(
            False,
            f"self-check: as the simulator {against}, on a slow machine: {'; '.join(slow)}. "
            f"The protocols kept their timing (the run took longer); {advice}, or run less beside it",
            (),
            tuple(slow),
        )
    if slow:
        cause = (
            f"likely cause: the processes could not keep up with {100 * tick:g} s rounds on this "
            f"machine; {advice}, or run less beside them"
        )
    else:
        cause = (
            "likely cause: the network delays or loses messages beyond what this run measured; "
            "raise --tick-seconds"
        )
    return Verdict(
        True,
        f"self-check: this run diverged from the simulator {against}: {'; '.join(findings + slow)}. {cause}",
        tuple(findings),
        tuple(slow),
    )


def summary_check(
    total: Mapping[str, Any],
    config: RunConfig,
    processes: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The self-check of a merged summary (a launch's, a deployment's), as the summary keeps it:
    the verdict, its findings, the simulator's rates per seed and the rounds it ran."""
    probe = min(config.rounds, PROBE_ROUNDS)
    link = measured_link(total)
    delays = "" if link is None else f"with this run's delays: {_delays_text(link)}"
    if progress is not None:
        progress(
            f"self-check: the same setting in the simulator, {SEEDS} seeds x {probe} rounds"
            f"{', ' + delays if delays else ''} ..."
        )
    ref = reference(config, link=link)
    verdict = compare(rates(total), ref, config, processes, delays)
    return {
        "diverged": verdict.diverged,
        "line": verdict.line,
        "findings": list(verdict.findings),
        "slow": list(verdict.slow),
        "simulator": [asdict(r) for r in ref],
        "delays": list(link.delays) if link is not None else None,
        "probe_rounds": probe,
    }


def _delays_text(link: LinkConfig) -> str:
    q = link.delays
    return f"one-way median {q[len(q) // 2]:.2g} ticks, 90% under {q[int(0.9 * len(q))]:.2g}"
