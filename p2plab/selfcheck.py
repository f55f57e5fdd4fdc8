"""A real run checked against the simulator (issue #63): does the network behave as the same
setting does on the virtual clock?

The simulator delivers every message within its configured delays and never falls behind, so
what it commits is what the protocol does when the machines keep up. After a launch, the same
configuration runs in the simulator for a few rounds with three seeds (the run's and the next
two), and the real run's rates per node and round are set against theirs:

- view swaps committed, and the share of swaps aborted (PeerSwap);
- refusals other than the ones any start-up has (``starting``, ``no-base``), by reason;
- late rounds (a process that started a round more than half a round late; the simulator has
  none by construction).

A rate counts as diverged when it is outside the seeds' range by more than a margin that
absorbs small counts (:func:`compare`). The verdict is one line with the likely cause and the
flag that helps: most divergence on one machine is processes that cannot keep up with their
rounds (``--tick-seconds``, ``--processes``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from p2pnode.config import RunConfig

#: refusals every run has while its nodes start (p2pnode/refusals.py)
START_UP = frozenset({"starting", "no-base"})
#: refusals that mean a node was too loaded to take a frame, or took it too slowly
OVERLOAD = frozenset({"busy", "slow-body", "shed", "overloaded"})
PROBE_ROUNDS = 10  #: the simulator runs this many rounds per seed (fewer if the run had fewer)
SEEDS = 3


@dataclass(frozen=True)
class Rates:
    """One run's figures per node and round."""

    committed: float  #: view swaps committed
    aborted_share: float  #: aborted / tried (0 where none was tried)
    refused: dict[str, float] = field(default_factory=dict)  #: refusals past start-up, by reason
    late: float = 0.0  #: share of rounds that started late

    @property
    def refused_total(self) -> float:
        return sum(self.refused.values())


def rates(summary: Mapping[str, Any]) -> Rates:
    """The rates of a run's summary (a launch's merged one, or a simulation's)."""
    nodes = max(int(summary.get("nodes", 0)), 1)
    rounds = max(int(summary.get("round", 0)), 1)
    per = float(nodes * rounds)
    swaps = summary.get("view_swaps") or {}
    committed, aborted = int(swaps.get("committed", 0)), int(swaps.get("aborted", 0))
    tried = committed + aborted
    refused = {k: v / per for k, v in (summary.get("rejected") or {}).items() if k not in START_UP and v}
    return Rates(
        committed=committed / per,
        aborted_share=aborted / tried if tried else 0.0,
        refused=refused,
        late=int(summary.get("late_rounds", 0)) / rounds,
    )


def reference(config: RunConfig, rounds: int | None = None, seeds: int = SEEDS) -> list[Rates]:
    """What the simulator's runs of ``config`` do over its first ``rounds`` rounds (default
    :data:`PROBE_ROUNDS`, or the run's own if fewer), one :class:`Rates` per seed."""
    from p2pnode.sim import Simulation

    probe = min(config.rounds, rounds or PROBE_ROUNDS)
    out = []
    for k in range(seeds):
        sim = Simulation(config.replace(seed=config.seed + k, rounds=probe).validate())
        for _ in range(probe):
            sim.run_round()
        out.append(rates(sim.stats()))
    return out


@dataclass(frozen=True)
class Verdict:
    diverged: bool
    line: str
    findings: tuple[str, ...] = ()


def compare(real: Rates, ref: Sequence[Rates], config: RunConfig, processes: int = 0) -> Verdict:
    """The real run against the simulator's seeds: each figure outside their range by more
    than the margin is a finding; with any, the line names the likely cause and the flag.

    Margins: an aborted share 10 points above the seeds' highest; committed swaps below half
    the seeds' lowest; refusals past start-up above the seeds' highest plus 0.01 a node-round
    (one refusal every 100 node-rounds); late rounds in more than 5% of the rounds."""
    findings: list[str] = []
    tried = any(r.committed > 0 for r in ref)
    if tried:
        top = max(r.aborted_share for r in ref)
        if real.aborted_share > top + 0.10:
            findings.append(f"{real.aborted_share:.0%} of view swaps aborted (simulator at most {top:.0%})")
        low = min(r.committed for r in ref)
        if real.committed < 0.5 * low:
            findings.append(
                f"{real.committed:.2f} view swaps committed a node-round (simulator at least {low:.2f})"
            )
    overload = 0.0
    for reason, rate in sorted(real.refused.items(), key=lambda kv: -kv[1]):
        top = max((r.refused.get(reason, 0.0) for r in ref), default=0.0)
        if rate > top + 0.01:
            findings.append(f"'{reason}' refusals {rate:.3f} a node-round (simulator {top:.3f})")
            if reason in OVERLOAD:
                overload += rate
    if real.late > 0.05:
        findings.append(f"{real.late:.0%} of rounds started late")
    seeds = len(ref)
    if not findings:
        return Verdict(
            False,
            f"self-check: as the simulator ({seeds} seeds): swaps aborted {real.aborted_share:.0%}, "
            f"{real.refused_total:.3f} refusals past start-up a node-round, "
            f"{real.late:.0%} of rounds late",
        )
    tick = config.tick_seconds
    if real.late > 0.05 or overload > 0 or (tried and real.aborted_share > 0.10):
        cores = os.cpu_count() or 1
        more = (
            f", or use more --processes (now {processes}, this machine has {cores} cores)"
            if 0 < processes < cores
            else ""
        )
        cause = (
            f"likely cause: the processes could not keep up with {100 * tick:g} s rounds on this "
            f"machine; raise --tick-seconds (e.g. {2 * tick:g}){more}, or run less beside them"
        )
    else:
        cause = "likely cause: the network delays messages beyond the simulator's; raise --tick-seconds"
    return Verdict(
        True,
        f"self-check: this run diverged from the simulator ({seeds} seeds): {'; '.join(findings)}. {cause}",
        tuple(findings),
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
    if progress is not None:
        progress(f"self-check: the same setting in the simulator, {SEEDS} seeds x {probe} rounds ...")
    ref = reference(config)
    verdict = compare(rates(total), ref, config, processes)
    return {
        "diverged": verdict.diverged,
        "line": verdict.line,
        "findings": list(verdict.findings),
        "simulator": [asdict(r) for r in ref],
        "probe_rounds": probe,
    }
