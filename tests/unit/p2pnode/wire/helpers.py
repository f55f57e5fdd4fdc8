"""What the wire tests share: a small GMF model, a frame limit, a receiving node as the intake sees it."""

from __future__ import annotations

import numpy as np

from learning import gmf
from learning.params import spec_of
from p2pnode.wire.codec import (
    decode_frame,
    decode_model,
    encode_model_frame,
)
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder

LIMIT = 1 << 22


def model(seed: int = 0, items: int = 50, factors: int = 8) -> dict[str, np.ndarray]:
    return gmf.init_params(items, factors, seed)


def roundtrip(enc: DeltaEncoder, dec: DeltaDecoder, params, version=1, ack=True):
    encoded = enc.encode(7, version, params)
    data = encode_model_frame(3, 7, encoded)
    msg = decode_model(decode_frame(data, LIMIT), spec_of(params), dec)
    if ack:
        enc.acknowledged(7, version, encoded.view)
    return msg, encoded, len(data)


class Inbox:
    """A receiving node as the intake (``take``) sees it."""

    def __init__(self, node_id: int, params: dict[str, np.ndarray]) -> None:
        self.node_id = node_id
        self.spec = spec_of(params)
        self.decoder = DeltaDecoder()
        self.collusion_spec = None
        self.last_version: dict[int, int] = {}
        self.population: int | None = None
        self.newest_incarnation: int | None = None
        self.refuse: str | None = None
        self.public_spec = None
        self.board = None  #: a protocols.public.PublicBoard: the node's rules for rows of D_pub
        self.charged: list[int] = []  #: senders charged a token for a refused model

    def admit(self, sender: int, collusion: bool = False) -> str | None:
        return None

    def vet(self, message: object) -> str | None:
        return self.refuse

    def charge(self, sender: int) -> None:
        self.charged.append(sender)

    def admit_public(self, sender: int) -> str | None:
        return "not-public" if self.board is None else self.board.admit(sender)

    def vet_public(self, sender: int, message: object) -> str | None:
        return "not-public" if self.board is None else self.board.vet(sender, message)

    knn = None  #: a protocols.knn.KnnService: the node's part in the KNN service

    def admit_knn(self, sender: int) -> str | None:
        return "not-knn" if self.knn is None else None

    def vet_knn(self, sender: int, message: object) -> str | None:
        return "not-knn" if self.knn is None else self.knn.vet(sender, message)


def partner(node_id: int, kept: dict[str, np.ndarray]) -> Inbox:
    inbox = Inbox(node_id, model())
    inbox.collusion_spec = spec_of(kept)  # type: ignore[assignment]
    return inbox
