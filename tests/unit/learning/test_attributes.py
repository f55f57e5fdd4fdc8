"""Users' attributes: categorical and binned columns, the age cut, planted attributes, bad files."""

from __future__ import annotations

import numpy as np
import pytest

from learning.attributes import AGE_CUTS, binned, categorical, from_rows, planted, quantile_cuts
from learning.interactions import DataError


def test_categorical_and_binned_attributes_index_their_classes() -> None:
    g = categorical("gender", ["M", "F", None, "M"])
    assert g.classes == ("F", "M") and g.labels.tolist() == [1, 0, -1, 1] and g.binary
    age = binned("age", [7.0, 24.0, 25.0, 44.0, 45.0, 73.0, None], AGE_CUTS)
    assert age.classes == ("<25", "25-45", ">=45")
    assert age.labels.tolist() == [0, 0, 1, 1, 2, 2, -1]
    with pytest.raises(DataError, match="ascending"):
        binned("age", [1.0], (45.0, 25.0))
    assert quantile_cuts([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3) == (pytest.approx(8 / 3), pytest.approx(13 / 3))


def test_rows_of_a_file_become_the_runs_attributes_in_node_order() -> None:
    rows = {
        "u1": {"sex": "f", "age": "31", "job": "x"},
        "u2": {"sex": "m", "age": "18", "job": "y"},
        "u3": {"sex": "m", "age": "60", "job": "x"},
        "other": {"sex": "f", "age": "40", "job": "z"},
    }
    got = from_rows(rows, ["u3", "u1", "u9", "u2"], cuts={"age": (25, 45)})
    assert got.names == ("sex", "age", "job")
    assert got["sex"].labels.tolist() == [1, 0, -1, 1]
    assert got["age"].labels.tolist() == [2, 1, -1, 0]  # numbers binned at the given cuts
    assert got["job"].classes == ("x", "y") and got.first(2)["job"].labels.tolist() == [0, 0]
    with pytest.raises(DataError, match="none of the run's users is in it"):
        from_rows(rows, ["a", "b"])
    with pytest.raises(DataError, match="one class only"):
        from_rows({"u1": {"c": "a"}, "u2": {"c": "a"}}, ["u1", "u2"])


def test_a_planted_attribute_follows_the_community_with_its_strength() -> None:
    community = np.repeat(np.arange(4), 250)
    tied = planted(community, 2, 1.0, seed=3)
    assert (tied.labels == community % 2).all()
    free = planted(community, 2, 0.0, seed=3)
    agree = float((free.labels == community % 2).mean())
    assert 0.45 < agree < 0.55  # drawn uniformly: no tie to the community
    half = planted(community, 2, 0.5, seed=3)
    assert 0.7 < float((half.labels == community % 2).mean()) < 0.8  # 0.5 + 0.5 x 0.5
