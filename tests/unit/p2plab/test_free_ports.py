"""Ports handed to node processes: free now, distinct, and out of the kernel's reach for outgoing
connections (a port drawn by ``bind(0)`` can be handed to an outgoing connection before the node
binds it; a CI run lost a launch to that)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import p2plab.launch as launch


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    low, _ = launch._ephemeral_range()
    ports = launch.free_ports(20)
    assert len(set(ports)) == 20
    assert all(launch.LOWEST_PORT <= p < low for p in ports)
    socks = []
    try:
        for p in ports:  # each one can be listened on
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p))
            s.listen()
    finally:
        for s in socks:
            s.close()


def test_a_port_someone_listens_on_is_never_drawn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    try:  # the pool narrowed to the held port and one other: only the other can come back
        rng = tmp_path / "range"
        rng.write_text(f"{port + 2} 60999\n")
        monkeypatch.setattr(launch, "EPHEMERAL_RANGE_FILE", rng)
        monkeypatch.setattr(launch, "LOWEST_PORT", port)
        drawn = launch.free_ports(1)
    finally:
        held.close()
    assert drawn != [port]


def test_with_no_room_below_the_range_the_kernel_draws(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rng = tmp_path / "range"
    rng.write_text(f"{launch.LOWEST_PORT + 5} 60999\n")
    monkeypatch.setattr(launch, "EPHEMERAL_RANGE_FILE", rng)
    ports = launch.free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)


def test_an_unreadable_range_file_means_linux_s_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(launch, "EPHEMERAL_RANGE_FILE", tmp_path / "absent")
    assert launch._ephemeral_range() == (32_768, 60_999)
    (tmp_path / "garbled").write_text("many\n")
    monkeypatch.setattr(launch, "EPHEMERAL_RANGE_FILE", tmp_path / "garbled")
    assert launch._ephemeral_range() == (32_768, 60_999)
