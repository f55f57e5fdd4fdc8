"""The deploy plan (inventory → processes, addresses, settings) and the collect report's parsing."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from p2plab.deploy import ACTIONS, LOCAL_ACTIONS, count_restarts, load_faults, parse_units, timeline
from p2plab.deploy_plan import plan_from_inventory, to_toml
from p2pnode.config import ConfigError


def inventory(hosts: dict[str, dict[str, Any]], **group: Any) -> dict[str, Any]:
    """An ``ansible-inventory --list`` document: group vars end up in every host's vars."""
    return {
        "_meta": {"hostvars": {h: {**group, **hv} for h, hv in hosts.items()}},
        "all": {"children": ["ungrouped", "p2pnode"]},
        "p2pnode": {"hosts": list(hosts)},
    }


def test_ids_are_handed_out_in_inventory_order_and_split_over_processes() -> None:
    plan = plan_from_inventory(
        inventory(
            {
                "a": {"ansible_host": "10.0.0.1", "p2pnode_nodes": 5, "p2pnode_processes": 2},
                "b": {"ansible_host": "10.0.0.2", "p2pnode_nodes": 3, "p2pnode_port": 8000},
            },
            p2pnode_settings={"rounds": 7, "attack": {"kind": "cia", "attackers": "0,5", "target_k": 3}},
            p2pnode_cluster="lab",
        )
    )
    got = [(i.host, i.index, i.users, i.address) for i in plan.instances]
    assert got == [
        ("a", 0, "0-1", "10.0.0.1:7070"),
        ("a", 1, "2-4", "10.0.0.1:7071"),
        ("b", 0, "5-7", "10.0.0.2:8000"),
    ]
    assert plan.config.nodes == 8 and plan.config.rounds == 7 and plan.config.attack.attackers == "0,5"
    v = plan.to_vars()
    assert v["hosts"]["a"]["instances"][1]["peers"] == "10.0.0.1:7070,10.0.0.2:8000"
    assert tomllib.loads(v["config_toml"]) == {
        "nodes": 8,
        "rounds": 7,
        "attack": {"kind": "cia", "attackers": "0,5", "target_k": 3},
    }


def test_ini_inventories_give_strings_and_they_are_read_as_numbers() -> None:
    plan = plan_from_inventory(inventory({"a": {"p2pnode_nodes": "4", "p2pnode_processes": "2"}}))
    assert [i.users for i in plan.instances] == ["0-1", "2-3"]
    assert plan.instances[0].address == "a:7070"  # no ansible_host: the inventory name


@pytest.mark.parametrize(
    ("hosts", "group", "message"),
    [
        ({"a": {}}, {}, "a: p2pnode_nodes is missing"),
        ({"a": {"p2pnode_nodes": 0}}, {}, "p2pnode_nodes must be an integer >= 1"),
        ({"a": {"p2pnode_nodes": 2, "p2pnode_processes": 3}}, {}, "exceeds its p2pnode_nodes"),
        ({"a": {"p2pnode_nodes": 2, "p2pnode_port": 65535, "p2pnode_processes": 2}}, {}, "exceed 65535"),
        (
            {"a": {"p2pnode_nodes": 2, "ansible_host": "h"}, "b": {"p2pnode_nodes": 2, "ansible_host": "h"}},
            {},
            "h:7070 is also used by a",
        ),
        ({"a": {"p2pnode_nodes": 2, "ansible_host": "bad host!"}}, {}, "neither an IP address"),
        ({"a": {"p2pnode_nodes": 2}}, {"p2pnode_settings": {"rounds": "ten"}}, "rounds must be an integer"),
        ({"a": {"p2pnode_nodes": 2}}, {"p2pnode_settings": {"rouds": 3}}, "unknown key 'rouds'"),
        ({"a": {"p2pnode_nodes": 2}}, {"p2pnode_settings": {"nodes": 3}}, "add up to 2"),
        ({"a": {"p2pnode_nodes": 2}}, {"p2pnode_settings": [1]}, "must be a mapping"),
        ({"a": {"p2pnode_nodes": 2}}, {"p2pnode_cluster": "a b"}, "p2pnode_cluster"),
        (
            {"a": {"p2pnode_nodes": 2}, "b": {"p2pnode_nodes": 2, "p2pnode_settings": {"rounds": 9}}},
            {},
            "the same for every host",
        ),
    ],
)
def test_bad_inventories_get_one_clear_error(
    hosts: dict[str, Any], group: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_from_inventory(inventory(hosts, **group))


def test_an_inventory_without_the_group_says_which_group_it_needs() -> None:
    with pytest.raises(ConfigError, match="group named 'p2pnode'"):
        plan_from_inventory({"_meta": {"hostvars": {}}, "all": {"children": ["ungrouped"]}})


def test_settings_render_as_toml_that_reads_back_the_same() -> None:
    settings = {
        "rounds": 3,
        "tick_seconds": 0.03,
        "attack": {"kind": "cia", "target_genre": 'Sci-Fi "x" \\ /'},
    }
    assert tomllib.loads(to_toml(settings)) == settings
    with pytest.raises(ConfigError, match="finite"):
        to_toml({"tick_seconds": float("nan")})
    with pytest.raises(ConfigError, match="neither a number"):
        to_toml({"rounds": [1, 2]})
    with pytest.raises(ConfigError, match="one level"):
        to_toml({"attack": {"x": {"y": 1}}})


def test_systemctl_show_blocks_parse_into_units() -> None:
    text = (
        "Id=p2pnode@0.service\nActiveState=active\nNRestarts=2\n\nId=p2pnode@1.service\nActiveState=failed\n"
    )
    units = parse_units(text)
    assert [u["Id"] for u in units] == ["p2pnode@0.service", "p2pnode@1.service"]
    assert units[0]["NRestarts"] == "2" and units[1]["ActiveState"] == "failed"


def test_restarts_are_counted_from_the_journal_since_the_start() -> None:
    line = "{} h2 systemd[1]: p2pnode@{}.service: Scheduled restart job, restart counter is at 1."
    journal = "\n".join(
        [
            line.format("2026-11-22T09:58:28.217463+0000", 0),
            line.format("2026-11-22T10:04:50.270648+0000", 0),
            line.format("2026-11-22T10:04:51.000000+0000", 1),
            "2026-11-22T10:04:52.014290+0000 h2 p2pnode[20457]: resumed 20 node(s)",
        ]
    )
    assert count_restarts(journal, None) == {"p2pnode@0": 2, "p2pnode@1": 1}
    since = 1795341600.0  # 2026-11-22T10:00:00Z
    assert count_restarts(journal, since) == {"p2pnode@0": 1, "p2pnode@1": 1}


def test_fault_log_errors_name_the_line(tmp_path: Path) -> None:
    log = tmp_path / "faults.jsonl"
    log.write_text('{"time": 2, "host": "h1", "fault": "cut", "action": "on"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"faults.jsonl:2: not a JSON line"):
        load_faults(log)
    log.write_text('{"time": "soon", "host": "h1", "fault": "cut", "action": "on"}\n')
    with pytest.raises(ConfigError, match="time must be a number"):
        load_faults(log)
    log.write_text('{"time": 2, "host": "h1"}\n')
    with pytest.raises(ConfigError, match="time, host, fault and action"):
        load_faults(log)
    with pytest.raises(ConfigError, match="does not exist"):
        load_faults(tmp_path / "none.jsonl")


def test_the_timeline_places_each_fault_at_its_hosts_round_including_rounds_a_crash_rolled_back() -> None:
    def hist(rounds: range, t0: float, hr: float) -> list[dict[str, Any]]:
        return [{"round": r, "time": t0 + r, "hr": hr, "nodes": 10} for r in rounds]

    results = [
        {"host": "h1", "history": hist(range(1, 31), 100.0, 0.6)},
        # h2 was at round 19 at t=120 when killed; it came back at t=125 from its round-10 checkpoint
        {
            "host": "h2",
            "history": hist(range(1, 11), 100.0, 0.2) + hist(range(11, 31), 115.0, 0.4),
            "resumes": [{"round": 10, "time": 125.0, "reached": 19, "reached_time": 119.0}],
        },
    ]
    events = [
        {"time": 120.5, "host": "h2", "fault": "kill", "action": "on"},
        {"time": 128.5, "host": "h2", "fault": "cut", "action": "on"},
        {"time": 50.0, "host": "h1", "fault": "cut", "action": "on"},
    ]
    out = timeline(events, results, "hr")
    assert out[0]["round"] == 19  # the rounds it lost are still where it was
    assert out[1]["round"] == 13  # after the resume: the replayed rounds
    assert out[1]["metric"] == pytest.approx(0.5)  # network mean over the processes' last evaluations
    assert out[2]["round"] is None and out[2]["metric"] is None  # before anything was evaluated
    json.dumps(out)  # the summary is JSON


ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


@pytest.mark.slow
@pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="ansible-core is not installed")
def test_every_action_has_a_playbook_that_ansible_accepts() -> None:
    books = Path(__file__).resolve().parents[3] / "deploy" / "playbooks"
    needed = [books / f"{a}.yml" for a in ACTIONS if a not in LOCAL_ACTIONS]
    assert all(b.exists() for b in needed), [b.name for b in needed if not b.exists()]
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--syntax-check", "-i", "localhost,", *map(str, needed)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_deploy_issues_one_identity_per_process_and_keeps_it_while_the_plan_holds(tmp_path: Path) -> None:
    from p2plab.deploy import issue_identities
    from p2pnode.trust.auth import Keyring
    from p2pnode.trust.identity import Authority, load_identity, save_authority

    def plan_of(nodes: int) -> Any:
        hosts = {"a": {"ansible_host": "10.0.0.1", "p2pnode_nodes": nodes, "p2pnode_processes": 2}}
        return plan_from_inventory(inventory(hosts, p2pnode_cluster="lab"))

    authority = Authority.generate("lab")
    save_authority(tmp_path / "authority.key", authority)
    ring = Keyring.generate("lab").trust(authority.public_key)
    said: list[str] = []
    first = issue_identities(plan_of(6), ring, tmp_path / "authority.key", tmp_path / "ids", said.append)
    creds = {i: load_identity(Path(p)).credential for i, p in first["a"].items()}
    assert {i: c.ranges for i, c in creds.items()} == {"0": ((0, 2),), "1": ((3, 5),)}
    assert all(c.verify([authority.public_key]) for c in creds.values())
    again = issue_identities(plan_of(6), ring, tmp_path / "authority.key", tmp_path / "ids", said.append)
    assert {i: load_identity(Path(p)).credential.serial for i, p in again["a"].items()} == {
        i: c.serial for i, c in creds.items()
    }  # kept: the serials an operator would revoke do not move
    grown = issue_identities(plan_of(8), ring, tmp_path / "authority.key", tmp_path / "ids", said.append)
    assert load_identity(Path(grown["a"]["1"])).credential.ranges == ((4, 7),)
    assert len(said) == 2  # issued twice: at first, and when the plan changed
    serial = load_identity(Path(grown["a"]["0"])).credential.serial
    auth_file, ids = tmp_path / "authority.key", tmp_path / "ids"
    revoked = issue_identities(plan_of(8), ring.revoke(serial), auth_file, ids, said.append)
    assert load_identity(Path(revoked["a"]["0"])).credential.serial != serial  # a revoked one is replaced
    # a keyring that trusts no authority: no identities (the cluster key alone, as before)
    assert issue_identities(plan_of(6), Keyring.generate("lab"), None, tmp_path / "x", said.append) == {}
    with pytest.raises(ConfigError, match="--authority"):
        issue_identities(plan_of(6), ring, None, tmp_path / "y", said.append)
    other = Authority.generate("lab")
    save_authority(tmp_path / "other.key", other)
    with pytest.raises(ConfigError, match="not an authority"):
        issue_identities(plan_of(6), ring, tmp_path / "other.key", tmp_path / "z", said.append)


def test_monitoring_scrapes_every_process_of_the_inventory_with_tls_when_given(tmp_path: Path) -> None:
    """``deploy monitoring``: one target per process, labelled by cluster, host and unit; with
    ``p2pnode_metrics_tls`` the scrape is HTTPS with the client certificate."""
    import shutil

    import yaml

    from p2plab.deploy import write_monitoring_files

    tls_files = {k: str(tmp_path / f"{k}.pem") for k in ("ca_file", "cert_file", "key_file")}
    for path in tls_files.values():
        Path(path).write_text("-----BEGIN CERTIFICATE-----\n")
    hosts = {
        "a": {"ansible_host": "10.0.0.1", "p2pnode_nodes": 5, "p2pnode_processes": 2},
        "b": {"ansible_host": "10.0.0.2", "p2pnode_nodes": 3},
    }
    plan = plan_from_inventory(
        inventory(hosts, p2pnode_cluster="lab", p2pnode_settings={"rounds": 7}, p2pnode_metrics_tls=tls_files)
    )
    said = write_monitoring_files(plan, tmp_path / "monitoring")
    assert "3 processes, scraped over mutual TLS" in said
    config = yaml.safe_load((tmp_path / "monitoring" / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["scheme"] == "https" and job["tls_config"] == tls_files
    assert config["global"]["scrape_interval"] == "1s"  # 1 s rounds: a scrape or two a round
    got = [(s["targets"], s["labels"]) for s in job["static_configs"]]
    assert got == [
        (["10.0.0.1:7070"], {"cluster": "lab", "host": "a", "unit": "p2pnode@0"}),
        (["10.0.0.1:7071"], {"cluster": "lab", "host": "a", "unit": "p2pnode@1"}),
        (["10.0.0.2:7070"], {"cluster": "lab", "host": "b", "unit": "p2pnode@0"}),
    ]
    dashboard = json.loads((tmp_path / "monitoring" / "grafana" / "dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert any("p2pnode_cia_accuracy" in e for e in exprs) and any("view_swaps" in e for e in exprs)
    if shutil.which("promtool"):  # Prometheus's own check of the file (the Debian package has it)
        check = subprocess.run(
            ["promtool", "check", "config", str(tmp_path / "monitoring" / "prometheus.yml")],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stdout + check.stderr

    plain = plan_from_inventory(inventory(hosts, p2pnode_settings={"rounds": 7}))
    write_monitoring_files(plain, tmp_path / "plain")
    job = yaml.safe_load((tmp_path / "plain" / "prometheus.yml").read_text())["scrape_configs"][0]
    assert job["scheme"] == "http" and "tls_config" not in job
    with pytest.raises(ConfigError, match="needs ca_file, cert_file and key_file"):
        plan_from_inventory(inventory(hosts, p2pnode_metrics_tls={"ca_file": "ca.pem"}))
    hosts["b"]["p2pnode_metrics_tls"] = tls_files
    with pytest.raises(ConfigError, match="must be the same for every host"):
        plan_from_inventory(inventory(hosts))
