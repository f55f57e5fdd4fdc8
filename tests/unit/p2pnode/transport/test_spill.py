"""p2pnode/transport/spill.py: large frames wait on disk as maps of unlinked files."""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import numpy as np
import pytest

from p2pnode.clock import VirtualClock
from p2pnode.config import ConfigError, RunConfig
from p2pnode.transport.base import Memo, Outcome, Payload
from p2pnode.transport.memory import LinkConfig, MemoryNetwork
from p2pnode.transport.spill import Spill, SpillError
from p2pnode.wire.schema import Channel


def test_a_large_frame_comes_back_as_the_same_bytes_mapped_from_a_file_left_nowhere(tmp_path: Path) -> None:
    spill = Spill(tmp_path, min_bytes=1000)
    small = b"x" * 999
    assert spill.keep(small) is small and spill.frames == 0  # control frames stay in memory
    data = np.arange(100_000, dtype=np.float32).tobytes()
    kept = spill.keep(memoryview(data))
    assert isinstance(kept, memoryview) and kept.readonly
    assert bytes(kept) == data and (spill.frames, spill.bytes) == (1, len(data))
    assert list(tmp_path.iterdir()) == []  # unlinked: its blocks go with the last view
    view = np.frombuffer(kept, dtype=np.float32)  # what the decoder makes of it (wire/tensors.py)
    del kept
    assert view[99_999] == 99_999.0 and not view.flags.writeable


def test_a_region_whose_last_view_went_takes_the_next_thing_of_its_size(tmp_path: Path) -> None:
    """The arena grows to what is held at once, not to what was ever kept."""
    spill = Spill(tmp_path, min_bytes=1000)
    first = spill.keep(b"a" * 5000)
    second = spill.keep(b"b" * 6000)  # the same size class (1 MiB)
    assert spill.size == 2 << 20 and spill.in_use == 2 << 20
    view = np.frombuffer(first, dtype=np.uint8)
    del first
    assert spill.in_use == 2 << 20  # a view of the map still holds it
    del view
    assert spill.in_use == 1 << 20
    third = spill.keep(b"c" * 7000)  # takes the freed region
    assert spill.size == 2 << 20 and bytes(third) == b"c" * 7000 and bytes(second) == b"b" * 6000
    big = spill.keep_params({"w": np.full((1 << 20) // 4 + 1, 2.0, np.float32)})  # a 2 MiB class
    assert spill.size == 4 << 20 and float(big["w"].sum()) == 2.0 * ((1 << 20) // 4 + 1)
    del second, third, big
    assert spill.in_use == 0


def test_a_large_model_comes_back_as_the_same_values_viewing_one_mapped_file(tmp_path: Path) -> None:
    spill = Spill(tmp_path, min_bytes=1000)
    small = {"b": np.ones(3, np.float32)}
    assert spill.keep_params(small) is small and spill.models == 0
    rng = np.random.default_rng(0)
    model = {  # sizes that are not multiples of the alignment, and more than one dtype
        "items": rng.standard_normal((301, 7)).astype(np.float32),
        "user": rng.standard_normal((1, 7)).astype(np.float32),
        "ids": np.arange(5, dtype=np.int64),
        "bias": np.float32([0.5]),
    }
    kept = spill.keep_params(model)
    assert list(kept) == list(model) and spill.models == 1 and spill.bytes >= 301 * 7 * 4
    for name, arr in model.items():
        got = kept[name]
        assert got.dtype == arr.dtype and got.shape == arr.shape and not got.flags.writeable
        assert got.tobytes() == arr.tobytes(), name
    assert list(tmp_path.iterdir()) == []


def test_the_memory_network_delivers_the_kept_copy(tmp_path: Path) -> None:
    clock = VirtualClock()
    net = MemoryNetwork(clock, LinkConfig(1.0, 1.0), seed=0, spill=Spill(tmp_path, min_bytes=10))
    got: list[Payload] = []

    class Receiver:
        def receive(
            self, dest: int, channel: Channel, data: Payload, *, local: bool = False, memo: Memo | None = None
        ) -> Outcome:
            got.append(data)
            return Outcome(200)

    net.register(1, Receiver())
    outcomes: list[Outcome] = []
    net.send(0, 1, Channel.GOSSIP, b"a frame of twenty-two", outcomes.append)
    net.send(0, 1, Channel.GOSSIP, b"short", outcomes.append)
    net.send(0, 2, Channel.GOSSIP, b"to nobody, not kept anywhere", outcomes.append)
    clock.run_until(2.0)
    assert [bytes(g) for g in got] == [b"a frame of twenty-two", b"short"]
    assert isinstance(got[0], memoryview) and isinstance(got[1], bytes)
    assert [o.ok for o in outcomes] == [True, True, False]
    assert net.spill is not None and net.spill.frames == 1


def test_a_folder_that_is_not_there_or_not_writable_is_refused_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        Spill(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a folder"):
        Spill(tmp_path / "file")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ConfigError, match="not writable"):
            Spill(locked)
    from p2pnode.runners.sim import Simulation

    with pytest.raises(ConfigError, match=r"--spill-dir .*missing: not a folder"):
        Simulation(RunConfig(nodes=4, rounds=1).replace(**{"sim.spill_dir": str(tmp_path / "missing")}))


def test_a_frame_that_cannot_be_written_stops_the_run_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    spill = Spill(folder, min_bytes=1)
    folder.rmdir()  # the folder went away under the run
    with pytest.raises(SpillError, match="could not open a file there"):
        spill.keep(b"12345")
    spill = Spill(tmp_path, min_bytes=1)
    kept = spill.keep(b"first")

    def out_of_descriptors(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(mmap, "mmap", out_of_descriptors)
    with pytest.raises(SpillError, match=r"could not keep a model of 64 bytes: .*raise ulimit -n"):
        spill.keep_params({"w": np.ones(4, np.float32)})
    with pytest.raises(SpillError, match="could not keep a frame of 5 bytes"):
        spill.keep(b"12345")
    monkeypatch.undo()
    assert spill.in_use == 1 << 20 and spill.size == 2 << 20  # the failed ones' region is free again
    assert bytes(spill.keep(b"third")) == b"third" and spill.size == 2 << 20 and bytes(kept) == b"first"


def test_the_open_files_limit_is_raised_to_its_ceiling(tmp_path: Path) -> None:
    """Each region's map holds a descriptor: a POI-shaped FedAvg round holds ~2,200 at once."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        Spill(tmp_path)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_where_frames_wait_is_not_part_of_a_runs_identity(tmp_path: Path) -> None:
    from p2plab.experiment_spec import run_key

    plain = RunConfig(nodes=4, rounds=1, protocol="fedavg")
    assert run_key(plain.replace(**{"sim.spill_dir": str(tmp_path)}), "simulate") == run_key(
        plain, "simulate"
    )
