"""Mutual TLS between node processes: each process has its own certificate, signed by the cluster CA.

Optional (``run --tls-cert --tls-key --tls-ca``). Both sides present a certificate and both
verify it against the CA (``CERT_REQUIRED``); a connection without one never reaches a handler.
A certificate names the node ids its process may speak for in a URI subject-alternative name
``p2pnode:nodes:0-99,120`` — per-node identity, which a shared HMAC key cannot give (any key
holder can sign as any id). The server checks that a frame's sender is among the ids of the
certificate that carried it (403 ``cert-mismatch`` otherwise). Host names are not checked (LAN
testbeds address hosts by IP); the CA is the trust anchor. Connections are pooled by the one
client session of a process, so a handshake is paid once per peer process.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p2pnode.config import ConfigError

URI_PREFIX = "p2pnode:nodes:"


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    ca: Path

    def check(self) -> TlsFiles:
        for name, path in (("--tls-cert", self.cert), ("--tls-key", self.key), ("--tls-ca", self.ca)):
            if not path.is_file():
                raise ConfigError(f"{name} {path}: no such file")
        return self


def server_context(files: TlsFiles) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load(ctx, files)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(files: TlsFiles) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False  # hosts are IPs on a LAN; the cluster CA is what is trusted
    _load(ctx, files)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _load(ctx: ssl.SSLContext, files: TlsFiles) -> None:
    try:
        ctx.load_cert_chain(files.cert, files.key)
        ctx.load_verify_locations(cafile=files.ca)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"TLS files {files.cert}, {files.key}, {files.ca}: {exc}") from None


def parse_ids(text: str) -> set[int]:
    """``0-5,9`` → {0, 1, 2, 3, 4, 5, 9}."""
    out: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad node ids {text!r}")
        out.update(range(int(lo), int(hi if sep else lo) + 1))
    return out


def certified_nodes(peercert: dict[str, Any] | None) -> set[int]:
    """The node ids a verified peer certificate speaks for (empty when it names none)."""
    if not peercert:
        return set()
    ids: set[int] = set()
    for kind, value in peercert.get("subjectAltName", ()):
        if kind == "URI" and str(value).startswith(URI_PREFIX):
            try:
                ids |= parse_ids(str(value)[len(URI_PREFIX) :])
            except ValueError:
                continue
    return ids
