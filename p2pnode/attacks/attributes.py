"""The run's users' attributes and its attribute inference (``--attack aia``, paper 004 §II-B).

Where the attributes come from: ML-100k's ``ml-100k.user`` (gender, age in ``--age-cuts`` groups,
occupation: 004's three), a ``--attributes FILE`` CSV for a file dataset (the file's own user ids
in the first column, then any columns), or the synthetic generator's planted attribute. The attack
itself is pure (``adversary.aia``); this module feeds it the run's data and its torch classifier.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adversary.aia import AiaLab, AiaSettings
from adversary.models import attack_model
from learning.attributes import Attributes, binned, categorical, from_rows, planted
from learning.interactions import DataError
from learning.params import Array
from p2pnode.config import ConfigError, parse_cuts
from p2pnode.data.datasets import ML100K, dataset_path
from p2pnode.nodes.node import NodeRuntime
from p2pnode.nodes.prepare import Prepared


def attributes_for(prep: Prepared) -> Attributes:
    """The attributes of the run's users, in node order (built once per Prepared)."""
    if "attributes" not in prep.cache:
        prep.cache["attributes"] = _load(prep)
    found: Attributes = prep.cache["attributes"]
    return found


def _load(prep: Prepared) -> Attributes:
    cfg = prep.config
    cuts = parse_cuts(cfg.age_cuts)
    raw = list(prep.data.raw_user_ids) if prep.data is not None else [str(u) for u in range(cfg.nodes)]
    if cfg.attributes:
        return read_attributes(Path(cfg.attributes), raw, cfg.attribute_bins, {"age": cuts})
    if cfg.dataset == ML100K:
        return ml100k_attributes(cfg.data_dir or None, raw, cuts)
    if cfg.dataset == "synthetic" and prep.planted is not None:
        community = [prep.planted.community_of(u) for u in range(cfg.nodes)]
        return Attributes((planted(community, 2, cfg.synthetic.attribute_strength, cfg.seed),))
    raise ConfigError(
        f"--attack aia: {Path(cfg.dataset).name} brings no user attributes; give --attributes FILE, a CSV "
        "whose first column holds the file's own user ids and whose other columns the attributes"
    )


def ml100k_attributes(
    data_dir: str | None, raw_user_ids: Iterable[str], age_cuts: tuple[float, ...]
) -> Attributes:
    """004's three attributes of ML-100k's users: gender (F, M), age in ``age_cuts`` groups, and
    occupation (21 classes, in the file's order of names)."""
    path = dataset_path(data_dir) / "ml-100k.user"
    if not path.exists():
        raise DataError(f"MovieLens-100k user data is not in {path.parent}; run `p2pnode data get ml-100k`")
    rows: dict[str, dict[str, str]] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        header = [h.split(":")[0] for h in fh.readline().rstrip("\n").split("\t")]
        if not {"user_id", "age", "gender", "occupation"} <= set(header):
            raise DataError(f"{path}: header {header} lacks user_id, age, gender or occupation")
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == len(header):
                row = dict(zip(header, parts, strict=True))
                rows[row["user_id"]] = row
    users = list(raw_user_ids)
    occupations = sorted({r["occupation"] for r in rows.values()})
    return Attributes(
        (
            categorical("gender", [rows[u]["gender"] if u in rows else None for u in users], ("F", "M")),
            binned("age", [float(rows[u]["age"]) if u in rows else None for u in users], age_cuts),
            categorical(
                "occupation", [rows[u]["occupation"] if u in rows else None for u in users], occupations
            ),
        )
    )


def read_attributes(
    path: Path, raw_user_ids: list[str], bins: int, cuts: Mapping[str, tuple[float, ...]]
) -> Attributes:
    """A ``--attributes`` CSV (comma, tab or semicolon separated, with a header): the first column
    the data file's own user ids, every other column one attribute. One clear line (DataError) for
    a file that is not there, has no attribute column, names none of the run's users, or holds one
    class only in a column."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise DataError(f"--attributes {path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"--attributes {path}: a directory, not a CSV file") from None
    lines = text.splitlines()
    if len(lines) < 2:
        raise DataError(f"--attributes {path}: needs a header line and one line per user")
    dialect = csv.Sniffer().sniff(lines[0], delimiters=",\t;") if any(c in lines[0] for c in ",\t;") else None
    if dialect is None:
        raise DataError(
            f"--attributes {path}: the header has one column; give the user id and attribute columns"
        )
    reader = csv.reader(lines, dialect)
    header = [h.strip() for h in next(reader)]
    rows: dict[str, dict[str, str]] = {}
    for lineno, parts in enumerate(reader, start=2):
        if not parts:
            continue
        if len(parts) != len(header):
            raise DataError(
                f"--attributes {path}:{lineno}: {len(parts)} columns where the header has {len(header)}"
            )
        rows[parts[0].strip()] = {h: v.strip() for h, v in zip(header[1:], parts[1:], strict=True)}
    return from_rows(rows, raw_user_ids, bins, cuts, source=f"--attributes {path}")


def aia_lab_for(prep: Prepared) -> AiaLab | None:
    """The run's attribute inference (None without ``--attack aia``), built once per Prepared."""
    cfg = prep.config
    if not cfg.attack.aia:
        return None
    if "aia_lab" not in prep.cache:
        from learning.attribute_mlp import train  # torch: loaded by runs that attack attributes

        a = cfg.attack
        settings = AiaSettings(public=a.aia_public, select=a.aia_select, epochs=a.aia_epochs, seed=cfg.seed)
        positives = (
            {u: data.train_items for u, data in enumerate(prep.users)} if a.aia_items == "oracle" else None
        )
        prep.cache["aia_lab"] = AiaLab(
            attributes_for(prep),
            settings,
            train,
            attack_model(cfg.model),
            positives,
            a.aia_top_m,
            items=a.aia_items,
            user_part=a.aia_user,
        )
    lab: AiaLab = prep.cache["aia_lab"]
    return lab


def shared_models(nodes: Iterable[NodeRuntime], users: int) -> dict[int, Mapping[str, Array]]:
    """Every user node's current model as it shares it (the omniscient observer's view; under
    Share less without its user row), read in place: the evaluation runs between rounds."""
    out: dict[int, Mapping[str, Array]] = {}
    for node in nodes:
        if node.node_id >= users:
            continue  # the FedAvg server
        learner: Any = node.learner
        names = getattr(learner, "shared_names", None)
        params = getattr(learner, "params", None)
        out[node.node_id] = (
            {k: params[k] for k in names} if names and params is not None else learner.snapshot()
        )
    return out
