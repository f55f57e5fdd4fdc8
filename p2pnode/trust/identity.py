"""Per-process identities: an Ed25519 key per process, bound by the cluster authority to node ids.

The shared cluster key (p2pnode.trust.auth) proves "a member", not "which member": any key holder can
sign as any node id. An identity says which. The operator's **authority** (an Ed25519 key kept
off the nodes) issues each process a **credential**: the cluster label, a serial number, the
process's public key and the node ids it may host (ranges), signed by the authority. The process
signs every request with its own key and sends the credential with it; a receiver that trusts the
authority (its public key is in the cluster keyring file) accepts a request only when

* the credential is the authority's (verified once per distinct credential, then cached),
* its serial is not revoked (``revoked`` in the keyring file, re-read within a second),
* the request's sender id is one of the ids the credential names, and
* the request's signature verifies with the credential's key.

All four are judged from the headers, before one byte of the body is read, as the MAC is. The
same key proves a process's address: ``GET /v1/members?challenge=HEX`` answers with the
credential and a signature over the challenge, so a process posts to a node only at an address
whose server proved it holds that node (a relayed Cyclon address cannot divert a node's models).

This is what libp2p and ipv8 give every peer (its own key), with a cluster authority in the place
of their self-certifying ids, because a lab cluster has an operator; mutual TLS (p2pnode.trust.tls)
binds certificates to node ids in the same way at the connection level.

Pure apart from the key files (:func:`save_authority`, :func:`load_identity`, ...).
"""

from __future__ import annotations

import base64
import functools
import secrets
import time
import tomllib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from p2pnode.config import ConfigError
from p2pnode.data.atomic import write_text

H_CRED = "X-P2P-Credential"
H_SIG = "X-P2P-Signature"
CREDENTIAL_TAG = b"p2pnode-credential-v1\n"
PROOF_TAG = b"p2pnode-address-proof-v1\n"
REQUEST_TAG = b"p2pnode-request-v1\n"
MAX_RANGES = 64  #: id ranges in one credential (keeps it, base64, under MAX_CREDENTIAL_CHARS)
MAX_CREDENTIAL_CHARS = 1024
MAX_ID = 2**31 - 1


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    """Strict base64url without padding; raises ValueError on anything else."""
    if len(text) % 4 == 1 or not text.isascii():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ranges_of(ids: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Sorted ids as inclusive ranges: {0, 1, 2, 5} → ((0, 2), (5, 5))."""
    return merge_ranges((i, i) for i in ids)


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Inclusive ranges sorted, with overlapping and adjacent ones joined."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def parse_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """``0-19,40`` → ((0, 19), (40, 40)), without listing the ids (a range may be wide)."""
    out = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ConfigError(f"bad node ids {text!r} (expected e.g. 0-19,40)")
        a, b = int(lo), int(hi if sep else lo)
        if b < a or b > MAX_ID:
            raise ConfigError(f"bad node id range {part.strip()!r}")
        out.append((a, b))
    return merge_ranges(out)


@dataclass(frozen=True)
class Credential:
    """The authority's statement: the holder of ``public_key`` may speak for ``ranges``."""

    cluster: str
    serial: int
    public_key: bytes  #: 32 raw Ed25519 bytes
    ranges: tuple[tuple[int, int], ...]
    issued_ms: int
    signature: bytes = b""  #: the authority's, over :meth:`signed_bytes`

    def signed_bytes(self) -> bytes:
        body = [self.cluster, self.serial, self.public_key, [list(r) for r in self.ranges], self.issued_ms]
        return CREDENTIAL_TAG + bytes(msgpack.packb(body, use_bin_type=True))

    def names(self, node: int) -> bool:
        return any(lo <= node <= hi for lo, hi in self.ranges)

    def encode(self) -> str:
        """The header form: base64url of a msgpack array."""
        body = [1, self.cluster, self.serial, self.public_key, [list(r) for r in self.ranges]]
        return b64(bytes(msgpack.packb([*body, self.issued_ms, self.signature], use_bin_type=True)))

    @classmethod
    def decode(cls, text: str) -> Credential:
        """Parse (not verify) a credential; raises ValueError unless it is exactly one."""
        if len(text) > MAX_CREDENTIAL_CHARS:
            raise ValueError("credential too long")
        obj: Any = msgpack.unpackb(
            unb64(text), raw=False, max_array_len=MAX_RANGES, max_map_len=0, max_str_len=64, max_ext_len=0
        )
        if not (isinstance(obj, list) and len(obj) == 7 and obj[0] == 1):
            raise ValueError("not a version-1 credential")
        _v, cluster, serial, key, ranges, issued, sig = obj
        if not (
            isinstance(cluster, str)
            and type(serial) is int
            and 0 <= serial <= MAX_ID
            and isinstance(key, bytes)
            and len(key) == 32
            and isinstance(ranges, list)
            and 1 <= len(ranges) <= MAX_RANGES
            and type(issued) is int
            and isinstance(sig, bytes)
            and len(sig) == 64
        ):
            raise ValueError("malformed credential")
        out = []
        for r in ranges:
            if not (
                isinstance(r, list)
                and len(r) == 2
                and all(type(x) is int for x in r)
                and 0 <= r[0] <= r[1] <= MAX_ID
            ):
                raise ValueError("malformed id range")
            out.append((r[0], r[1]))
        return cls(cluster, serial, key, tuple(out), issued, sig)

    def verify(self, authorities: Iterable[bytes]) -> bool:
        """Whether one of ``authorities`` (raw public keys) signed this credential."""
        message = self.signed_bytes()
        for raw in authorities:
            try:
                Ed25519PublicKey.from_public_bytes(raw).verify(self.signature, message)
                return True
            except (InvalidSignature, ValueError):
                continue
        return False


@dataclass
class Authority:
    """The operator's signing key for one cluster, and the next serial it will issue."""

    cluster: str
    private_key: bytes  #: 32 raw Ed25519 bytes
    next_serial: int = 1

    @classmethod
    def generate(cls, cluster: str) -> Authority:
        return cls(cluster, Ed25519PrivateKey.generate().private_bytes_raw())

    @property
    def public_key(self) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.private_key).public_key().public_bytes_raw()

    def issue(self, ranges: Iterable[tuple[int, int]], now_ms: int | None = None) -> Identity:
        """A fresh process key and its credential for the id ``ranges`` (the serial advances)."""
        ranges = merge_ranges(ranges)
        if not ranges:
            raise ConfigError("a credential must name at least one node id")
        if len(ranges) > MAX_RANGES:
            raise ConfigError(f"{len(ranges)} id ranges; a credential holds at most {MAX_RANGES}")
        if ranges[0][0] < 0 or ranges[-1][1] > MAX_ID:
            raise ConfigError(f"node ids must be in 0..{MAX_ID}")
        key = Ed25519PrivateKey.generate()
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        public = key.public_key().public_bytes_raw()
        unsigned = Credential(self.cluster, self.next_serial, public, ranges, stamp)
        signature = Ed25519PrivateKey.from_private_bytes(self.private_key).sign(unsigned.signed_bytes())
        self.next_serial += 1
        cred = Credential(unsigned.cluster, unsigned.serial, unsigned.public_key, ranges, stamp, signature)
        return Identity(key.private_bytes_raw(), cred)


@dataclass
class Identity:
    """A process's own key and the credential that binds it to node ids."""

    private_key: bytes
    credential: Credential
    _signer: Ed25519PrivateKey | None = field(default=None, repr=False, compare=False)
    _header: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        self._signer = Ed25519PrivateKey.from_private_bytes(self.private_key)
        if self._signer.public_key().public_bytes_raw() != self.credential.public_key:
            raise ConfigError("the identity's key is not the one its credential names")
        self._header = self.credential.encode()

    @property
    def header(self) -> str:
        return self._header

    def sign(self, message: bytes) -> str:
        assert self._signer is not None
        return b64(self._signer.sign(message))

    def request_headers(self, canonical: bytes, vouched: bool = False) -> dict[str, str]:
        """The two headers that carry the identity on a request whose MAC covers ``canonical``
        (``vouched``: a batch entry, which its batch's signature covers: the credential alone,
        no signature of its own, which a receiver would not verify)."""
        if vouched:
            return {H_CRED: self._header}
        return {H_CRED: self._header, H_SIG: self.sign(REQUEST_TAG + canonical)}

    def prove(self, challenge: str, address: str) -> dict[str, Any]:
        """The answer to an address challenge: this process holds these ids at ``address``."""
        return {"credential": self._header, "proof": self.sign(proof_bytes(challenge, address))}


class IdentityError(ValueError):
    """A process's identity does not fit its keyring or the nodes it hosts."""


def check_holder(
    identity: Identity | None,
    cluster: str,
    authorities: tuple[bytes, ...],
    revoked: frozenset[int],
    hosted: Iterable[int],
) -> None:
    """An identity must be of this cluster, unrevoked, and name every node its process hosts; a
    keyring that trusts an authority needs one (its peers would refuse every request without
    it). Raises IdentityError saying which."""
    if identity is None:
        if authorities:
            raise IdentityError(
                "the keyring trusts a cluster authority, so peers accept only requests signed by "
                "a process identity: give --identity (issued by 'p2pnode keys issue')"
            )
        return
    cred = identity.credential
    if cred.cluster != cluster:
        raise IdentityError(f"the identity is for cluster {cred.cluster!r}, the keyring for {cluster!r}")
    missing = [u for u in hosted if not cred.names(u)]
    if missing:
        raise IdentityError(
            f"the identity (serial {cred.serial}) does not name node(s) {missing[:5]} hosted here"
        )
    if cred.serial in revoked:
        raise IdentityError(f"the identity's credential (serial {cred.serial}) is revoked")


def proof_bytes(challenge: str, address: str) -> bytes:
    return PROOF_TAG + f"{challenge}\n{address}".encode()


@dataclass(frozen=True, slots=True)
class Judgement:
    status: int  #: 200, else 401 / 403
    reason: str
    credential: Credential | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class Trust:
    """What a receiver checks identities against: the authorities' public keys and the revoked
    serials (both from the cluster keyring file), with a cache of credentials already verified."""

    cluster: str
    authorities: tuple[bytes, ...]
    revoked: frozenset[int] = frozenset()
    max_cached: int = 4096
    _cache: OrderedDict[str, Credential] = field(default_factory=OrderedDict)

    def cached(self) -> int:
        """How many verified credentials the cache holds (at most ``max_cached``)."""
        return len(self._cache)

    def verified(self) -> list[Credential]:
        """The credentials verified lately (the cache), newest last."""
        return list(self._cache.values())

    def credential(self, text: str | None) -> Judgement:
        """The verified credential a header carries (401 ``bad-credential``, 403 ``revoked``)."""
        if not text:
            return Judgement(401, "no-identity")
        cred = self._cache.get(text)
        if cred is None:
            try:
                cred = Credential.decode(text)
            except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
                return Judgement(401, "bad-credential")
            if cred.cluster != self.cluster or not cred.verify(self.authorities):
                return Judgement(401, "bad-credential")
            self._cache[text] = cred
            if len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        if cred.serial in self.revoked:
            return Judgement(403, "revoked", cred)
        return Judgement(200, "", cred)

    def check_request(
        self,
        headers: Mapping[str, str],
        sender: int,
        canonical: bytes,
        vouched: str | None = None,
    ) -> Judgement:
        """A request's identity: a trusted, unrevoked credential naming ``sender``, and a
        signature by its key over the request (the same bytes the MAC covers).

        ``vouched``: the credential of a batch whose request signature was verified; the batch's
        signed digest covers every entry's bytes, so an entry carrying that same credential was
        signed by its key already and its own signature is not verified again (one Ed25519
        verification a batch instead of one an entry)."""
        text = headers.get(H_CRED)
        judged = self.credential(text)
        if not judged.ok:
            return judged
        cred = judged.credential
        assert cred is not None
        if not cred.names(sender):
            return Judgement(403, "not-holder", cred)
        if vouched is not None and text == vouched:
            return judged
        if not _verify(cred.public_key, headers.get(H_SIG, ""), REQUEST_TAG + canonical):
            return Judgement(401, "bad-signature", cred)
        return judged

    def check_proof(self, answer: Mapping[str, Any], challenge: str, address: str) -> Credential | None:
        """The credential of the server at ``address``, if its answer proves it holds its key
        (a signature over the challenge and that address); None: no valid proof."""
        cred_text, proof = answer.get("credential"), answer.get("proof")
        if not isinstance(cred_text, str) or not isinstance(proof, str):
            return None
        judged = self.credential(cred_text)
        if not judged.ok or judged.credential is None:
            return None
        if not _verify(judged.credential.public_key, proof, proof_bytes(challenge, address)):
            return None
        return judged.credential


def _verify(public_key: bytes, signature: str, message: bytes) -> bool:
    try:
        sig = unb64(signature)
        if len(sig) != 64:
            return False
        _public_key(public_key).verify(sig, message)
        return True
    except (InvalidSignature, ValueError):
        return False


@functools.lru_cache(maxsize=256)
def _public_key(raw: bytes) -> Ed25519PublicKey:
    """The key object of 32 raw bytes, parsed once: the same few process keys sign every
    request (raises ValueError for bytes that are not a key; failures are not cached)."""
    return Ed25519PublicKey.from_public_bytes(raw)


def new_challenge() -> str:
    return secrets.token_hex(16)


# -- files --------------------------------------------------------------------------------------


def save_authority(path: Path, authority: Authority) -> None:
    """The authority file, readable by its owner only (it is the cluster's root of trust)."""
    fields: dict[str, str | int] = {
        "cluster": authority.cluster,
        "private_key": authority.private_key.hex(),
        "public_key": authority.public_key.hex(),
        "next_serial": authority.next_serial,
    }
    _save_private(path, fields)


def load_authority(path: Path) -> Authority:
    raw = _toml(path, "authority file", "p2pnode keys authority")
    try:
        authority = Authority(str(raw["cluster"]), bytes.fromhex(raw["private_key"]), int(raw["next_serial"]))
        _ = authority.public_key
        return authority
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: malformed authority file ({type(exc).__name__}: {exc})") from None


def save_identity(path: Path, identity: Identity) -> None:
    """A process's identity file (its private key and credential), owner-only."""
    cred = identity.credential
    ids = ",".join(f"{a}-{b}" if a != b else str(a) for a, b in cred.ranges)
    fields: dict[str, str | int] = {
        "cluster": cred.cluster,
        "serial": cred.serial,
        "nodes": ids,
        "private_key": identity.private_key.hex(),
        "credential": identity.header,
    }
    _save_private(path, fields)


def load_identity(path: Path) -> Identity:
    raw = _toml(path, "identity file", "p2pnode keys issue")
    try:
        return Identity(bytes.fromhex(raw["private_key"]), Credential.decode(str(raw["credential"])))
    except (KeyError, TypeError, ValueError, msgpack.ExtraData, msgpack.FormatError) as exc:
        if isinstance(exc, ConfigError):
            raise ConfigError(f"{path}: {exc}") from None
        raise ConfigError(f"{path}: malformed identity file ({type(exc).__name__}: {exc})") from None


def _save_private(path: Path, fields: Mapping[str, str | int]) -> None:
    """Flat TOML (strings are hex, base64url or labels: nothing to escape), written atomically,
    readable by its owner only."""
    lines = [f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in fields.items()]
    write_text(path, "\n".join(lines) + "\n", mode=0o600)


def _toml(path: Path, what: str, maker: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what} (make one with '{maker}')") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
