"""Where attributes come from: ML-100k's user file, a --attributes CSV, and the refusals of a bad one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learning.interactions import DataError
from p2pnode.attacks.attributes import ml100k_attributes, read_attributes
from p2pnode.data.datasets import dataset_path


@pytest.mark.skipif(not (dataset_path(None) / "ml-100k.user").exists(), reason="ML-100k is not installed")
def test_ml100k_brings_004s_three_attributes() -> None:
    users = [str(u) for u in range(1, 944)]
    got = ml100k_attributes(None, users, (25.0, 45.0))
    assert got.names == ("gender", "age", "occupation")
    assert got["gender"].classes == ("F", "M") and np.bincount(got["gender"].labels).tolist() == [273, 670]
    assert got["age"].classes == ("<25", "25-45", ">=45")
    assert np.bincount(got["age"].labels).tolist() == [234, 504, 205]
    assert len(got["occupation"].classes) == 21 and got["occupation"].classes[0] == "administrator"
    assert got.first(10)["gender"].labels.tolist() == got["gender"].labels[:10].tolist()


def test_a_csv_of_the_files_own_user_ids_is_read_in_node_order(tmp_path: Path) -> None:
    f = tmp_path / "people.csv"
    f.write_text("id;sex;age\nalice;f;31\nbob;m;17\ncarol;f;52\ndave;m;44\n")
    got = read_attributes(f, ["bob", "alice", "zed", "carol"], 3, {"age": (25.0, 45.0)})
    assert got["sex"].labels.tolist() == [1, 0, -1, 0]
    assert got["age"].labels.tolist() == [0, 1, -1, 2]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "no such file"),
        ("id\nalice\nbob\n", "the header has one column"),
        ("id,sex\nx1,f\nx2,m\n", "none of the run's users is in it"),
        ("id,sex\nalice,f\nbob,f\n", "column 'sex' has one class only"),
        ("id,sex\nalice,f,extra\n", ":2: 3 columns where the header has 2"),
    ],
)
def test_a_wrong_attributes_file_gets_one_clear_line(tmp_path: Path, text: str | None, says: str) -> None:
    f = tmp_path / "attrs.csv"
    if text is not None:
        f.write_text(text)
    with pytest.raises(DataError, match=says):
        read_attributes(f, ["alice", "bob"], 3, {})
