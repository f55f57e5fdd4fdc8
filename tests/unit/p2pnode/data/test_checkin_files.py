"""Check-in files as distributed (TSMC2014, SNAP Gowalla), headers, --columns, --bbox, filters,
and the POI-shaped generator that writes them (learning/synthetic.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from learning.interactions import DataError, Interactions
from learning.synthetic import (
    POI_SHAPES,
    CheckIns,
    POIConfig,
    csv_lines,
    elsewhere,
    poi_checkins,
    snap_lines,
    tsmc_lines,
    tsmc_time,
)
from p2pnode.data.tables import (
    NAMED_BOXES,
    LoadReport,
    TableOptions,
    iso_seconds,
    load,
    parse_bbox,
    parse_columns,
    tsmc_seconds,
)

SMALL = POIConfig(users=40, venues=600, checkins=3000, neighbourhoods=6, min_per_user=10, seed=3)


def write(path: Path, lines: object) -> Path:
    path.write_text("".join(lines))  # type: ignore[arg-type]
    return path


def pairs(log: CheckIns, user_base: int = 0) -> set[tuple[int, int]]:
    return {(u + user_base, v) for u, v in zip(log.users.tolist(), log.venues.tolist(), strict=True)}


def raw_pairs(data: Interactions) -> set[tuple[str, str]]:
    return {(data.raw_user_ids[u], data.raw_item_ids[i]) for u, i in zip(data.users, data.items, strict=True)}


def test_poi_generator_has_the_papers_shapes_and_is_seeded() -> None:
    log = poi_checkins(POI_SHAPES["foursquare-nyc"])
    assert (len(log), len(np.unique(log.users)), len(np.unique(log.venues))) == (227428, 1083, 38333)
    gowalla = poi_checkins(POI_SHAPES["gowalla-nyc"])
    assert (len(gowalla), len(np.unique(gowalla.users)), len(np.unique(gowalla.venues))) == (
        185932,
        718,
        32924,
    )
    again = poi_checkins(SMALL)
    other = poi_checkins(POIConfig(**{**SMALL.__dict__, "seed": 4}))
    first = poi_checkins(SMALL)
    assert np.array_equal(first.venues, again.venues) and not np.array_equal(first.venues, other.venues)
    # popularity is skewed and users revisit places: fewer distinct pairs than check-ins
    visits = np.bincount(log.venues)
    assert visits.max() > 50 * np.median(visits)
    assert len(pairs(log)) < 0.7 * len(log)
    # a user's new venues come mostly from its home neighbourhood: its places lie close together
    spread = [np.std(log.lat[log.venues[log.users == u]]) for u in range(20)]
    assert np.median(spread) < np.std(log.lat)


def test_tsmc2014_file_loads_as_distributed_with_categories_and_times(tmp_path: Path) -> None:
    log = poi_checkins(SMALL)
    path = write(tmp_path / "dataset_TSMC2014_NYC.txt", tsmc_lines(log))
    report = LoadReport(str(path))
    data = load(path, TableOptions(min_interactions=2), report)
    assert report.layout == "tsmc2014" and report.time_format == "TSMC2014"
    assert data.n_users == SMALL.users and data.n_items == SMALL.venues
    assert len(data) == len(pairs(log))  # repeat visits are one interaction
    # the time kept for a pair is its latest visit
    u0 = data.raw_user_ids.index("1")
    latest = max(log.times[(log.users == 0)])
    assert data.timestamps[data.users == u0].max() == latest
    assert data.item_categories is not None
    assert set(data.item_categories) <= set(log.categories)
    assert report.steps[0][1:] == (len(log), SMALL.users, SMALL.venues)
    assert report.steps[1][1] == len(pairs(log))


def test_snap_world_file_cut_to_new_york_gives_the_city_log_back(tmp_path: Path) -> None:
    log = poi_checkins(SMALL)
    world = elsewhere(log, 0.6, seed=1)
    path = write(tmp_path / "loc-gowalla_totalCheckins.txt", snap_lines(world))
    report = LoadReport(str(path))
    data = load(path, TableOptions(bbox=NAMED_BOXES["nyc"], min_interactions=2), report)
    assert report.layout == "snap" and report.time_format == "ISO 8601"
    assert report.steps[0][1] == len(log)  # every check-in inside the box, none outside
    assert {(int(u), int(i) - 9000) for u, i in raw_pairs(data)} == pairs(log)
    whole = load(path, TableOptions(min_interactions=2))
    assert whole.n_items > data.n_items and whole.n_users > data.n_users


def test_header_csv_user_venue_timestamp_and_named_columns(tmp_path: Path) -> None:
    log = poi_checkins(SMALL)
    data = load(write(tmp_path / "a.csv", csv_lines(log)), TableOptions(min_interactions=2))
    assert data.n_users == SMALL.users and len(data) == len(pairs(log))
    assert data.item_categories is not None
    text = "who;x\tx\tplace\twhen\n" + "".join(
        f"u{u}\t{u}\tv{i}\t2012-04-0{1 + i}T10:00:00+02:00\n" for u in range(3) for i in range(4)
    )
    path = tmp_path / "b.tsv"
    path.write_text(text)
    with pytest.raises(DataError, match=r"b.tsv:1: cannot tell the columns"):
        load(path)
    named = load(
        path,
        TableOptions(
            columns=tuple(parse_columns("user=who;x,item=PLACE,time=when").items()), min_interactions=2
        ),
    )
    assert named.raw_user_ids == ("u0", "u1", "u2") and named.n_items == 4
    assert named.timestamps.min() == datetime(2012, 4, 1, 8, tzinfo=UTC).timestamp()
    numbered = load(
        path, TableOptions(columns=tuple(parse_columns("user=1,item=3").items()), min_interactions=2)
    )
    assert raw_pairs(numbered) == raw_pairs(named)
    with pytest.raises(
        DataError, match=r"--columns item=venue: the header has no such column; it has who;x, x"
    ):
        load(path, TableOptions(columns=tuple(parse_columns("user=who;x,item=venue").items())))


def test_timestamps_in_three_forms() -> None:
    want = datetime(2012, 4, 3, 18, 0, 9, tzinfo=UTC).timestamp()
    assert tsmc_seconds("Tue Apr 03 18:00:09 +0000 2012") == want
    assert tsmc_seconds("Tue Apr 03 14:00:09 -0400 2012") == want
    assert tsmc_time(want) == "Tue Apr 03 18:00:09 +0000 2012"
    assert iso_seconds("2012-04-03T18:00:09Z") == want
    assert iso_seconds("2012-04-03 20:00:09+02:00") == want
    assert iso_seconds("2012-04-03") == datetime(2012, 4, 3, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("line", "options", "message"),
    [
        (
            "1\tv\tc\tBar\t40.7\tx\t-240\tTue Apr 03 18:00:09 +0000 2012\n",
            "nyc",
            r"f.txt:2: field longitude 'x' is not a number",
        ),
        (
            "1\tv\tc\tBar\t40.7\t-73.9\t-240\tTue Apr 33 18:00:09 +0000 2012\n",
            "",
            r"f.txt:2: field time 'Tue Apr 33 18:00:09 \+0000 2012' is not a timestamp in TSMC2014",
        ),
        ("1\tv\tc\tBar\t40.7\t-73.9\t-240\n", "", r"f.txt:2: 7 fields where earlier rows have 8"),
        (
            "\tv\tc\tBar\t40.7\t-73.9\t-240\tTue Apr 03 18:00:09 +0000 2012\n",
            "",
            r"f.txt:2: field user is empty",
        ),
    ],
)
def test_a_malformed_row_is_one_line_naming_file_line_and_field(
    tmp_path: Path, line: str, options: str, message: str
) -> None:
    good = "1\tv0\tc\tBar\t40.7\t-73.9\t-240\tTue Apr 03 18:00:09 +0000 2012\n"
    path = write(tmp_path / "f.txt", [good, line, good.replace("v0", "v1")])
    with pytest.raises(DataError, match=message):
        load(path, TableOptions(bbox=parse_bbox(options) if options else None, min_interactions=2))


def test_filters_run_in_order_and_the_report_says_what_each_left(tmp_path: Path) -> None:
    rows = ["user,item\n"]
    rows += (
        [f"a,{i}\n" for i in range(6)] + [f"b,{i}\n" for i in range(3)] + [f"c,{i}\n" for i in (0, 1, 7, 8)]
    )
    rows += ["a,0\n", "a,0\n"]  # repeats
    report = LoadReport("f.csv")
    data = load(write(tmp_path / "f.csv", rows), TableOptions(min_interactions=3, min_item_users=2), report)
    # items with 2+ users: 0, 1, 2 (a and b); then users with 3+ of them: a and b
    assert data.raw_item_ids == ("0", "1", "2") and data.raw_user_ids == ("a", "b")
    assert [s[1:] for s in report.steps] == [(15, 3, 8), (13, 3, 8), (8, 3, 3), (6, 2, 3)]
    text = "\n".join(report.lines())
    assert "items with >= 2 users" in text and "users with >= 3 items" in text
    with pytest.raises(DataError, match="lower --min-item-users"):
        load(write(tmp_path / "g.csv", rows), TableOptions(min_item_users=5))


def test_box_and_column_arguments_are_checked() -> None:
    assert parse_bbox("NYC") == NAMED_BOXES["nyc"]
    assert str(parse_bbox("1,2,3,4")) == "1,2,3,4"
    for bad in ("1,2,3", "a,b,c,d", "3,2,1,4", "0,0,91,1", "paris"):
        with pytest.raises(DataError, match="--bbox"):
            parse_bbox(bad)
    for bad in ("user=a", "user=a,item=", "who=a,item=b", "user=a,user=b,item=c"):
        with pytest.raises(DataError, match="--columns"):
            parse_columns(bad)


def test_archives_as_distributed_gzip_and_zip(tmp_path: Path) -> None:
    import gzip
    import zipfile

    log = poi_checkins(SMALL)
    text = "".join(tsmc_lines(log))
    gz = tmp_path / "loc.txt.gz"
    gz.write_bytes(gzip.compress("".join(snap_lines(log)).encode()))
    assert len(load(gz, TableOptions(min_interactions=2))) == len(pairs(log))
    zipped = tmp_path / "dataset_tsmc2014.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("dataset_tsmc2014/dataset_TSMC2014_readme.txt", "about")
        zf.writestr("dataset_tsmc2014/dataset_TSMC2014_NYC.txt", text)
        zf.writestr("dataset_tsmc2014/dataset_TSMC2014_TKY.txt", "")
    data = load(zipped, TableOptions(min_interactions=2))
    assert data.n_items == SMALL.venues and data.item_categories is not None
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"\x1f\x8b not really")
    with pytest.raises(DataError, match=r"bad.gz: not a UTF-8 or Latin-1 text file, gzip or zip"):
        load(bad)


def test_a_tsmc_file_runs_from_the_command_line_with_a_venue_category_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from p2plab.cli import main as lab_main

    log = poi_checkins(POIConfig(users=30, venues=400, checkins=2400, neighbourhoods=4, min_per_user=10))
    path = write(tmp_path / "dataset_TSMC2014_NYC.txt", tsmc_lines(log))
    argv = [
        "simulate",
        "--dataset",
        str(path),
        "--rounds",
        "2",
        "--attack",
        "cia",
        "--target-k",
        "5",
        "--target-genre",
        "Health and Medicine",
        "--json",
    ]
    assert lab_main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"] == 30
    predictions = out["cia"]["predictions"]
    assert 1 <= len(predictions) <= 30
    assert all(len(p["community_users"]) <= 5 for p in predictions)
    assert {u for p in predictions for u in p["community_users"]} <= {str(u) for u in range(1, 31)}
    assert lab_main([*argv[:-3], "--target-genre", "Opera House"]) == 2
    err = capsys.readouterr().err
    assert "no venue category 'opera house'" in err and "Health and Medicine".lower() in err.lower()


def test_category_targets_by_name_and_by_group() -> None:
    from p2pnode.attacks.attack import _category_target
    from p2pnode.config import ConfigError

    cats = ("Bar", "Hospital", "Medical Center", "bar", "Dentist's Office", "Park")
    assert _category_target("bar", cats).tolist() == [0, 3]
    assert _category_target("Park,Hospital", cats).tolist() == [1, 5]
    assert _category_target("Health and Medicine", cats).tolist() == [1, 2, 4]
    with pytest.raises(ConfigError, match="no venue category 'gym'"):
        _category_target("gym", cats)


def test_synth_scales_venues_with_users_or_keeps_the_catalogue_and_says_what_cannot_be_made(
    tmp_path: Path,
) -> None:
    from p2pnode.cli import main

    out = tmp_path / "few.txt"
    assert main(["data", "synth", "foursquare-nyc", str(out), "--users", "30"]) == 0
    data = load(out, TableOptions())
    assert data.n_users == 30 and 900 <= data.n_items <= 1100  # 38,333 × 30 / 1,083 venues
    out2 = tmp_path / "catalogue.txt"
    assert main(["data", "synth", "gowalla-nyc", str(out2), "--users", "20", "--venues", "2000"]) == 0
    assert load(out2, TableOptions()).n_items == 2000  # every venue visited at least once
    with pytest.raises(DataError, match=r"cannot visit 600 venues .* need 1240"):
        poi_checkins(POIConfig(users=40, venues=600, checkins=1000, neighbourhoods=6, min_per_user=10))


def test_a_run_estimated_not_to_fit_is_refused_before_it_is_built_unless_told_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``simulate`` estimates a run's memory from its prepared model and attack (p2pnode.runners.footprint)
    and refuses one that does not fit in free memory in one line; ``--no-memory-check`` runs it."""
    from p2plab.cli import main as lab_main
    from p2pnode.runners import footprint

    log = poi_checkins(POIConfig(users=30, venues=400, checkins=2400, neighbourhoods=4, min_per_user=10))
    path = write(tmp_path / "dataset_TSMC2014_NYC.txt", tsmc_lines(log))
    argv = ["simulate", "--dataset", str(path), "--rounds", "1", "--protocol", "fedavg", "--attack", "cia"]
    argv += ["--target-k", "5"]
    monkeypatch.setattr(footprint, "available_bytes", lambda: 100 << 20)
    assert lab_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("p2pnode: error: a run of 30 nodes (fedavg, dataset_TSMC2014_NYC.txt) needs about")
    assert err.endswith("0.1 GiB is free; run fewer --nodes or on a machine with more memory")
    assert lab_main([*argv, "--no-memory-check"]) == 0
    # launch: the same, for its processes together, before any is started
    launch = ["launch", *argv[1:], "--processes", "2"]
    assert lab_main(launch) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "p2pnode: error: a run of 30 nodes (fedavg, dataset_TSMC2014_NYC.txt) in 2 processes needs about"
    )
    assert "run fewer --processes, fewer --nodes" in err


def test_free_memory_is_what_the_processs_cgroup_leaves_where_it_has_a_limit(tmp_path: Path) -> None:
    """In a container or a systemd slice with a memory limit, /proc/meminfo shows the host's
    memory: the check takes the room left under the cgroup's limit (reclaimable page cache
    counted as room), so a run that the limit would OOM-kill is refused instead."""
    from p2pnode.runners.footprint import available_bytes, cgroup_room

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 25000000 kB\nMemAvailable:   20000000 kB\n")
    host = 20_000_000 * 1024
    # cgroup v2: one unified hierarchy, limit 8 GiB, 3 GiB used of which 1 GiB inactive page cache
    v2 = tmp_path / "v2"
    (v2 / "box").mkdir(parents=True)
    (v2 / "box" / "memory.max").write_text(f"{8 << 30}\n")
    (v2 / "box" / "memory.current").write_text(f"{3 << 30}\n")
    (v2 / "box" / "memory.stat").write_text(f"anon {2 << 30}\ninactive_file {1 << 30}\n")
    own = tmp_path / "cgroup"
    own.write_text("0::/box\n")
    assert cgroup_room(own, v2) == 6 << 30
    assert available_bytes(meminfo, own, v2) == 6 << 30
    (v2 / "box" / "memory.max").write_text("max\n")  # no limit: the machine's figure
    assert cgroup_room(own, v2) is None and available_bytes(meminfo, own, v2) == host
    # cgroup v1: the memory controller's hierarchy; a limit above the host's memory changes nothing
    v1 = tmp_path / "v1"
    (v1 / "memory" / "slice").mkdir(parents=True)
    (v1 / "memory" / "slice" / "memory.limit_in_bytes").write_text(f"{4 << 30}\n")
    (v1 / "memory" / "slice" / "memory.usage_in_bytes").write_text(f"{5 << 30}\n")  # over: no room
    (v1 / "memory" / "slice" / "memory.stat").write_text("cache 0\ntotal_inactive_file 0\n")
    own.write_text("9:pids:/\n6:memory:/slice\n1:name=systemd:/\n")
    assert cgroup_room(own, v1) == 0 and available_bytes(meminfo, own, v1) == 0
    (v1 / "memory" / "slice" / "memory.limit_in_bytes").write_text(f"{64 << 30}\n")
    (v1 / "memory" / "slice" / "memory.usage_in_bytes").write_text(f"{1 << 30}\n")
    assert available_bytes(meminfo, own, v1) == host
    (v1 / "memory" / "slice" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1 "none"
    assert cgroup_room(own, v1) is None
    # unreadable files: the machine's figure, or None where that is unreadable too
    assert available_bytes(meminfo, tmp_path / "absent", v1) == host
    assert available_bytes(tmp_path / "absent", tmp_path / "absent", v1) is None


def _recategorised(log: CheckIns, categories: dict[int, bytes]) -> tuple[bytes, dict[int, str]]:
    """The log as TSMC2014 bytes with the categories of some venues (by index) replaced by the
    given bytes; and those venues' raw ids."""
    out, ids = [], {}
    for line, v in zip(tsmc_lines(log), log.venues.tolist(), strict=True):
        fields = line.encode("utf-8").split(b"\t")
        if v in categories:
            fields[3] = categories[v]
            ids[v] = fields[1].decode()
        out.append(b"\t".join(fields))
    return b"".join(out), ids


def test_a_tsmc_file_with_latin1_categories_loads_with_them_intact(tmp_path: Path) -> None:
    """The public TSMC2014 files carry categories such as "Café" in Latin-1 (the code that
    ships with them opens them as Latin-1). A line that is not UTF-8 is read as Latin-1, a line
    that is stays UTF-8 (a file may mix them), and the load report says which and where."""
    import gzip

    log = poi_checkins(SMALL)
    first, second = int(log.venues[0]), int(log.venues[1])
    assert first != second
    raw, ids = _recategorised(log, {first: "Café".encode("latin-1"), second: "Crêperie".encode()})
    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    path.write_bytes(raw)
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")  # the file is not UTF-8 as a whole
    report = LoadReport(str(path))
    data = load(path, TableOptions(min_interactions=2), report)
    assert data.item_categories is not None
    cats = dict(zip(data.raw_item_ids, data.item_categories, strict=True))
    assert cats[ids[first]] == "Café" and cats[ids[second]] == "Crêperie"
    assert len(data) == len(pairs(log))  # every row read
    latin1_lines = int((log.venues == first).sum())
    line = raw[: raw.index("Café".encode("latin-1"))].count(b"\n") + 1
    offset = raw.index("Café".encode("latin-1")) + 3  # the byte 0xE9
    said = report.lines()[0]
    assert f"Latin-1 on {latin1_lines:,} lines that are not UTF-8" in said
    assert f"(the first: line {line}, byte offset {offset:,}, 0xE9), UTF-8 elsewhere" in said
    # the same from gzip
    gz = tmp_path / "checkins.txt.gz"
    gz.write_bytes(gzip.compress(raw))
    again = load(gz, TableOptions(min_interactions=2))
    assert again.item_categories == data.item_categories
    # a UTF-8 file says UTF-8
    utf8 = tmp_path / "utf8.txt"
    utf8.write_bytes(_recategorised(log, {first: "Café".encode()})[0])
    report = LoadReport(str(utf8))
    load(utf8, TableOptions(min_interactions=2), report)
    assert ", UTF-8, times as TSMC2014" in report.lines()[0]


def test_a_binary_file_is_refused_with_the_line_and_byte_offset(tmp_path: Path) -> None:
    """A file that is neither UTF-8 nor Latin-1 text (a control byte such as NUL) is refused
    naming the line and the byte offset, wherever the byte sits (past a block of 1 MiB too)."""
    lines = [f"{u}\t{u % 7}\t{1000 + u}\n".encode() for u in range(60_000)]  # ~1.1 MB
    for k in (3, 59_000):
        raw = b"".join(lines[:k]) + lines[k][:2] + b"\x00" + lines[k][2:] + b"".join(lines[k + 1 :])
        path = tmp_path / f"bad{k}.tsv"
        path.write_bytes(raw)
        offset = len(b"".join(lines[:k])) + 2
        with pytest.raises(DataError, match=rf"bad{k}.tsv:{k + 1}: byte 0x00 at byte offset {offset:,} "):
            load(path)
