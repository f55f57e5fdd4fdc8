"""D_pub on the network: who may publish rows of PARD's public set, who relays them, and what a
node holds (paper 004 Alg. 1 lines 22–23, §III-D).

004 runs in FL: the η public ("privacy-insensitive") users upload their representations and
attributes, and the server makes them the public set every client's estimators train on. Here:

- **FedAvg**: a public client sends its own row to the server after each update; the server keeps
  the newest row of each public client and sends the rows it holds to every client it selects,
  before the global model. A client takes rows from the server alone.
- **Gossip**: there is no one to relay, and a relayed row could be forged by the relay (frames are
  signed by their sender, not by the row's owner). A public node sends its own row beside each
  model it sends, and a node keeps the newest row of each public node it heard from first-hand.

Rows are as public as the attributes beside them: a public user publishes them to anyone it
talks to (docs/design.md, PARD). Who is public is the run's seeded draw, known to every node; a
row from anyone else, or one that names another user than its sender, is refused. At most one
row per public user is kept, so a node's D_pub is bounded by the public users.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from p2pcore.effects import Effect, NodeId, Send
from protocols.messages import FedMessage, ModelMessage, PublicMessage


class PublicBoard:
    """One node's part in D_pub: its own row if it publishes, the rows it holds, and the rules
    of whom it takes rows from."""

    def __init__(
        self,
        node_id: NodeId,
        publishers: frozenset[NodeId],
        own_row: Callable[[], PublicMessage] | None,
        server: NodeId | None = None,
        is_server: bool = False,
        on_rows: Callable[[PublicMessage], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.publishers = publishers
        #: this node's own row, when it publishes (a public node's learner: PardLearner.record)
        self.own_row = own_row if node_id in publishers else None
        self.server = server  #: a FedAvg client's server: its only source of rows
        self.is_server = is_server
        self.on_rows = on_rows  #: told the rows held after each change (the node's learner)
        self.rows: dict[NodeId, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._held: PublicMessage | None = None  #: :meth:`held`, kept until the rows change

    # -- intake ---------------------------------------------------------------------------------

    def admit(self, sender: NodeId) -> str | None:
        """Whether rows from ``sender`` are read at all: from a publisher (to the server, or in
        gossip), from the server (a FedAvg client)."""
        if self.server is not None:
            return None if sender == self.server else "not-public"
        return None if sender in self.publishers else "not-public"

    def vet(self, sender: NodeId, message: PublicMessage) -> str | None:
        """A publisher's message holds its own row only; the server's names publishers only."""
        if self.server is not None and sender == self.server:
            return None if set(message.users) <= self.publishers else "not-public"
        return None if message.users == (sender,) else "not-own-row"

    def take(self, sender: NodeId, message: PublicMessage) -> None:
        """Keep the rows (a newer row of a user replaces its older one; the server's set replaces
        what a client held)."""
        if self.server is not None:
            self.rows = {}
        for i, user in enumerate(message.users):
            if user != self.node_id:
                self.rows[user] = (message.features[i], message.user_re[i], message.labels[i])
        self._held = None
        if self.server is not None and message.users == tuple(sorted(self.rows)):
            # the server's set as it came (sorted, without this node): held without restacking
            self._held = message
        if self.on_rows is not None:
            self.on_rows(self.held())

    def restore(self, rows: PublicMessage | None) -> None:
        """Hold ``rows`` (a checkpoint's, already checked as a received frame; None: nothing)
        instead of what is held now, and tell the learner."""
        users = () if rows is None else rows.users
        if not set(users) <= self.publishers or self.node_id in users:
            raise ValueError("checkpoint's rows of D_pub name a user who does not publish")
        self.rows = {}
        if rows is not None:
            for i, user in enumerate(rows.users):
                self.rows[user] = (rows.features[i], rows.user_re[i], rows.labels[i])
        self._held = None
        if self.on_rows is not None:
            self.on_rows(self.held())

    def held(self) -> PublicMessage:
        """Every row held, by user id."""
        if self._held is None:
            self._held = self._stack()
        return self._held

    def _stack(self) -> PublicMessage:
        users = tuple(sorted(self.rows))
        if not users:
            return PublicMessage(
                (), np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int64)
            )
        rows = [self.rows[u] for u in users]
        return PublicMessage(
            users,
            np.stack([r[0] for r in rows]).astype(np.float32),
            np.stack([r[1] for r in rows]).astype(np.float32),
            np.stack([r[2] for r in rows]).astype(np.int64),
        )

    # -- what it adds to the node's sends -------------------------------------------------------

    def outgoing(self, effects: list[Effect]) -> list[Effect]:
        """The node's effects with the rows it sends: the server's set before each global model
        it sends, a publisher's own row after each model it sends."""
        if not self.is_server and self.own_row is None:
            return effects
        out: list[Effect] = []
        rows: PublicMessage | None = None  #: what this call sends, built once for all its sends
        for effect in effects:
            if isinstance(effect, Send) and isinstance(effect.message, ModelMessage | FedMessage):
                if self.is_server and self.rows:
                    rows = rows if rows is not None else self.held()
                    out.append(Send(effect.to, rows))
                    out.append(effect)
                    continue
                if self.own_row is not None:
                    out.append(effect)
                    rows = rows if rows is not None else self.own_row()
                    out.append(Send(effect.to, rows))
                    continue
            out.append(effect)
        return out
