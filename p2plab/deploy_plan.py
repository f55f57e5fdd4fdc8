"""From an Ansible inventory to a deployment plan: which node ids each host runs, in which
processes, on which addresses, with which experiment settings.

Pure: it takes the inventory as ``ansible-inventory --list`` prints it (so INI and YAML inventories
both work) and returns a ``Plan`` or raises ``ConfigError`` naming the host and the variable. The
playbooks under ``deploy/`` compute nothing; they read the plan.

Inventory variables (group ``p2pnode``; see ``deploy/inventory.example.yml``):

- per host: ``p2pnode_nodes`` (how many nodes it hosts, required), ``p2pnode_processes`` (OS
  processes, one systemd instance ``p2pnode@K`` each; default 1), ``p2pnode_port`` (first port,
  process K listens on port + K; default 7070), ``p2pnode_address`` (the address peers reach it
  on; default ``ansible_host``, else the inventory name);
- for the group: ``p2pnode_cluster`` (the cluster label of the generated key), ``p2pnode_settings``
  (the experiment: the keys of a ``--config`` TOML file, e.g. ``rounds``, ``protocol``,
  ``tick_seconds``, ``[attack]`` with ``kind``, ``attackers``, ``colluders``), and
  ``p2pnode_metrics_tls`` (when the processes run with mutual TLS: ``ca_file``, ``cert_file``,
  ``key_file`` of a client certificate for the Prometheus that scrapes them; p2plab/monitoring.py).

Node ids are handed out contiguously in inventory order: the first host's ``p2pnode_nodes`` ids
start at 0, the next host's follow, and ``nodes`` of the experiment is their sum.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from p2plab.monitoring import ScrapeTls, Target
from p2pnode.config import ConfigError, RunConfig, defaults, from_mapping

GROUP = "p2pnode"
DEFAULT_PORT = 7070
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Instance:
    """One ``p2pnode run`` process: systemd unit ``p2pnode@<index>`` on ``host``."""

    host: str
    index: int
    first: int  #: first node id hosted
    last: int  #: last node id hosted (inclusive)
    address: str  #: HOST:PORT it listens on and peers reach it at

    @property
    def users(self) -> str:
        return f"{self.first}-{self.last}"

    @property
    def nodes(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class Plan:
    """Everything the playbooks need, as plain data (``to_vars``)."""

    cluster: str
    config: RunConfig
    settings: dict[str, Any]  #: the experiment settings as given (plus ``nodes``)
    instances: tuple[Instance, ...]
    #: the scraper's client certificate where the processes run with mutual TLS
    metrics_tls: ScrapeTls | None = None

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i.host for i in self.instances))

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(i.address for i in self.instances)

    def on(self, host: str) -> tuple[Instance, ...]:
        return tuple(i for i in self.instances if i.host == host)

    def targets(self) -> list[Target]:
        """Every process's ``/metrics`` for the scraper (p2plab/monitoring.py)."""
        return [Target(i.address, i.host, f"p2pnode@{i.index}") for i in self.instances]

    def config_toml(self) -> str:
        return to_toml(self.settings)

    def to_vars(self) -> dict[str, Any]:
        """The ``p2pnode_plan`` extra variable of the playbooks."""
        hosts: dict[str, Any] = {}
        for host in self.hosts:
            hosts[host] = {
                "instances": [
                    {
                        "index": i.index,
                        "users": i.users,
                        "nodes": i.nodes,
                        "listen": i.address,
                        "peers": ",".join(a for a in self.addresses if a != i.address),
                    }
                    for i in self.on(host)
                ],
            }
        return {
            "cluster": self.cluster,
            "nodes": self.config.nodes,
            "rounds": self.config.rounds,
            "round_seconds": 100 * self.config.tick_seconds,
            "config_toml": self.config_toml(),
            "hosts": hosts,
        }


def plan_from_inventory(inventory: Mapping[str, Any]) -> Plan:
    """The plan for the ``p2pnode`` group of an ``ansible-inventory --list`` document."""
    group = inventory.get(GROUP)
    if not isinstance(group, Mapping) or not group.get("hosts"):
        raise ConfigError(f"the inventory has no hosts in a group named {GROUP!r}")
    hostvars: Mapping[str, Any] = inventory.get("_meta", {}).get("hostvars", {})
    names: list[str] = list(group["hosts"])
    cluster = ""
    settings: dict[str, Any] | None = None
    tls_raw: object = None
    instances: list[Instance] = []
    seen: dict[str, str] = {}
    next_id = 0
    for name in names:
        hv: Mapping[str, Any] = hostvars.get(name, {})
        where = f"inventory host {name}"
        count = _int(hv.get("p2pnode_nodes"), f"{where}: p2pnode_nodes", minimum=1, required=True)
        procs = _int(hv.get("p2pnode_processes", 1), f"{where}: p2pnode_processes", minimum=1)
        if procs > count:
            raise ConfigError(f"{where}: p2pnode_processes {procs} exceeds its p2pnode_nodes {count}")
        port = _int(hv.get("p2pnode_port", DEFAULT_PORT), f"{where}: p2pnode_port", minimum=1)
        if port + procs - 1 > 65535:
            raise ConfigError(f"{where}: ports {port}..{port + procs - 1} exceed 65535")
        address = str(hv.get("p2pnode_address") or hv.get("ansible_host") or name)
        _check_address(address, where)
        host_cluster = str(hv.get("p2pnode_cluster", "p2pnode"))
        host_settings = hv.get("p2pnode_settings", {})
        if not isinstance(host_settings, Mapping):
            raise ConfigError(f"{where}: p2pnode_settings must be a mapping of --config keys")
        host_tls = hv.get("p2pnode_metrics_tls")
        if settings is None:
            cluster, settings, tls_raw = host_cluster, dict(host_settings), host_tls
        elif host_cluster != cluster or dict(host_settings) != settings or host_tls != tls_raw:
            raise ConfigError(
                f"{where}: p2pnode_cluster, p2pnode_settings and p2pnode_metrics_tls must be the "
                "same for every host (set them for the group)"
            )
        share = [round(k * count / procs) for k in range(procs + 1)]
        for k in range(procs):
            addr = f"[{address}]:{port + k}" if ":" in address else f"{address}:{port + k}"
            if addr in seen:
                raise ConfigError(f"{where}: {addr} is also used by {seen[addr]}")
            seen[addr] = name
            first = next_id + share[k]
            instances.append(Instance(name, k, first, next_id + share[k + 1] - 1, addr))
        next_id += count
    assert settings is not None
    if not _NAME.match(cluster):
        raise ConfigError(f"p2pnode_cluster {cluster!r}: letters, digits, '_', '.', '-' (at most 64)")
    if "nodes" in settings and settings["nodes"] != next_id:
        raise ConfigError(
            f"p2pnode_settings.nodes is {settings['nodes']} but the hosts' p2pnode_nodes add up to {next_id}"
        )
    settings = {"nodes": next_id, **{k: v for k, v in settings.items() if k != "nodes"}}
    try:
        config = from_mapping(settings, defaults(daemon=True), source="p2pnode_settings")
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("--", "p2pnode_settings: ", 1)) from None
    text = to_toml(settings)  # checks that every value can be written
    if json.dumps(_loads_toml(text), sort_keys=True) != json.dumps(settings, sort_keys=True):
        raise ConfigError("p2pnode_settings: a value does not survive TOML (use plain numbers and strings)")
    tls = None
    if tls_raw is not None:
        if not isinstance(tls_raw, Mapping):
            raise ConfigError("p2pnode_metrics_tls must be a mapping: ca_file, cert_file, key_file")
        tls = ScrapeTls.from_mapping(tls_raw, "p2pnode_metrics_tls")
    return Plan(cluster, config, settings, tuple(instances), tls)


def to_toml(settings: Mapping[str, Any]) -> str:
    """``settings`` as a ``--config`` TOML file: top-level keys, then one table per section."""
    top = [f"{k} = {_toml_value(v, k)}" for k, v in settings.items() if not isinstance(v, Mapping)]
    lines = top
    for k, v in settings.items():
        if isinstance(v, Mapping):
            lines += ["", f"[{_toml_key(k)}]"]
            for sk, sv in v.items():
                if isinstance(sv, Mapping):
                    raise ConfigError(f"p2pnode_settings.{k}.{sk}: tables nest one level only")
                lines.append(f"{_toml_key(sk)} = {_toml_value(sv, f'{k}.{sk}')}")
    return "\n".join(lines) + "\n"


def _toml_key(key: object) -> str:
    if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", key):
        raise ConfigError(f"p2pnode_settings: {key!r} is not a setting name")
    return key


def _toml_value(v: object, name: str) -> str:
    _toml_key(name.rsplit(".", 1)[-1])
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ConfigError(f"p2pnode_settings.{name}: {v} is not a finite number")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string without '/' escapes is a TOML basic string
    raise ConfigError(f"p2pnode_settings.{name}: {v!r} is neither a number, a string nor true/false")


def _loads_toml(text: str) -> dict[str, Any]:
    import tomllib

    return tomllib.loads(text)


def _int(v: object, what: str, minimum: int, required: bool = False) -> int:
    if v is None and required:
        raise ConfigError(f"{what} is missing (how many nodes the host runs)")
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)  # INI inventories give strings
    if type(v) is not int or v < minimum:
        raise ConfigError(f"{what} must be an integer >= {minimum}, got {v!r}")
    return v


def _check_address(address: str, where: str) -> None:
    try:
        ipaddress.ip_address(address)
        return
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?", address):
        raise ConfigError(f"{where}: {address!r} is neither an IP address nor a host name")
