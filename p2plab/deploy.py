"""``p2pnode deploy ACTION -i INVENTORY``: run an experiment on a LAN testbed through Ansible.

The controller (this machine) reads the inventory with ``ansible-inventory``, turns it into a
plan (``p2pnode.deploy_plan``), prepares what the hosts need (a wheelhouse of the package and every
dependency, the dataset, a cluster key) in the work folder ``--out``, and runs the playbook of the
action from ``deploy/playbooks/`` with the plan as extra variables. The hosts run the nodes as
systemd template units ``p2pnode@K`` (``deploy/files/p2pnode@.service``).

Actions: ``check`` (print the plan), ``install``, ``start [--fresh]``, ``status``, ``watch``
(``p2pnode metrics --follow`` over every process), ``stop``, ``collect`` (results, journals and unit
states into ``OUT/collected``, merged into ``summary.json`` and ``report.md``; ``--faults FILE``
adds a fault timeline), ``uninstall``, ``monitoring`` (a Prometheus scrape configuration of every
process and a Grafana dashboard in ``OUT/monitoring``; ``install`` writes them too).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from p2plab.deploy_plan import Plan, plan_from_inventory
from p2pnode.config import ConfigError
from p2pnode.data import atomic
from p2pnode.data.atomic import write_text
from p2pnode.trust.auth import Keyring, load_keyring, save_keyring
from p2pnode.trust.identity import Authority, load_authority, load_identity, save_authority, save_identity

ACTIONS = ("check", "install", "start", "status", "watch", "stop", "collect", "uninstall", "monitoring")
#: the actions that run on the controller alone (no playbook)
LOCAL_ACTIONS = ("check", "watch", "monitoring")
TORCH = "2.13.0"
ROOT = Path(__file__).resolve().parents[1]
DEPLOY_DIR = ROOT / "deploy"


def deploy_dir() -> Path:
    if not (DEPLOY_DIR / "playbooks").is_dir():
        raise ConfigError(
            f"{DEPLOY_DIR}/playbooks not found: the deploy ships with the source tree; "
            "run p2pnode deploy from a checkout (pip install -e '.[deploy]')"
        )
    return DEPLOY_DIR


def ansible_tool(name: str) -> str:
    """``ansible-playbook`` or ``ansible-inventory``: next to this Python first, then on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise ConfigError(f"{name} not found: install the deploy extra (pip install -e '.[deploy]')")
    return found


def read_inventory(inventory: Path) -> Plan:
    """The plan of an inventory file, via ``ansible-inventory --list``."""
    if not inventory.exists():
        raise ConfigError(f"inventory {inventory} does not exist")
    proc = subprocess.run(
        [ansible_tool("ansible-inventory"), "-i", str(inventory), "--list"],
        capture_output=True,
        text=True,
        env=_ansible_env(),
    )
    if proc.returncode != 0:
        raise ConfigError(f"inventory {inventory}: {proc.stderr.strip() or 'ansible-inventory failed'}")
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise ConfigError(f"inventory {inventory}: ansible-inventory printed no JSON") from None
    return plan_from_inventory(data)


def run_action(
    action: str,
    inventory: Path,
    out: Path | None,
    *,
    fresh: bool = False,
    faults: Path | None = None,
    wait: float = 0.0,
    key_file: Path | None = None,
    authority_file: Path | None = None,
    interval: float = 2.0,
    count: int = 0,
    say: Callable[[str], None] = print,
) -> int:
    """Carry out one action against the hosts of ``inventory``; returns the exit status.

    ``out`` is the controller's work folder (default ``deploy-runs/CLUSTER``): the plan handed to
    Ansible, the wheelhouse and key of ``install``, and what ``status`` and ``collect`` fetch.
    """
    plan = read_inventory(inventory)
    if faults is not None:
        load_faults(faults)  # a bad fault log fails before any host is touched
    if action == "check":
        say(describe(plan))
        return 0
    if action == "watch":
        from p2plab.follow import follow

        return follow(list(plan.addresses), interval, False, say, count)
    out = out or Path("deploy-runs") / plan.cluster
    out.mkdir(parents=True, exist_ok=True)
    if action in ("monitoring", "install"):
        say(write_monitoring_files(plan, out / "monitoring"))
        if action == "monitoring":
            return 0
    extra: dict[str, Any] = {"p2pnode_plan": plan.to_vars(), "p2pnode_out": str(out.resolve())}
    if action == "install":
        extra["p2pnode_artifacts"] = prepare_artifacts(plan, out, key_file, say, authority_file)
    if action == "start":
        extra["p2pnode_fresh"] = fresh
        write_text(out / "started.json", json.dumps({"time": time.time(), "fresh": fresh}))
    if action == "status":
        shutil.rmtree(out / "status", ignore_errors=True)
        (out / "status").mkdir()
    staging = out / "collected.partial"  # a failed collect leaves the last good one in place
    if action == "collect":
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()  # exists even when no host has anything to fetch
        extra["p2pnode_wait"] = wait
        extra["p2pnode_collect_into"] = str(staging.resolve())
    code, output = playbook(action, inventory, out, extra, quiet=action == "status")
    if code != 0:
        if output:
            say(output[-4000:])
        say(f"p2pnode deploy {action}: ansible-playbook exited with {code}")
        if action == "collect":
            say(f"p2pnode deploy collect: what was fetched is in {staging}; {out / 'collected'} is unchanged")
        return code
    if action == "status":
        say(status_table(plan, out / "status"))
    if action == "collect":
        shutil.rmtree(out / "collected", ignore_errors=True)
        staging.rename(out / "collected")
        started = out / "started.json"
        since = json.loads(started.read_text())["time"] if started.exists() else None
        report = collect_report(plan, out / "collected", faults, since)
        say(report)
    return 0


def write_monitoring_files(plan: Plan, folder: Path) -> str:
    """The inventory's Prometheus scrape configuration and Grafana dashboard; how to use them."""
    from p2plab.monitoring import write_monitoring

    files = write_monitoring(
        folder, plan.cluster, plan.targets(), 100 * plan.config.tick_seconds, plan.metrics_tls
    )
    names = ", ".join(str(p.relative_to(folder)) for p in files)
    return (
        f"monitoring: {names} in {folder} ({len(plan.instances)} processes"
        + (", scraped over mutual TLS" if plan.metrics_tls else "")
        + f"); run prometheus --config.file={folder / 'prometheus.yml'}, and give Grafana "
        "grafana/datasource.yml (provisioning/datasources) and import grafana/dashboard.json"
    )


def playbook(
    action: str, inventory: Path, out: Path, extra: dict[str, Any], quiet: bool = False
) -> tuple[int, str]:
    """Run the action's playbook; with ``quiet`` its output is kept (and shown on failure)."""
    vars_file = out / "plan.json"
    write_text(vars_file, json.dumps(extra, indent=1), mode=0o600)
    cmd = [
        ansible_tool("ansible-playbook"),
        "-i",
        str(inventory),
        "-e",
        f"@{vars_file}",
        str(deploy_dir() / "playbooks" / f"{action}.yml"),
    ]
    if quiet:
        proc = subprocess.run(cmd, env=_ansible_env(), capture_output=True, text=True)
        return proc.returncode, proc.stdout + proc.stderr
    return subprocess.run(cmd, env=_ansible_env()).returncode, ""


def _ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    cfg = DEPLOY_DIR / "ansible.cfg"
    if cfg.exists():
        env.setdefault("ANSIBLE_CONFIG", str(cfg))
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    return env


def describe(plan: Plan) -> str:
    c = plan.config
    lines = [
        f"cluster {plan.cluster}: {c.nodes} nodes, {c.rounds} rounds of {100 * c.tick_seconds:g} s, "
        f"{c.protocol} on {c.sampling} views, {len(plan.hosts)} hosts, {len(plan.instances)} processes",
        f"{'host':<16} {'unit':<11} {'nodes':>6}  {'ids':<12} address",
    ]
    for i in plan.instances:
        lines.append(f"{i.host:<16} p2pnode@{i.index:<3} {i.nodes:>6}  {i.users:<12} {i.address}")
    lines += ["", "experiment settings (/etc/p2pnode/config.toml):", plan.config_toml().rstrip()]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# install: what the controller prepares


def prepare_artifacts(
    plan: Plan,
    out: Path,
    key_file: Path | None,
    say: Callable[[str], None],
    authority_file: Path | None = None,
) -> dict[str, Any]:
    """Wheelhouse tarball, dataset folder, cluster key and process identities for the install
    playbook. Without ``key_file`` a keyring and a cluster authority it trusts are generated in
    ``out`` (once), so every process speaks only for its own nodes."""
    from p2pnode.data.datasets import ML100K, dataset_path, default_data_dir

    version = _version()
    # $P2PNODE_WHEELHOUSE lets several work folders share the downloads (torch alone is 190 MB)
    wheelhouse = Path(os.environ.get("P2PNODE_WHEELHOUSE") or out / "wheelhouse")
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for old in wheelhouse.glob("p2pnode-*.whl"):
        old.unlink()
    say("building the p2pnode wheel")
    _pip(["wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheelhouse), str(ROOT)])
    if not list(wheelhouse.glob("torch-*.whl")):
        say(f"downloading torch {TORCH} and the dependencies into {wheelhouse} (once)")
        _pip(["download", "-q", "-d", str(wheelhouse), f"torch=={TORCH}"])
    _pip(
        [
            "download",
            "-q",
            "-d",
            str(wheelhouse),
            "--find-links",
            str(wheelhouse),
            f"p2pnode[fast]=={version}",
        ]
    )
    tar = out / "wheelhouse.tar"
    with atomic.replacing(tar) as tmp, tarfile.open(tmp, "w") as tf:
        tf.add(wheelhouse, arcname="wheelhouse")
    data_dir = default_data_dir()
    if not dataset_path(data_dir, ML100K).exists():
        raise ConfigError(f"{ML100K} is not in {data_dir}: run 'p2pnode data get ml-100k' first")
    if key_file is None:
        key_file = out / "cluster.key"
        if not key_file.exists():
            authority = Authority.generate(plan.cluster)
            save_authority(out / "authority.key", authority)
            save_keyring(key_file, Keyring.generate(plan.cluster).trust(authority.public_key))
            say(f"generated cluster key {key_file} and authority {out / 'authority.key'} ({plan.cluster!r})")
        if authority_file is None and (out / "authority.key").exists():
            authority_file = out / "authority.key"
    ring = load_keyring(key_file)
    if ring.cluster != plan.cluster:
        raise ConfigError(f"{key_file} is for cluster {ring.cluster!r}, the inventory says {plan.cluster!r}")
    return {
        "wheelhouse": str(tar.resolve()),
        "version": version,
        "torch": TORCH,
        "data_dir": str(Path(data_dir).resolve()),
        "key_file": str(key_file.resolve()),
        "identities": issue_identities(plan, ring, authority_file, out / "identities", say),
    }


def issue_identities(
    plan: Plan, ring: Keyring, authority_file: Path | None, folder: Path, say: Callable[[str], None]
) -> dict[str, dict[str, str]]:
    """One process identity per instance (p2pnode.trust.identity), naming the node ids it hosts, when
    the keyring trusts a cluster authority: ``{host: {index: identity file}}`` for the install
    playbook. An identity already in ``folder`` that still names its instance's ids, is signed by
    the authority and is not revoked is kept (its serial stays what an operator revokes); others
    are issued anew. A keyring that trusts no authority gets none: its processes speak with the
    cluster key alone, as before identities.
    """
    if not ring.authorities:
        return {}
    if authority_file is None:
        raise ConfigError(
            "the keyring trusts a cluster authority: give --authority FILE (made by "
            "'p2pnode keys authority') so that each process gets its identity"
        )
    authority = load_authority(authority_file)
    if authority.cluster != plan.cluster or authority.public_key not in ring.authorities:
        raise ConfigError(f"{authority_file} is not an authority the keyring {plan.cluster!r} trusts")
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, str]] = {}
    issued = 0
    for inst in plan.instances:
        path = folder / f"{inst.host}-{inst.index}.identity"
        ranges = ((inst.first, inst.last),)
        keep = False
        if path.exists():
            cred = load_identity(path).credential
            keep = (
                cred.ranges == ranges
                and cred.cluster == plan.cluster
                and cred.serial not in ring.revoked
                and cred.verify([authority.public_key])
            )
        if not keep:
            save_identity(path, authority.issue(ranges))
            issued += 1
        out.setdefault(inst.host, {})[str(inst.index)] = str(path.resolve())
    if issued:
        save_authority(authority_file, authority)  # its next serial
        say(f"issued {issued} process identities into {folder}")
    return out


def _version() -> str:
    from importlib.metadata import version

    return version("p2pnode")


def _pip(args: Sequence[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"pip {args[0]} failed: {proc.stderr.strip()[-2000:]}")


# ---------------------------------------------------------------------------------------------
# status and collect


def parse_units(text: str) -> list[dict[str, str]]:
    """``systemctl show`` output (blank-line separated blocks of KEY=VALUE) as dicts."""
    units: list[dict[str, str]] = []
    for block in text.strip().split("\n\n"):
        entry = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if entry:
            units.append(entry)
    return units


def status_table(plan: Plan, folder: Path) -> str:
    lines = [f"{'host':<16} {'unit':<20} {'state':<20} {'restarts':>8} {'exit':>5}  {'ids':<12}"]
    for host in plan.hosts:
        path = folder / f"{host}.txt"
        units = {u.get("Id", ""): u for u in parse_units(path.read_text())} if path.exists() else {}
        for i in plan.on(host):
            u = units.get(f"p2pnode@{i.index}.service")
            if u is None:
                lines.append(f"{host:<16} p2pnode@{i.index:<12} {'unknown':<20}")
                continue
            state = f"{u.get('ActiveState', '?')}/{u.get('SubState', '?')}"
            lines.append(
                f"{host:<16} p2pnode@{i.index:<12} {state:<20} {u.get('NRestarts', '?'):>8} "
                f"{u.get('ExecMainStatus', '?'):>5}  {i.users:<12}"
            )
    return "\n".join(lines)


def collect_report(
    plan: Plan, folder: Path, faults: Path | None, since: float | None = None, self_check: bool = True
) -> str:
    """Merge the collected per-process results into ``summary.json`` and ``report.md``.

    Restarts are counted from each host's journal (systemd's "Scheduled restart job" lines of the
    unit since ``since``, the time of the last ``deploy start``); resumes are what the processes
    themselves recorded when they came back from a checkpoint.
    """
    from p2plab.merge import aggregate
    from p2pnode.runners.report import metric_for

    metric = metric_for(plan.config)
    results: list[dict[str, Any]] = []
    missing: list[str] = []
    restarts: dict[str, int] = {}
    for host in plan.hosts:
        journal = folder / host / "journal.log"
        if journal.exists():
            restarts.update({f"{host}/{k}": v for k, v in count_restarts(journal.read_text(), since).items()})
        for i in plan.on(host):
            f = folder / host / "results" / f"{i.index}.json"
            if f.exists():
                r = json.loads(f.read_text())
                r["host"], r["unit"] = host, f"p2pnode@{i.index}"
                results.append(r)
            else:
                missing.append(f"{host}/p2pnode@{i.index}")
    lines = [f"# Deployment {plan.cluster}: {plan.config.nodes} nodes on {len(plan.hosts)} hosts", ""]
    if missing:
        lines += [f"No result (still running, or failed) from: {', '.join(missing)}", ""]
    total: dict[str, Any] = {}
    if results:
        total = aggregate(results, metric.key)
        total["processes"] = [
            {
                "host": r["host"],
                "unit": r["unit"],
                "address": r["address"],
                "nodes": r["nodes"],
                "rounds": r["rounds"],
                metric.key: r[metric.key],
                "restarts": restarts.get(f"{r['host']}/{r['unit']}", 0),
                "resumes": r.get("resumes", []),
            }
            for r in results
        ]
        lines += [
            f"{metric.label} {total[metric.key]:.3f} after {total['rounds']} rounds "
            f"(random ranking {metric.random:.3f}); {total['model_messages']} models, "
            f"{total['bytes'] / 1e6:.1f} MB, {total['send_failures']} failed sends",
            "",
            f"| host | unit | address | nodes | rounds | {metric.label} | restarts | resumed at round |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for p in total["processes"]:
            resumed = ", ".join(
                f"{x['round']}" + (f" (had reached {x['reached']})" if "reached" in x else "")
                for x in p["resumes"]
            )
            lines.append(
                f"| {p['host']} | {p['unit']} | {p['address']} | {p['nodes']} | {p['rounds']} | "
                f"{p[metric.key]:.3f} | {p['restarts']} | {resumed} |"
            )
        if self_check:  # the deployment against the simulator's runs of its setting (p2plab/selfcheck.py)
            from p2plab.selfcheck import summary_check

            total["self_check"] = summary_check(total, plan.config)
            if faults is not None and total["self_check"]["diverged"]:
                total["self_check"]["line"] += " (faults were injected: some divergence is their doing)"
            lines += [total["self_check"]["line"], ""]
        if "cia" in total:
            cia = total["cia"]
            flat = {k: v for k, v in cia.items() if isinstance(v, (int, float, str))}
            lines += ["", f"CIA: {json.dumps(flat)}"]
        lines += ["", f"| round | {metric.label} | models | MB | reached (UTC) |", "|---|---|---|---|---|"]
        for h in total["history"]:
            when = _utc(h["time"]) if "time" in h else ""
            lines.append(
                f"| {h['round']} | {h[metric.key]:.3f} | {h['messages']} | {h['bytes'] / 1e6:.1f} | {when} |"
            )
    if faults is not None:
        total["faults"] = timeline(load_faults(faults), results, metric.key)
        lines += [
            "",
            "## Faults",
            "",
            f"The host's round is the last one it had evaluated; {metric.label} is the network's, over",
            "each process's last evaluation before the event.",
            "",
            f"| time (UTC) | host | fault | action | host's round | network {metric.label} |",
            "|---|---|---|---|---|---|",
        ]
        for e in total["faults"]:
            hr = f"{e['metric']:.3f}" if e["metric"] is not None else ""
            rnd = e["round"] if e["round"] is not None else "before round 1"
            detail = f"{e['fault']} {e.get('detail', '')}".strip()
            lines.append(f"| {_utc(e['time'])} | {e['host']} | {detail} | {e['action']} | {rnd} | {hr} |")
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / "summary.json", json.dumps(total, indent=1))
    report = "\n".join(lines) + "\n"
    write_text(folder / "report.md", report)
    return report


_RESTART = re.compile(r"^(\S+) \S+ systemd\[1\]: (p2pnode@\d+)\.service: Scheduled restart job")


def count_restarts(journal: str, since: float | None) -> dict[str, int]:
    """Automatic restarts per unit in a ``journalctl -o short-iso-precise`` text (since ``since``)."""
    counts: dict[str, int] = {}
    for line in journal.splitlines():
        m = _RESTART.match(line)
        if m is None:
            continue
        if since is not None:
            try:
                if datetime.fromisoformat(m.group(1)).timestamp() < since:
                    continue
            except ValueError:
                continue
        counts[m.group(2)] = counts.get(m.group(2), 0) + 1
    return counts


def load_faults(path: Path) -> list[dict[str, Any]]:
    """The fault log the testbed writes (one JSON object per line: time, host, fault, action)."""
    if not path.exists():
        raise ConfigError(f"fault log {path} does not exist")
    events = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError:
            raise ConfigError(f"{path}:{n}: not a JSON line") from None
        if not isinstance(e, dict) or not {"time", "host", "fault", "action"} <= set(e):
            raise ConfigError(f"{path}:{n}: a fault event has time, host, fault and action")
        if not isinstance(e["time"], (int, float)):
            raise ConfigError(f"{path}:{n}: time must be a number (seconds since the epoch)")
        events.append(e)
    return sorted(events, key=lambda e: float(e["time"]))


def timeline(events: list[dict[str, Any]], results: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Each fault event with its host's last evaluated round before it, and the network's utility
    then (each process's last evaluation before the event, weighted by its nodes)."""
    out = []
    for e in events:
        t = float(e["time"])
        host_round: int | None = None
        weighted = 0.0
        nodes = 0
        for r in results:
            before = [h for h in r.get("history", []) if h.get("time", float("inf")) <= t]
            if not before:
                continue
            last = max(before, key=lambda h: h["time"])
            weighted += last[key] * last["nodes"]
            nodes += last["nodes"]
            if r.get("host") == e["host"]:
                # rounds a crash rolled back are gone from the history; the resume remembers them
                lost = [
                    x["reached"]
                    for x in r.get("resumes", [])
                    if x.get("reached_time", t + 1) <= t < x["time"]
                ]
                host_round = max(host_round or 0, last["round"], *lost)
        out.append({**e, "round": host_round, "metric": weighted / nodes if nodes else None})
    return out


def _utc(t: float) -> str:
    return datetime.fromtimestamp(float(t), UTC).strftime("%H:%M:%S")
