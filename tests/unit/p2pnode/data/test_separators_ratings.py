"""Column separators other than tab and comma (MovieLens-1M/10M's ``::``, ``--sep``), and
explicit ratings kept as a column of the interactions (the KNN work of paper 003 reads them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learning.interactions import DataError
from p2pnode.config import ConfigError, RunConfig
from p2pnode.data.datasets import load_ml100k
from p2pnode.data.tables import LoadReport, TableOptions, load, parse_columns, sniff_separator

#: ML-1M's ratings.dat as distributed: UserID::MovieID::Rating::Timestamp, no header
ML1M = [
    (1, 1193, 5, 978300760),
    (1, 661, 3, 978302109),
    (1, 914, 3, 978301968),
    (2, 1193, 4, 978298413),
    (2, 661, 2, 978299026),
    (2, 914, 1, 978299812),
    (3, 1193, 2, 978297867),
    (3, 661, 4, 978298147),
]


def _ratings_dat(path: Path, rows: list[tuple[int, int, int, int]] = ML1M) -> Path:
    path.write_text("".join(f"{u}::{i}::{r}::{t}\n" for u, i, r, t in rows))
    return path


def _rating_of(data: object, user: str, item: str) -> float:
    d = data
    u = d.raw_user_ids.index(user)  # type: ignore[attr-defined]
    i = d.raw_item_ids.index(item)  # type: ignore[attr-defined]
    k = np.flatnonzero((d.users == u) & (d.items == i))  # type: ignore[attr-defined]
    assert len(k) == 1
    return float(d.ratings[k[0]])  # type: ignore[attr-defined]


def test_movielens_1m_ratings_dat_loads_as_distributed_with_its_ratings(tmp_path: Path) -> None:
    path = _ratings_dat(tmp_path / "ratings.dat")
    report = LoadReport(str(path))
    data = load(path, TableOptions(min_interactions=2), report)
    assert (len(data), data.n_users, data.n_items) == (8, 3, 3)
    assert data.ratings is not None and sorted(data.ratings.tolist()) == sorted(r for *_, r, _ in ML1M)
    assert _rating_of(data, "2", "914") == 1.0 and _rating_of(data, "1", "1193") == 5.0
    assert report.lines()[0].endswith(
        "ratings format, '::'-separated, UTF-8, times as epoch seconds, ratings 1 to 5"
    )
    # the command: --columns by number with '::' told from the file; no rating named, none kept
    named = load(
        path, TableOptions(columns=tuple(parse_columns("user=1,item=2,time=4").items()), min_interactions=2)
    )
    assert len(named) == 8 and named.ratings is None
    with_rating = parse_columns("user=1,item=2,rating=3,time=4")
    rated = load(path, TableOptions(columns=tuple(with_rating.items()), sep="::", min_interactions=2))
    assert rated.ratings is not None and np.array_equal(rated.ratings, data.ratings)


def test_four_numbers_that_are_not_movielens_ratings_are_refused_not_guessed_at(tmp_path: Path) -> None:
    for row in ("1,2,3,4", "1::2::3.5::978300760.5", "1\t2\t11\t978300760", "u1::2::3::978300760"):
        path = tmp_path / "four.txt"
        path.write_text(row + "\n")
        with pytest.raises(DataError, match="cannot tell the columns of its 4-field rows"):
            load(path)


def test_a_separator_given_with_sep_splits_every_row(tmp_path: Path) -> None:
    path = tmp_path / "semi.txt"
    path.write_text("user;item;rating;time\n" + "".join(f"{u};{i};{r};{t}\n" for u, i, r, t in ML1M))
    data = load(path, TableOptions(min_interactions=2))  # ';' told from the header
    assert data.ratings is not None and len(data) == 8
    spaced = tmp_path / "spaced.txt"
    spaced.write_text("".join(f"{u} {i} {t}\n" for u, i, _r, t in ML1M))
    with pytest.raises(DataError, match=r"1-field rows \(split at ','\).*--sep"):
        load(spaced, TableOptions(min_interactions=2))
    data = load(spaced, TableOptions(sep=" ", min_interactions=2))
    assert len(data) == 8 and data.ratings is None
    assert [sniff_separator(x) for x in ("a\tb,c", "1::2", "a,b;c", "a;b", "a|b", "ab")] == [
        "\t",
        "::",
        ",",
        ";",
        "|",
        ",",
    ]


def test_ratings_follow_the_rows_through_every_step_of_the_preprocessing(tmp_path: Path) -> None:
    """A repeat keeps the latest rating; dropped items and users take their ratings with them;
    the first N users keep theirs."""
    rows = [*ML1M, (1, 1193, 1, 978400000)]  # user 1 re-rated 1193 later: 1 star now
    rows += [(4, 5000, 5, 978300000), (4, 661, 3, 978300001)]  # item 5000 has one user
    path = _ratings_dat(tmp_path / "ratings.dat", rows)
    data = load(path, TableOptions(min_interactions=2, min_item_users=2))
    assert _rating_of(data, "1", "1193") == 1.0  # the latest
    assert "5000" not in data.raw_item_ids and "4" not in data.raw_user_ids  # left with one item
    assert data.ratings is not None and len(data.ratings) == len(data)
    for user, item, rating, _t in ML1M[3:]:
        assert _rating_of(data, str(user), str(item)) == rating
    first = data.subset_users(2)
    assert first.ratings is not None and len(first.ratings) == len(first)
    assert _rating_of(first, "2", "661") == 2.0


def test_a_rating_that_is_not_a_number_names_its_line(tmp_path: Path) -> None:
    path = _ratings_dat(tmp_path / "ratings.dat")
    path.write_text(path.read_text() + "3::914::five::978298200\n")
    columns = tuple(parse_columns("user=1,item=2,rating=3,time=4").items())
    with pytest.raises(DataError, match=r"ratings.dat:9: field rating 'five' is not a number"):
        load(path, TableOptions(columns=columns, min_interactions=2))


def test_sep_is_a_setting_of_file_datasets_and_table_options_carry_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _ratings_dat(tmp_path / "ratings.dat")
    config = RunConfig(dataset=str(path), sep="::", columns="user=1,item=2,rating=3,time=4").validate()
    assert config.table_options().sep == "::"
    from p2pnode.cli import main

    assert main(["simulate", "--sep", "::", "--nodes", "10", "--rounds", "1"]) == 2  # ml-100k: not a file
    assert "--sep has no effect without --dataset FILE" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="line break"):
        RunConfig(dataset=str(path), sep="\n").validate()


def test_movielens_100k_keeps_its_ratings(tmp_path: Path) -> None:
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    (folder / "ml-100k.inter").write_text(
        "user_id:token\titem_id:token\trating:float\ttimestamp:float\n196\t242\t3\t881250949\n186\t302\t5\t891717742\n"
    )
    data = load_ml100k(tmp_path)
    assert data.ratings is not None and sorted(data.ratings.tolist()) == [3.0, 5.0]
    assert _rating_of(data, "186", "302") == 5.0
