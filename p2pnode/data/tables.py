"""Interaction files as users have them: the public check-in formats and plain CSV/TSV tables.

Read as distributed, with the format told from the content:

- ``tsmc2014``: Foursquare's dataset_TSMC2014_NYC.txt (Yang et al., TSMC 2014), tab-separated, no
  header, 8 columns: userId, venueId, venueCategoryId, venueCategory, latitude, longitude,
  timezoneOffset, utcTimestamp (``Tue Apr 03 18:00:09 +0000 2012``);
- ``snap``: SNAP's loc-gowalla_totalCheckins.txt, tab-separated, no header, 5 columns: user,
  check-in time (``2010-10-19T23:55:27Z``), latitude, longitude, location id;
- ``ratings``: MovieLens' ratings (``ratings.dat`` of ML-1M/10M: ``user::item::rating::time``,
  no header; ``u.data`` of ML-100k, tab-separated), 4 columns: user, item, rating, epoch seconds;
- ``table``: CSV or TSV whose header names its columns (``user``/``userId``, ``item``/``venue``/
  ``venueId``, ``timestamp``/``utcTimestamp``, ``category``, ``latitude``, ``longitude``,
  ``rating`` and their usual spellings; ``--columns`` names them otherwise), or two or three
  headerless columns user, item[, time].

Columns are separated by a tab, ``::``, ``,``, ``;`` or ``|``, told from the first line in that
order, or by ``--sep``. A rating column (``ratings``, a header's, or ``--columns rating=N``) is
kept as the interactions' explicit ratings.

Times may be epoch seconds, ISO 8601 or the TSMC2014 form. The CIA paper (000 §V-A) keeps every
observed interaction with value one: repeat visits of a venue become one interaction at the time
of the latest visit (the leave-one-out split reads only the latest one anyway). A region box
(``--bbox``, or the named ``nyc``) cuts a world-wide file to a city, as the paper's Gowalla-NYC is
cut from SNAP's file; then venues visited by fewer than ``--min-item-users`` users and users with
fewer than ``--min-interactions`` venues are dropped, in that order, once each. ``LoadReport``
says what each step left. A bad row is one error naming the file, the line and the field.

Text is read as UTF-8, and a line that is not UTF-8 as Latin-1 (the public TSMC2014 files carry
Latin-1 categories such as "Café"); ``LoadReport`` says which lines were. A file with a control
byte (NUL and the like) is not text and is refused, naming the line and the byte offset.
"""

from __future__ import annotations

import gzip
import math
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, cast

import numpy as np

from learning.interactions import DataError, Interactions

ROLES = ("user", "item", "time", "category", "lat", "lon", "rating")

#: spellings of each role in headers, compared without case, spaces, ``_``, ``-`` and ``:type``
SYNONYMS: dict[str, tuple[str, ...]] = {
    "user": ("user", "userid", "uid", "users", "userindex"),
    "item": (
        "item",
        "itemid",
        "venue",
        "venueid",
        "location",
        "locationid",
        "locid",
        "poi",
        "poiid",
        "spot",
        "spotid",
        "placeid",
        "movie",
        "movieid",
        "iid",
    ),
    "time": (
        "time",
        "timestamp",
        "utctimestamp",
        "ts",
        "datetime",
        "checkintime",
        "date",
        "utctime",
        "unixtime",
    ),
    "category": ("category", "venuecategory", "categoryname", "genre", "class"),
    "lat": ("lat", "latitude"),
    "lon": ("lon", "lng", "long", "longitude"),
    "rating": ("rating", "ratings", "score", "stars"),
}

#: the separators told from a file's first line, in this order (``::``: MovieLens-1M/10M's .dat)
SEPARATORS = ("\t", "::", ",", ";", "|")


@dataclass(frozen=True)
class BBox:
    """A latitude/longitude box, edges included."""

    lat_min: float
    lon_min: float
    lat_max: float
    lon_max: float

    def contains(self, lat: float, lon: float) -> bool:
        return self.lat_min <= lat <= self.lat_max and self.lon_min <= lon <= self.lon_max

    def __str__(self) -> str:
        return f"{self.lat_min:g},{self.lon_min:g},{self.lat_max:g},{self.lon_max:g}"


#: named regions: New York City's five boroughs (the extent of the city's boundary)
NAMED_BOXES = {"nyc": BBox(40.4774, -74.2591, 40.9176, -73.7004)}


def parse_bbox(text: str) -> BBox:
    """``LAT_MIN,LON_MIN,LAT_MAX,LON_MAX`` or a name of :data:`NAMED_BOXES`."""
    named = NAMED_BOXES.get(text.strip().lower())
    if named is not None:
        return named
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        names = ", ".join(NAMED_BOXES)
        raise DataError(f"--bbox {text!r}: give LAT_MIN,LON_MIN,LAT_MAX,LON_MAX or one of: {names}")
    box = BBox(*values)
    if not (-90 <= box.lat_min < box.lat_max <= 90 and -180 <= box.lon_min < box.lon_max <= 180):
        raise DataError(
            f"--bbox {text!r}: need -90 <= LAT_MIN < LAT_MAX <= 90 and -180 <= LON_MIN < LON_MAX <= 180"
        )
    return box


def parse_columns(text: str) -> dict[str, str]:
    """``user=userId,item=venueId,time=utcTimestamp``: role → header name (or column number from 1)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        role, sep, name = part.partition("=")
        role, name = role.strip().lower(), name.strip()
        if not sep or not name or role not in ROLES:
            raise DataError(
                f"--columns {text!r}: each entry is ROLE=COLUMN with ROLE one of {', '.join(ROLES)}"
            )
        if role in out:
            raise DataError(f"--columns {text!r}: {role} is named twice")
        out[role] = name
    if out and not {"user", "item"} <= set(out):
        raise DataError(f"--columns {text!r}: name at least the user and item columns")
    return out


# -- timestamps ----------------------------------------------------------------------------------

_MONTHS = {
    m: k
    for k, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1
    )
}
_TSMC = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2} [+-]\d{4} \d{4}$")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def tsmc_seconds(text: str) -> float:
    """``Tue Apr 03 18:00:09 +0000 2012`` → epoch seconds."""
    _, mon, day, clock, offset, year = text.split()
    h, m, s = clock.split(":")
    local = datetime(int(year), _MONTHS[mon], int(day), int(h), int(m), int(s), tzinfo=UTC)
    sign = -1 if offset[0] == "-" else 1
    return local.timestamp() - sign * (int(offset[1:3]) * 3600 + int(offset[3:5]) * 60)


def iso_seconds(text: str) -> float:
    """ISO 8601 (``2010-10-19T23:55:27Z``, with an offset, or a date) → epoch seconds; UTC if no zone."""
    d = datetime.fromisoformat(text)
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return d.timestamp()


def time_parser(sample: str) -> tuple[str, Callable[[str], float]] | None:
    """The kind and parser of a timestamp like ``sample``: epoch seconds, ISO 8601 or TSMC2014."""
    s = sample.strip()
    try:
        if math.isfinite(float(s)):
            return "epoch seconds", float
    except ValueError:
        pass
    if _ISO.match(s):
        return "ISO 8601", iso_seconds
    if _TSMC.match(s) and s.split()[1] in _MONTHS:
        return "TSMC2014", tsmc_seconds
    return None


# -- layouts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where each role sits in a row of a file (column indices from 0), and how it is split."""

    name: str
    sep: str
    header: bool
    columns: Mapping[str, int]
    width: int  #: fields every row has


_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.split(":")[0]).lower()


def sniff_separator(first: str) -> str:
    """The first of :data:`SEPARATORS` that ``first`` holds (``,`` where it holds none)."""
    return next((sep for sep in SEPARATORS if sep in first), ",")


def detect(first: str, columns: Mapping[str, str] | None = None, sep: str = "") -> Layout:
    """The layout of a file whose first non-empty line is ``first`` (columns separated by
    ``sep``, or by the separator :func:`sniff_separator` finds)."""
    sep = sep or sniff_separator(first)
    fields = [f.strip() for f in first.rstrip("\r\n").split(sep)]
    if columns:
        return _named_layout(fields, sep, columns)
    if len(fields) == 8 and _TSMC.match(fields[7]) and _is_coord(fields[4], fields[5]):
        return Layout(
            "tsmc2014", sep, False, {"user": 0, "item": 1, "category": 3, "lat": 4, "lon": 5, "time": 7}, 8
        )
    if len(fields) == 5 and _ISO.match(fields[1]) and _is_coord(fields[2], fields[3]):
        return Layout("snap", sep, False, {"user": 0, "time": 1, "lat": 2, "lon": 3, "item": 4}, 5)
    if len(fields) == 4 and _is_rating_row(fields):  # MovieLens: user item rating time
        return Layout("ratings", sep, False, {"user": 0, "item": 1, "rating": 2, "time": 3}, 4)
    found = _roles_in_header(fields)
    if {"user", "item"} <= set(found):
        return Layout("table", sep, True, found, len(fields))
    if len(fields) in (2, 3):
        roles = {"user": 0, "item": 1, **({"time": 2} if len(fields) == 3 else {})}
        return Layout("table", sep, False, roles, len(fields))
    raise DataError(
        f"cannot tell the columns of its {len(fields)}-field rows (split at {sep!r}): name them with "
        "--columns user=COLUMN,item=COLUMN[,time=COLUMN] (header names, or numbers from 1), and the "
        "separator with --sep where it is not a tab, '::', ',', ';' or '|'"
    )


def _is_rating_row(fields: list[str]) -> bool:
    """A headerless row as MovieLens writes its ratings: integer ids, a rating from 0 to 10 and
    epoch seconds after 1973 (four numbers of another kind are refused, not guessed at)."""
    user, item, rating, time = fields
    if not (user.isdigit() and item.isdigit() and _NUMBER.match(rating) and time.isdigit()):
        return False
    return 0 <= float(rating) <= 10 and int(time) >= 100_000_000


def _is_coord(lat: str, lon: str) -> bool:
    try:
        return abs(float(lat)) <= 90 and abs(float(lon)) <= 180
    except ValueError:
        return False


def _roles_in_header(fields: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for k, name in enumerate(fields):
        norm = _norm(name)
        for role, names in SYNONYMS.items():
            if norm in names and role not in found:
                found[role] = k
                break
    return found


def _named_layout(fields: list[str], sep: str, columns: Mapping[str, str]) -> Layout:
    """``--columns``: header names (the first line must be a header), or numbers from 1."""
    numbered = all(v.isdigit() for v in columns.values())
    if numbered:
        idx = {role: int(v) - 1 for role, v in columns.items()}
        bad = [f"{r}={v}" for r, v in columns.items() if not 0 <= int(v) - 1 < len(fields)]
        if bad:
            raise DataError(
                f"--columns {', '.join(bad)}: rows have {len(fields)} fields (numbers count from 1)"
            )
        header = all(not _NUMBER.match(fields[i]) for i in idx.values()) and _roles_in_header(fields) != {}
        return Layout("table", sep, header, idx, len(fields))
    where = {name: k for k, name in enumerate(fields)}
    lower = {name.lower(): k for k, name in enumerate(fields)}
    idx = {}
    for role, name in columns.items():
        k = where.get(name, lower.get(name.lower()))
        if k is None:
            raise DataError(
                f"--columns {role}={name}: the header has no such column; it has {', '.join(fields)}"
            )
        idx[role] = k
    return Layout("table", sep, True, idx, len(fields))


# -- reading -------------------------------------------------------------------------------------


#: bytes no text file holds (C0 controls other than tab, line feed, vertical tab, form feed and
#: carriage return): a file with one is binary, neither UTF-8 nor Latin-1 text
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f]")
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x20)])


@dataclass
class TextEncoding:
    """How a file's lines were decoded: UTF-8, and Latin-1 for each line that is not UTF-8
    (the public TSMC2014 files are read as Latin-1 by the code that ships with them)."""

    latin1_lines: int = 0
    first_latin1: tuple[int, int, int] | None = None  #: (line, byte offset in the file, the byte)

    def decode(self, raw: bytes, lineno: int, offset: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.latin1_lines += 1
            if self.first_latin1 is None:
                self.first_latin1 = (lineno, offset + exc.start, raw[exc.start])
            return raw.decode("latin-1")

    def __str__(self) -> str:
        if self.first_latin1 is None:
            return "UTF-8"
        line, offset, byte = self.first_latin1
        return (
            f"Latin-1 on {self.latin1_lines:,} line{'s' if self.latin1_lines != 1 else ''} that are not "
            f"UTF-8 (the first: line {line}, byte offset {offset:,}, 0x{byte:02X}), UTF-8 elsewhere"
        )


@dataclass
class LoadReport:
    """What a file gave and what each step of the preprocessing left: (step, rows, users, items)."""

    path: str
    layout: str = ""
    time_format: str = "row order"
    steps: list[tuple[str, int, int, int]] = field(default_factory=list)
    categories: int = 0
    encoding: TextEncoding = field(default_factory=TextEncoding)
    sep: str = ""
    ratings: tuple[float, float] | None = None  #: the lowest and highest rating, where there are ratings

    def add(self, step: str, data: Interactions) -> None:
        self.steps.append((step, len(data), data.n_users, data.n_items))

    def lines(self) -> list[str]:
        split = {"\t": "tab", ",": "comma", " ": "space"}.get(self.sep, repr(self.sep))
        out = [
            f"{self.path}: {self.layout} format, {split}-separated, {self.encoding}, "
            f"times as {self.time_format}"
            + (f", {self.categories} venue categories" if self.categories else "")
            + (f", ratings {self.ratings[0]:g} to {self.ratings[1]:g}" if self.ratings else "")
        ]
        out += [
            f"  {step:<34s} {rows:>9,} rows  {users:>7,} users  {items:>7,} items"
            for step, rows, users, items in self.steps
        ]
        return out


@dataclass(frozen=True)
class TableOptions:
    """How to read and preprocess an interaction file (see the module docstring). Hashable."""

    columns: tuple[tuple[str, str], ...] = ()  #: (role, column) pairs, from :func:`parse_columns`
    bbox: BBox | None = None
    sep: str = ""  #: the column separator ("": told from the first line, :func:`sniff_separator`)
    min_interactions: int = 5
    min_item_users: int = 1


def load(
    path: str | Path, options: TableOptions | None = None, report: LoadReport | None = None
) -> Interactions:
    """Read ``path`` and preprocess it (region, repeats, venue and user filters)."""
    opts = options or TableOptions()
    path = Path(path)
    rep = report if report is not None else LoadReport(str(path))
    users, items, times, cats, ratings = _read(path, opts, rep)
    if not users:
        where = f" inside --bbox {opts.bbox}" if opts.bbox else ""
        raise DataError(f"{path}: no interactions{where}")
    data = Interactions.from_raw(users, items, times, name=path.name, ratings=ratings)
    if ratings:
        rep.ratings = (min(ratings), max(ratings))
    if cats is not None:
        data = _with_categories(data, cats)
        rep.categories = len(set(cats.values()))
    rep.add("read" if opts.bbox is None else f"inside the box {opts.bbox}", data)
    data = distinct_pairs(data)
    rep.add("repeat visits as one interaction", data)
    if opts.min_item_users > 1:
        data = min_item_users(data, opts.min_item_users, path)
        rep.add(f"items with >= {opts.min_item_users} users", data)
    data = min_interactions(data, opts.min_interactions, path)
    rep.add(f"users with >= {opts.min_interactions} items", data)
    return data


def _lines(path: Path, encoding: TextEncoding | None = None) -> Iterator[tuple[int, str]]:
    """The numbered lines of a text file, a gzip file (SNAP ships ``.txt.gz``) or a zip archive
    (Foursquare ships ``dataset_tsmc2014.zip``: its one data file, or the one naming NYC), without
    their line feeds, each decoded as UTF-8 or, where that fails, as Latin-1 (``encoding`` counts
    them); a file with a control byte is refused, naming its line and byte offset. Read in blocks
    of whole lines, each decoded at once while it is UTF-8 (as fast as a text file object)."""
    enc = encoding if encoding is not None else TextEncoding()
    lineno = offset = 0
    try:
        with _open_binary(path) as fh:
            for block in _blocks(fh):
                if len(block.translate(None, _CONTROL_BYTES)) != len(block):  # 7x faster than a search
                    found = _CONTROL.search(block)
                    at = found.start() if found is not None else 0
                    line = lineno + block.count(b"\n", 0, at) + 1
                    raise DataError(
                        f"{path}:{line}: byte 0x{block[at]:02X} at byte offset {offset + at:,} is a "
                        "control character: not a text file (UTF-8 or Latin-1), gzip or zip archive"
                    )
                try:
                    texts = block.decode("utf-8").split("\n")
                except UnicodeDecodeError:
                    texts, at = [], offset
                    for k, raw in enumerate(block.split(b"\n"), start=lineno + 1):
                        texts.append(enc.decode(raw, k, at))
                        at += len(raw) + 1
                if not texts[-1]:  # the block ends with a line feed
                    texts.pop()
                yield from enumerate(texts, start=lineno + 1)
                lineno += len(texts)
                offset += len(block)
    except FileNotFoundError:
        raise DataError(f"dataset file {path} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"dataset file {path} is a directory") from None
    except (gzip.BadGzipFile, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise DataError(
            f"{path}: not a UTF-8 or Latin-1 text file, gzip or zip archive ({type(exc).__name__}: {exc})"
        ) from None


def _blocks(fh: IO[bytes], size: int = 1 << 20) -> Iterator[bytes]:
    """``fh``'s bytes in blocks of about ``size`` that end at a line feed (the last: at the end)."""
    rest = b""
    while chunk := fh.read(size):
        chunk = rest + chunk
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:  # no line end yet: a line longer than a block
            rest = chunk
            continue
        rest = chunk[cut:]
        yield chunk[:cut]
    if rest:
        yield rest


def _open_binary(path: Path) -> IO[bytes]:
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return cast(IO[bytes], gzip.open(path, "rb"))
    if magic == b"PK\x03\x04":
        archive = zipfile.ZipFile(path)
        names = [
            n
            for n in archive.namelist()
            if n.lower().endswith((".txt", ".csv", ".tsv", ".dat"))
            and "readme" not in n.lower()
            and not n.startswith("__MACOSX")
        ]
        if len(names) > 1:  # Foursquare's NYC file; MovieLens' ratings beside its users and movies
            names = (
                [n for n in names if "nyc" in n.lower()]
                or [n for n in names if "rating" in n.lower()]
                or names
            )
        if len(names) != 1:
            raise DataError(
                f"{path}: a zip archive with {len(names)} data files ({', '.join(names)}); "
                "unzip it and give the file you want"
            )
        return archive.open(names[0])
    return path.open("rb")


def _read(
    path: Path, opts: TableOptions, rep: LoadReport
) -> tuple[list[str], list[str], list[float], dict[str, str] | None, list[float] | None]:
    """Rows of the file inside the box: raw users, items, times, item → category and ratings."""
    users: list[str] = []
    items: list[str] = []
    times: list[float] = []
    cats: dict[str, str] | None = None
    ratings: list[float] | None = None
    layout: Layout | None = None
    parse_time: Callable[[str], float] | None = None
    box = opts.bbox
    ui = ii = ti = ci = lai = loi = ri = -1
    for lineno, raw in _lines(path, rep.encoding):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if layout is None:
            try:
                layout = detect(line, dict(opts.columns), opts.sep)
            except DataError as exc:
                raise DataError(f"{path}:{lineno}: {exc}") from None
            rep.layout, rep.sep = layout.name, layout.sep
            if box is not None and not {"lat", "lon"} <= set(layout.columns):
                raise DataError(
                    f"{path}: --bbox needs latitude and longitude columns (name them with --columns)"
                )
            c = layout.columns
            ui, ii = c["user"], c["item"]
            ti, ci, lai, loi = c.get("time", -1), c.get("category", -1), c.get("lat", -1), c.get("lon", -1)
            ri = c.get("rating", -1)
            if ci >= 0:
                cats = {}
            if ri >= 0:
                ratings = []
            if layout.header:
                continue
        fields = line.split(layout.sep)
        if len(fields) != layout.width:
            raise DataError(f"{path}:{lineno}: {len(fields)} fields where earlier rows have {layout.width}")
        user, item = fields[ui].strip(), fields[ii].strip()
        if not user:
            raise DataError(f"{path}:{lineno}: field user is empty")
        if not item:
            raise DataError(f"{path}:{lineno}: field item is empty")
        if box is not None:
            lat = _float(fields[lai], path, lineno, "latitude")
            lon = _float(fields[loi], path, lineno, "longitude")
            if not box.contains(lat, lon):
                continue
        if ti >= 0:
            text = fields[ti].strip()
            if parse_time is None:
                found = time_parser(text)
                if found is None:
                    raise DataError(_bad_time(path, lineno, text, layout.header))
                rep.time_format, parse_time = found
            try:
                t = parse_time(text)
            except (ValueError, KeyError, OverflowError):
                raise DataError(
                    f"{path}:{lineno}: field time {text!r} is not a timestamp in {rep.time_format} "
                    "like the first row's"
                ) from None
        else:
            t = float(lineno)
        users.append(user)
        items.append(item)
        times.append(t)
        if cats is not None and item not in cats:
            cats[item] = fields[ci].strip()
        if ratings is not None:
            ratings.append(_float(fields[ri], path, lineno, "rating"))
    if layout is None:
        raise DataError(f"{path}: the file is empty")
    return users, items, times, cats, ratings


def _float(text: str, path: Path, lineno: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataError(f"{path}:{lineno}: field {what} {text.strip()!r} is not a number")
    return value


def _bad_time(path: Path, lineno: int, text: str, header: bool) -> str:
    hint = (
        ""
        if header
        else " (if this line is a header, name its columns with --columns user=...,item=...,time=...)"
    )
    return (
        f"{path}:{lineno}: field time {text!r} is not a timestamp (epoch seconds, ISO 8601 such as "
        f"2010-10-19T23:55:27Z, or Tue Apr 03 18:00:09 +0000 2012){hint}"
    )


# -- preprocessing -------------------------------------------------------------------------------


def _with_categories(data: Interactions, cats: Mapping[str, str]) -> Interactions:
    return Interactions(
        data.users,
        data.items,
        data.timestamps,
        data.raw_user_ids,
        data.raw_item_ids,
        data.name,
        tuple(cats[i] for i in data.raw_item_ids),
        data.ratings,
    )


def distinct_pairs(data: Interactions) -> Interactions:
    """One interaction per (user, item), at the time of the latest one (000 §V-A: value one),
    with that one's rating (a rating changed later is the user's rating)."""
    order = np.lexsort((data.timestamps, data.items, data.users))
    u, i, t = data.users[order], data.items[order], data.timestamps[order]
    last = np.ones(len(u), dtype=bool)
    last[:-1] = (u[1:] != u[:-1]) | (i[1:] != i[:-1])
    ratings = data.rows_ratings(order)
    return Interactions(
        u[last],
        i[last],
        t[last],
        data.raw_user_ids,
        data.raw_item_ids,
        data.name,
        data.item_categories,
        None if ratings is None else ratings[last],
    )


def min_item_users(data: Interactions, minimum: int, path: Path) -> Interactions:
    """Drop items with fewer than ``minimum`` distinct users (renumbering the items kept)."""
    pairs = np.unique(np.stack((data.users, data.items)), axis=1)
    counts = np.bincount(pairs[1], minlength=data.n_items)
    keep = np.flatnonzero(counts >= minimum)
    if len(keep) < 2:
        raise DataError(
            f"{path}: only {len(keep)} item(s) have at least {minimum} users (lower --min-item-users)"
        )
    new_id = np.full(data.n_items, -1, dtype=np.int64)
    new_id[keep] = np.arange(len(keep))
    mask = new_id[data.items] >= 0
    cats = data.item_categories
    return Interactions(
        data.users[mask],
        new_id[data.items[mask]],
        data.timestamps[mask],
        data.raw_user_ids,
        tuple(data.raw_item_ids[i] for i in keep),
        data.name,
        None if cats is None else tuple(cats[i] for i in keep),
        data.rows_ratings(mask),
    ).without_absent_users()


def min_interactions(data: Interactions, minimum: int, path: Path) -> Interactions:
    """Drop users with fewer than ``minimum`` distinct items, renumbering the users kept."""
    pairs = np.unique(np.stack((data.users, data.items)), axis=1)
    counts = np.bincount(pairs[0], minlength=data.n_users)
    keep_users = np.flatnonzero(counts >= max(minimum, 1))
    if len(keep_users) < 2:
        ranked = np.sort(counts)[::-1]
        if len(ranked) < 2 or ranked[1] < 2:  # no lower minimum makes a network of two users
            raise DataError(
                f"{path}: {len(ranked)} user(s), {int((counts >= 2).sum())} of them with 2 items or more: "
                "a network needs at least 2 users with 2 items each (one to train on, one held out)"
            )
        raise DataError(
            f"{path}: only {len(keep_users)} user(s) have at least {minimum} items (give "
            f"--min-interactions at most {int(ranked[1])} to keep 2 users or more)"
        )
    return data.keep_users(keep_users)
