"""Model bodies in full or as row deltas against a version the receiver has acknowledged.

A sender remembers, per peer, the last model that peer acknowledged (HTTP 200). For the next
model it sends only the rows of each 2-D parameter that differ from that base, with their new
values (not differences, so the receiver rebuilds the model bit for bit), when that is smaller
than the full model. A receiver remembers the last model from each sender; a delta against a base
it no longer holds is refused with reason ``no-base`` (409) and the sender falls back to full.
With ``float16`` every float tensor travels in half precision; both sides then hold the rounded
values, so later deltas stay exact with respect to what was sent.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from learning.history import Base, BaseGone, ParamHistory
from learning.params import ModelSpec, Params, ParamsView, TensorSpec
from p2pnode.wire.schema import MAX_TENSORS, WireError
from p2pnode.wire.tensors import pack_tensor, unpack_tensor, unpack_tensors


class EncodedModel(NamedTuple):
    """A model body ready for the frame, and what the receiver will hold once it accepts it."""

    body: dict[str, Any]
    view: ParamsView
    is_delta: bool
    nbytes: int
    base: Base | None = None  #: the base opened on the model sent (held until the send settles)
    against: Base | None = None  #: the base a delta was made against (held until it settles)


class DeltaEncoder:
    """Per-node sender side: chooses full or delta per peer and tracks acknowledged bases.

    It keeps one base model (the latest one any peer acknowledged) and, per peer, the version of
    it that peer acknowledged. Older bases are not worth their memory: a merge changes every row,
    so a delta only ever wins against the sender's most recent acknowledged model.

    With the learner's ``history`` (learning/history.py) a base is not a copy of the model: it is
    opened on the live model when a snapshot is encoded (if nothing was written since the
    snapshot was taken) and keeps only the rows changed since; it closes once so many rows changed
    that no delta against it could be sent. Without a history, or with float16 (both sides hold
    rounded values), the base is the snapshot itself.
    """

    def __init__(
        self,
        enabled: bool = True,
        float16: bool = False,
        max_peers: int = 64,
        min_saving: float = 0.1,
        history: ParamHistory | None = None,
        budget: float = float("inf"),
    ) -> None:
        self.enabled = enabled
        #: bytes of changed rows a base may save (with ``history``): past them it closes and the
        #: next model goes in full. Binds only where it is below the delta rule's own limit
        #: (90% of a model), so models of up to ~850 kB send the same bytes with it as without.
        self.budget = budget
        self.float16 = float16
        self.max_peers = max_peers
        self.min_saving = min_saving
        self.history = history if enabled and not float16 else None
        self._base: tuple[int, ParamsView] | None = None
        self._acked: OrderedDict[int, int] = OrderedDict()
        self._open: dict[int, Base] = {}  #: per version: the base opened when it was encoded
        #: without a history: the last model sent whole, which receivers in this process may keep
        #: in place of their own decoded copy (a FedAvg server's global model, sent to every client)
        self._last_whole: tuple[int, ParamsView] | None = None

    def encode(self, peer: int, version: int, params: ParamsView) -> EncodedModel:
        view = _round16(params) if self.float16 else params
        dtype = "float16" if self.float16 else None
        base = self._base
        opened = self._open_base(version, params)
        if self.enabled and base is not None and self._acked.get(peer) == base[0]:
            try:
                delta = self._delta(version, base, view, dtype)
            except BaseGone:
                delta = None
            if delta is not None:
                against = base[1] if isinstance(base[1], Base) else None
                if against is not None and self.history is not None:
                    self.history.hold(against)  # the receivers of this delta read it until then
                    self.history.read(against)
                return EncodedModel(delta[0], view, True, delta[1], opened, against)
        packed = {}
        nbytes = 0
        for k, v in view.items():
            packed[k] = pack_tensor(v, dtype)
            nbytes += v.nbytes
        body = {"ver": version, "p": packed}
        if self.history is None:
            self._last_whole = (version, view)
        return EncodedModel(body, view, False, nbytes // 2 if dtype else nbytes, opened)

    def _open_base(self, version: int, params: ParamsView) -> Base | None:
        """A base on the live model for ``version``, if the live model is ``params`` (no write
        since the snapshot); held until the send settles."""
        history = self.history
        if history is None or getattr(params, "stamp", -1) != history.stamp:
            return None
        base = self._open.get(version)
        if base is None or not base.alive:
            self._drop_closed()
            full = sum(v.nbytes for v in params.values())
            dense = sum(v.nbytes for v in params.values() if v.ndim != 2)
            limit = min((1.0 - self.min_saving) * full - dense, self.budget)
            base = history.open(version, tuple(params), limit)
            self._open[version] = base
        history.hold(base)
        return base

    def base_for(self, version: int) -> Base | None:
        """The open base of the model this node encoded as ``version`` (None: none is open)."""
        base = self._open.get(version)
        return base if base is not None and base.alive else None

    def shared(self, version: int) -> ParamsView | None:
        """What a receiver in this process may keep as its base of ``version`` instead of the copy
        it decoded: the open base on the live model, or, without a history, the model last sent
        whole (the same values; nothing writes to a sent snapshot)."""
        base = self.base_for(version)
        if base is not None:
            return base
        last = self._last_whole
        return last[1] if last is not None and last[0] == version else None

    def settled(self, encoded: EncodedModel) -> None:
        """A send is over (answered or failed): it no longer holds the bases it opened or was
        made against."""
        if self.history is None:
            return
        if encoded.against is not None:
            self.history.unread(encoded.against)
        for base in (encoded.base, encoded.against):
            if base is not None:
                self.history.release(base)
        self._drop_closed()

    def _drop_closed(self) -> None:
        """Forget the bases that closed (released, or over their budget): one a model version,
        kept for ever, was a daemon's steady growth (the hour's soak: ~1 MB a minute a process;
        2,896 kept after 7 min at 12 nodes)."""
        for old in [v for v, b in self._open.items() if not b.alive]:
            del self._open[old]

    def _delta(
        self, version: int, base: tuple[int, ParamsView], view: ParamsView, dtype: str | None
    ) -> tuple[dict[str, Any], int] | None:
        base_version, base_params = base
        if set(base_params) != set(view):
            return None
        full_bytes = 0
        delta_bytes = 0
        row_bytes = 0  #: the part of delta_bytes that is changed rows
        dense: dict[str, Any] = {}
        rows: dict[str, Any] = {}
        for name, arr in view.items():
            itemsize = 2 if dtype == "float16" else arr.itemsize
            full_bytes += arr.size * itemsize
            changed = self._changed(base_params, name, arr) if arr.ndim == 2 else None
            if changed is not None:
                row_bytes += changed.size * (4 + arr.shape[1] * itemsize)
                rows[name] = (changed, arr)
            else:
                delta_bytes += arr.size * itemsize
                dense[name] = pack_tensor(arr, dtype)
        delta_bytes += row_bytes
        if delta_bytes > (1.0 - self.min_saving) * full_bytes:
            return None
        if isinstance(base_params, Base) and row_bytes > base_params.limit:  # the budget below the rule
            return None
        packed_rows = {
            name: {"i": pack_tensor(idx), "v": pack_tensor(arr[idx], dtype)}
            for name, (idx, arr) in rows.items()
        }
        body = {"ver": version, "base": base_version, "p": dense, "r": packed_rows}
        return body, delta_bytes

    @staticmethod
    def _changed(base_params: ParamsView, name: str, arr: Any) -> Any:
        """Rows of ``arr`` that differ from the base (None: the shapes differ, send it whole)."""
        if isinstance(base_params, Base):
            if base_params.history.params[name].shape != arr.shape:
                return None
            return base_params.changed_rows(name, arr).astype(np.int32)
        old = base_params[name]
        if old.shape != arr.shape:
            return None
        return np.flatnonzero((arr != old).any(axis=1)).astype(np.int32)

    def acknowledged(self, peer: int, version: int, view: ParamsView | None) -> None:
        """The peer accepted ``view``; deltas to it may now be based on it. ``view`` None: the
        sender did not keep the model it sent; the base opened on its live model when it was
        encoded stands for it while that base is open, and without one the peer's next model goes
        whole."""
        if not self.enabled:
            return
        if self._base is None or version >= self._base[0]:
            opened = self.base_for(version)
            new: ParamsView
            if opened is not None:
                new = opened
            elif view is not None:
                new = view
            else:
                self.forget(peer)
                return
            old = self._base
            if opened is not None and (old is None or old[1] is not opened):
                assert self.history is not None
                self.history.hold(opened)
            if old is not None and isinstance(old[1], Base) and old[1] is not new:
                assert self.history is not None
                self.history.release(old[1])
            self._base = (version, new)
        self._acked[peer] = version
        self._acked.move_to_end(peer)
        while len(self._acked) > self.max_peers:
            self._acked.popitem(last=False)

    def forget(self, peer: int) -> None:
        """The peer lacks our base (or failed): next message to it goes in full."""
        self._acked.pop(peer, None)


class DeltaDecoder:
    """Per-node receiver side: rebuilds models and keeps the last one from each sender."""

    def __init__(self, enabled: bool = True, max_peers: int = 8) -> None:
        self.enabled = enabled
        self.max_peers = max_peers
        self._bases: OrderedDict[int, tuple[int, ParamsView]] = OrderedDict()

    def decode(self, sender: int, body: object, spec: ModelSpec) -> tuple[int, ParamsView]:
        """Check ``body`` against ``spec`` and return (version, parameters). Raises WireError."""
        if type(body) is dict and len(body) == 2:  # the common case: a full model
            version, dense = body.get("ver"), body.get("p")
            if type(version) is int and version >= 0 and type(dense) is dict and dense.keys() == spec.keys():
                params = unpack_tensors(dense, spec)
                self._remember(sender, version, params)
                return version, params
        return self._decode_general(sender, body, spec)

    def _decode_general(self, sender: int, body: object, spec: ModelSpec) -> tuple[int, ParamsView]:
        if not isinstance(body, dict) or not {"ver", "p"} <= set(body) <= {"ver", "p", "base", "r"}:
            raise WireError("schema", "model body must have ver, p and optionally base, r")
        version = body["ver"]
        if type(version) is not int or version < 0:
            raise WireError("schema", "ver must be a non-negative int")
        dense = body["p"]
        if not isinstance(dense, dict) or len(dense) > MAX_TENSORS:
            raise WireError("schema", "p must be a map of at most 64 tensors")
        rows = body.get("r", {})
        if not isinstance(rows, dict) or len(rows) > MAX_TENSORS:
            raise WireError("schema", "r must be a map of at most 64 row sets")
        if ("r" in body) != ("base" in body):
            raise WireError("schema", "a delta carries both base and r")
        names = set(dense) | set(rows)
        if set(dense) & set(rows) or names != set(spec):
            raise WireError(
                "schema", f"parameters {sorted(map(str, names))} where {sorted(spec)} are expected"
            )
        params: Params = unpack_tensors(dense, spec)
        if "base" in body:
            params.update(self._apply_rows(sender, body["base"], rows, spec))
        frozen = dict(params)
        self._remember(sender, version, frozen)
        return version, frozen

    def _apply_rows(self, sender: int, base_version: object, rows: dict[Any, Any], spec: ModelSpec) -> Params:
        held = self._bases.get(sender)
        if held is None or held[0] != base_version:
            raise WireError("no-base", f"no base version {base_version!r} from {sender}", 409)
        out: Params = {}
        if isinstance(held[1], Base) and not held[1].alive:
            raise WireError("no-base", f"base version {base_version!r} from {sender} is gone", 409)
        for name, entry in rows.items():
            tspec = spec[name]
            if len(tspec.shape) != 2:
                raise WireError("schema", f"{name}: row deltas only apply to 2-D parameters")
            if not isinstance(entry, dict) or set(entry) != {"i", "v"}:
                raise WireError("schema", f"{name}: a row set is a map with keys i, v")
            n = _declared_len(entry["i"], name)
            if n > tspec.shape[0]:
                raise WireError("shape", f"{name}: {n} rows for a {tspec.shape[0]}-row parameter")
            idx = unpack_tensor(entry["i"], TensorSpec("int32", (n,)), what=f"{name}.i")
            if n and (idx[0] < 0 or idx[-1] >= tspec.shape[0] or np.any(np.diff(idx) <= 0)):
                raise WireError("shape", f"{name}: row indices must be increasing and in range")
            vals = unpack_tensor(entry["v"], TensorSpec(tspec.dtype, (n, tspec.shape[1])), what=f"{name}.v")
            try:
                src = held[1][name]
            except BaseGone:
                raise WireError(
                    "no-base", f"base version {base_version!r} from {sender} is gone", 409
                ) from None
            arr = src if isinstance(held[1], Base) else np.array(src, copy=True)
            arr[idx] = vals
            arr.flags.writeable = False
            out[name] = arr
        return out

    def share(self, sender: int, version: int, base: ParamsView) -> None:
        """Keep ``base``, the sender's own base (learning/history.py) or sent model of ``version``
        in this process, instead of the copy just decoded from its frame: the same values, held
        once."""
        held = self._bases.get(sender)
        if held is not None and held[0] == version:
            self._bases[sender] = (version, base)

    def _remember(self, sender: int, version: int, params: ParamsView) -> None:
        if not self.enabled:
            return
        self._bases[sender] = (version, params)
        self._bases.move_to_end(sender)
        while len(self._bases) > self.max_peers:
            self._bases.popitem(last=False)


def _declared_len(obj: object, name: str) -> int:
    if isinstance(obj, dict) and isinstance(obj.get("s"), list) and len(obj["s"]) == 1:
        n = obj["s"][0]
        if type(n) is int and n >= 0:
            return n
    raise WireError("schema", f"{name}.i must be a 1-D tensor")


def _round16(params: ParamsView) -> ParamsView:
    return {k: v.astype(np.float16).astype(np.float32) for k, v in params.items()}
