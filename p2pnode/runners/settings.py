"""A process's settings: where it listens, whom it joins, its keys, state and load limits.

They are not part of a run (``RunConfig``): they change no number, and no run is keyed by them.
Each field declares its flag once, beside it (as the run's fields do, p2pnode/config.py), with the
commands that offer it; the ``--config`` file holds them in its ``[process]`` and ``[limits]``
tables. ``p2pnode run`` takes them all; ``launch``, ``simulate`` and ``experiment`` the few that
concern them (the cluster key, the memory check).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p2pnode.config import (
    ConfigError,
    changes_from_mapping,
    check_fields,
    config_fields,
    min_check,
    opt,
    replace_paths,
)
from p2pnode.trust.limits import Limits

_RUN = ("run",)


def _file(help: str, commands: tuple[str, ...] = _RUN) -> Any:
    return opt("", help, group="process", commands=commands, metavar="FILE")


@dataclass(frozen=True)
class ProcessConfig:
    """How one process serves, joins, authenticates and keeps its state."""

    listen: str = opt("127.0.0.1:7070", "HOST:PORT to serve on", group="process", commands=_RUN)
    peers: str = opt("", "HOST:PORT,... of other processes (seeds)", group="process", commands=_RUN)
    users: str = opt(
        "",
        "node ids the process hosts, e.g. 0-19,40 (run: default all --nodes; keys issue: the ids its "
        "credential names)",
        group="process",
        commands=("run", "keys"),
    )
    server: bool = opt(False, "also host the FedAvg server node", group="process", commands=_RUN, switch=True)
    cluster_key_file: str = _file(
        "cluster keyring (p2pnode keys new); run: else $P2PNODE_CLUSTER_KEY, else open; launch: for "
        "every process (default: a fresh one)",
        ("run", "launch"),
    )
    identity: str = _file("this process's key and credential (p2pnode keys issue)")
    tls_cert: str = _file("mutual TLS: this process's certificate (PEM)")
    tls_key: str = _file("mutual TLS: its private key (PEM)")
    tls_ca: str = _file("mutual TLS: the cluster CA certificate (PEM)")
    state_dir: str = opt(
        "",
        "checkpoint the nodes here and resume from here",
        group="process",
        commands=_RUN,
        metavar="DIR",
    )
    checkpoint_every: int = opt(
        10, "rounds between checkpoints", group="process", commands=_RUN, check=min_check(1)
    )
    peer_wait: float = opt(
        60.0,
        "seconds to wait at the start for the --peers to answer (a line every 10 s says who is "
        "still missing); then the process gives up",
        group="process",
        commands=_RUN,
        check=min_check(0),
        metavar="SECONDS",
    )
    memory_check: bool = opt(
        True,
        "start even where the estimate says the run will not fit in free memory (cap it from outside, "
        "e.g. a memory cgroup: the estimate errs high, and an uncapped run that does not fit is "
        "OOM-killed or takes the machine down)",
        name="--no-memory-check",
        switch=False,
        group="process",
        commands=("simulate", "launch", "experiment"),
    )
    self_check: bool = opt(
        True,
        "skip the self-check that sets the run against the simulator's runs of the same setting "
        "(3 seeds x 10 rounds in the simulator after the run; p2plab/selfcheck.py)",
        name="--no-self-check",
        switch=False,
        group="process",
        commands=("launch",),
    )
    limits: Limits = field(default_factory=Limits)

    @staticmethod
    def path(value: str) -> Path | None:
        """A file setting as a path (None: not given)."""
        return Path(value) if value else None


def offered(command: str) -> list[tuple[str, Any]]:
    """The settings ``command`` offers, as (dotted path, field)."""
    return [(path, f) for path, f in config_fields(ProcessConfig) if command in f.metadata["flag"].commands]


def settings_from(
    command: str, table: Mapping[str, Any] | None, flags: Mapping[str, Any], source: str = "config"
) -> ProcessConfig:
    """Defaults ← the ``--config`` file's ``[process]``/``[limits]`` tables (``table``) ← ``flags``
    (dotted paths given on the command line), checked. A key ``command`` does not offer is
    refused, naming the commands that do."""
    changes = changes_from_mapping(table or {}, ProcessConfig(), source) if table else {}
    known = {path for path, _ in offered(command)}
    for path in changes:
        if path not in known:
            commands = ("run", "launch", "simulate", "experiment", "keys")
            where = [c for c in commands if path in {p for p, _ in offered(c)}]
            raise ConfigError(
                f"{source}: {path} is a setting of p2pnode {' and '.join(where) or 'run'}, not of {command}"
            )
    changes.update(flags)
    try:
        settings: ProcessConfig = replace_paths(ProcessConfig(), changes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_fields(settings)
    return settings
