"""Who may talk to a node: HMAC-SHA256 request authentication with a keyring and a cluster label.

Every ``POST /v1/`` request carries seven headers: the cluster label, the key id, the sender
node id, a timestamp (Unix milliseconds), a random nonce, the SHA-256 of the body and the MAC. The
MAC covers all of them plus the method and the path, so a captured request cannot be re-aimed at
another node, route or cluster, and a body cannot be swapped under a valid header set.

Because the body's digest travels in a header, a request is judged from its headers alone
(:meth:`Verifier.check_headers`) before one byte of its body is read: a stranger without the key
never gets the server to wait for, buffer or hash a body. The body, once read, must match the
digest (:func:`body_matches`).

The keyring follows memberlist's rotation (install, use, remove): every key in the ring is
accepted, only the primary one signs. Rotating without losing a message is three reloads across
the cluster: install the new key everywhere, switch every node's primary to it, remove the old
key everywhere. At each step every key a node signs with is accepted by every other node.

Checks, in order (the answers are the HTTP statuses of the issue's contract):

* no or malformed headers, an unknown key id, or a MAC that does not match: 401;
* the label of another cluster, or a sender id the receiver does not know: 403;
* a timestamp outside the window, or a nonce already seen within it: 409 (replay). Replays are
  judged only after the MAC, so a stranger cannot fill the nonce cache.

Pure apart from :func:`load_keyring` / :func:`save_keyring` (the key file) and the caller-given
clock and nonce source.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from p2pnode.config import ConfigError
from p2pnode.data.atomic import write_text
from p2pnode.trust.identity import Identity, IdentityError, Trust, check_holder, load_identity

H_CLUSTER = "X-P2P-Cluster"
H_KEY = "X-P2P-Key"
H_SENDER = "X-P2P-Sender"
H_TIME = "X-P2P-Time"
H_NONCE = "X-P2P-Nonce"
H_DIGEST = "X-P2P-Digest"
H_MAC = "X-P2P-MAC"
HEADERS = (H_CLUSTER, H_KEY, H_SENDER, H_TIME, H_NONCE, H_DIGEST, H_MAC)

KEY_ENV = "P2PNODE_CLUSTER_KEY"  #: hex key (one key, id "env") when no key file is given
CLUSTER_ENV = "P2PNODE_CLUSTER"  #: cluster label that goes with P2PNODE_CLUSTER_KEY
MIN_KEY_BYTES = 16
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
_NONCE = re.compile(r"^[0-9a-f]{32}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Keyring:
    """The keys a node accepts (by id) and the one it signs with, for one cluster label."""

    cluster: str
    keys: Mapping[str, bytes]
    primary: str
    #: public keys of the cluster authorities (p2pnode.trust.identity); when any is set, every request
    #: must also carry a credential naming its sender and the signature of the credential's key
    authorities: tuple[bytes, ...] = ()
    revoked: frozenset[int] = frozenset()  #: credential serials no longer accepted

    def __post_init__(self) -> None:
        if not _ID.match(self.cluster):
            raise ConfigError(f"cluster label {self.cluster!r}: 1-32 of A-Z a-z 0-9 _ . -")
        if not self.keys:
            raise ConfigError("the keyring holds no key")
        for kid, key in self.keys.items():
            if not _ID.match(kid):
                raise ConfigError(f"key id {kid!r}: 1-32 of A-Z a-z 0-9 _ . -")
            if len(key) < MIN_KEY_BYTES:
                raise ConfigError(f"key {kid!r} is {len(key)} bytes; at least {MIN_KEY_BYTES} are needed")
        if self.primary not in self.keys:
            raise ConfigError(f"primary key {self.primary!r} is not in the keyring")
        for key in self.authorities:
            if len(key) != 32:
                raise ConfigError("an authority's public key is 32 bytes (64 hex digits)")

    def trust(self, authority: bytes) -> Keyring:
        """Require identities issued by ``authority`` (its raw public key) from now on."""
        if authority in self.authorities:
            return self
        return replace(self, authorities=(*self.authorities, authority))

    def revoke(self, serial: int) -> Keyring:
        """Refuse the credential with this serial from now on."""
        return replace(self, revoked=self.revoked | {serial})

    @classmethod
    def generate(cls, cluster: str, key_id: str = "k1") -> Keyring:
        return cls(cluster, {key_id: secrets.token_bytes(32)}, key_id)

    def install(self, key_id: str, key: bytes | None = None) -> Keyring:
        """A new key, accepted but not yet used to sign (step 1 of a rotation)."""
        if key_id in self.keys:
            raise ConfigError(f"key {key_id!r} is already installed")
        return replace(self, keys={**self.keys, key_id: key or secrets.token_bytes(32)})

    def use(self, key_id: str) -> Keyring:
        """Sign with ``key_id`` from now on (step 2)."""
        if key_id not in self.keys:
            raise ConfigError(f"key {key_id!r} is not installed")
        return replace(self, primary=key_id)

    def remove(self, key_id: str) -> Keyring:
        """Stop accepting ``key_id`` (step 3); the signing key cannot be removed."""
        if key_id not in self.keys:
            raise ConfigError(f"key {key_id!r} is not installed")
        if key_id == self.primary:
            raise ConfigError(f"key {key_id!r} signs; switch to another key before removing it")
        return replace(self, keys={k: v for k, v in self.keys.items() if k != key_id})


def body_digest(body: bytes | memoryview) -> str:
    return hashlib.sha256(body).hexdigest()


def body_matches(headers: Mapping[str, str], body: bytes) -> bool:
    """Whether ``body`` is the one whose digest the (already verified) headers carry."""
    return hmac.compare_digest(body_digest(body), headers.get(H_DIGEST, ""))


def canonical(
    cluster: str, method: str, path: str, sender: int, ts_ms: int, nonce: str, digest: str
) -> bytes:
    """The bytes the MAC covers (one field per line, the body by its SHA-256 in hex)."""
    return (
        f"p2pnode-auth-v1\n{cluster}\n{method.upper()}\n{path}\n{sender}\n{ts_ms}\n{nonce}\n{digest}".encode()
    )


def mac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def sign(
    keyring: Keyring,
    method: str,
    path: str,
    sender: int,
    body: bytes | memoryview,
    now_ms: int,
    nonce: str | None = None,
    identity: Identity | None = None,
    vouched: bool = False,
) -> dict[str, str]:
    """The authentication headers of one request, signed with the primary key (and, with an
    ``identity``, by the process's own key over the same bytes, with its credential; ``vouched``:
    a batch entry, whose batch's signature covers it, carries the credential alone)."""
    nonce = nonce or secrets.token_hex(16)
    digest = body_digest(body)
    message = canonical(keyring.cluster, method, path, sender, now_ms, nonce, digest)
    headers = {
        H_CLUSTER: keyring.cluster,
        H_KEY: keyring.primary,
        H_SENDER: str(sender),
        H_TIME: str(now_ms),
        H_NONCE: nonce,
        H_DIGEST: digest,
        H_MAC: mac(keyring.keys[keyring.primary], message),
    }
    if identity is not None:
        headers.update(identity.request_headers(message, vouched))
    return headers


@dataclass(frozen=True, slots=True)
class Verdict:
    status: int  #: 200 accepted, else 401 / 403 / 409
    reason: str
    sender: int | None = None
    serial: int | None = None  #: the credential's serial, with identities

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class Verifier:
    """Checks requests against a keyring; remembers recent nonces to refuse replays.

    ``known_sender`` says whether a node id belongs to the network. The nonce cache holds at most
    ``max_nonces``; when it is full the oldest nonce is dropped and timestamps older than it are
    refused from then on, so a replay never slips through an evicted entry.
    """

    keyring: Keyring
    known_sender: Callable[[int], bool]
    window_ms: int = 30_000
    max_nonces: int = 200_000
    #: how far ahead of the receiver's clock a timestamp may be (clock skew on a LAN is far less);
    #: a member's future-dated nonces can then hold the cache's floor ahead of honest time for
    #: at most this long
    max_future_ms: int = 5_000
    #: requests signed before this are refused (the process start: the nonce cache is not kept
    #: across a restart, so a request captured before it must not be accepted again after it)
    not_before_ms: int = 0
    _nonces: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _floor_ms: int = 0
    trust: Trust | None = None  #: set from the keyring's authorities (see :meth:`use`)
    #: with identities, the serial of the credential each sender id last signed with (ids are
    #: the network's, so at most one entry each): who stands behind an id (``holder``)
    _holders: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._floor_ms = self.not_before_ms
        self.use(self.keyring)

    def use(self, keyring: Keyring) -> None:
        """Judge by ``keyring`` from now on (a reload); verified credentials stay cached while
        the authorities do not change."""
        self.keyring = keyring
        if not keyring.authorities:
            self.trust = None
        elif self.trust is not None and self.trust.authorities == keyring.authorities:
            self.trust.revoked = keyring.revoked
        else:
            self.trust = Trust(keyring.cluster, keyring.authorities, keyring.revoked)

    def sizes(self) -> dict[str, int]:
        """Its caches' entries (``p2pnode_cache_entries``): nonces seen (at most ``max_nonces``),
        sender ids' holders (at most one per id), verified credentials (at most the trust's
        ``max_cached``)."""
        out = {"nonces": len(self._nonces), "holders": len(self._holders)}
        if self.trust is not None:
            out["credentials"] = self.trust.cached()
        return out

    def holder(self, sender: int) -> int | None:
        """The serial of the credential ``sender`` last signed a request with (None: none seen,
        or no identities)."""
        return self._holders.get(sender)

    def owner_of(self, node: int) -> int | None:
        """The serial of the credential that names ``node``: the one it signed with, else a
        verified, unrevoked credential whose ranges hold it (None: none seen names it, or no
        identities). A process judging a swap's views reads it for ids that never wrote to it."""
        serial = self._holders.get(node)
        if serial is not None or self.trust is None:
            return serial
        for cred in self.trust.verified():
            if cred.serial not in self.trust.revoked and cred.names(node):
                return cred.serial
        return None

    def ids_named(self, serial: int, population: int) -> int | None:
        """How many of the ids 0 .. population-1 the verified, unrevoked credential ``serial``
        names (None: none seen, or no identities): a member's share of the network, which a
        process judging swaps weighs its places against (``p2pnode.trust.swapjudge``)."""
        if self.trust is None:
            return None
        for cred in self.trust.verified():
            if cred.serial == serial and cred.serial not in self.trust.revoked:
                spans = sorted((max(0, lo), min(population - 1, hi)) for lo, hi in cred.ranges)
                count, reach = 0, -1
                for lo, hi in spans:  # ranges may overlap: count each id once
                    lo = max(lo, reach + 1)
                    if hi >= lo:
                        count += hi - lo + 1
                        reach = hi
                return count
        return None

    def check(self, method: str, path: str, headers: Mapping[str, str], body: bytes, now_ms: int) -> Verdict:
        """Headers, then the body against their digest (the server does the two steps apart)."""
        verdict = self.check_headers(method, path, headers, now_ms)
        if verdict.ok and not body_matches(headers, body):
            return Verdict(401, "bad-digest", verdict.sender)
        return verdict

    def check_headers(
        self, method: str, path: str, headers: Mapping[str, str], now_ms: int, vouched: str | None = None
    ) -> Verdict:
        """Judge a request by its headers alone, before its body is read (``vouched``: the
        verified credential of the batch an entry came in, ``Trust.check_request``)."""
        values = [headers.get(h) for h in HEADERS]
        if any(v is None for v in values):
            return Verdict(401, "no-auth")
        cluster, key_id, sender_s, ts_s, nonce, digest, given = (v or "" for v in values)
        if cluster != self.keyring.cluster:
            return Verdict(403, "wrong-cluster")
        key = self.keyring.keys.get(key_id)
        if key is None:
            return Verdict(401, "unknown-key")
        try:
            sender, ts_ms = int(sender_s), int(ts_s)
        except ValueError:
            return Verdict(401, "bad-auth")
        if not _NONCE.match(nonce) or not _DIGEST.match(digest):
            return Verdict(401, "bad-auth")
        message = canonical(cluster, method, path, sender, ts_ms, nonce, digest)
        if not hmac.compare_digest(mac(key, message), given):
            return Verdict(401, "bad-mac")
        if not self.known_sender(sender):
            return Verdict(403, "unknown-sender", sender)
        serial = None
        if self.trust is not None:  # which member: its credential must name the sender
            judged = self.trust.check_request(headers, sender, message, vouched)
            if not judged.ok:
                return Verdict(judged.status, judged.reason, sender)
            assert judged.credential is not None
            serial = judged.credential.serial
            self._holders[sender] = serial
        self._expire(now_ms)
        if now_ms - ts_ms > self.window_ms or ts_ms - now_ms > self.max_future_ms or ts_ms < self._floor_ms:
            return Verdict(409, "stale", sender)
        if nonce in self._nonces:
            return Verdict(409, "replay", sender)
        self._nonces[nonce] = ts_ms
        if len(self._nonces) > self.max_nonces:
            _old, old_ts = self._nonces.popitem(last=False)
            self._floor_ms = max(self._floor_ms, old_ts + 1)
        return Verdict(200, "", sender, serial)

    def _expire(self, now_ms: int) -> None:
        """Forget nonces whose timestamps fell out of the window (they are refused as stale)."""
        horizon = now_ms - self.window_ms
        while self._nonces:
            nonce, ts = next(iter(self._nonces.items()))
            if ts >= horizon:
                break
            del self._nonces[nonce]

    @property
    def remembered(self) -> int:
        return len(self._nonces)


# -- the key file -------------------------------------------------------------------------------


def load_keyring(path: Path) -> Keyring:
    """Read a key file: ``cluster``, ``primary`` and a ``[keys]`` table of hex keys."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such key file (make one with 'p2pnode keys new {path}')") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        keys = {str(k): bytes.fromhex(v) for k, v in dict(raw["keys"]).items()}
        authorities = tuple(bytes.fromhex(str(a)) for a in raw.get("authorities", []))
        revoked = frozenset(int(r) for r in raw.get("revoked", []))
        return Keyring(str(raw["cluster"]), keys, str(raw["primary"]), authorities, revoked)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, ConfigError):
            raise ConfigError(f"{path}: {exc}") from None
        raise ConfigError(f"{path}: malformed key file ({type(exc).__name__}: {exc})") from None


def save_keyring(path: Path, keyring: Keyring) -> None:
    """Write the key file atomically, readable by its owner only."""
    lines = [f'cluster = "{keyring.cluster}"', f'primary = "{keyring.primary}"']
    if keyring.authorities:
        lines.append("authorities = [" + ", ".join(f'"{a.hex()}"' for a in keyring.authorities) + "]")
    if keyring.revoked:
        lines.append("revoked = [" + ", ".join(str(r) for r in sorted(keyring.revoked)) + "]")
    lines += ["", "[keys]"]
    lines += [f'"{k}" = "{v.hex()}"' for k, v in keyring.keys.items()]
    write_text(path, "\n".join(lines) + "\n", mode=0o600)


def keyring_from_env(env: Mapping[str, str]) -> Keyring | None:
    """A one-key ring from ``P2PNODE_CLUSTER_KEY`` (hex) and ``P2PNODE_CLUSTER``, if set."""
    hex_key = env.get(KEY_ENV)
    if not hex_key:
        return None
    try:
        key = bytes.fromhex(hex_key.strip())
    except ValueError:
        raise ConfigError(f"${KEY_ENV} is not a hex string") from None
    return Keyring(env.get(CLUSTER_ENV, "default"), {"env": key}, "env")


class KeyHolder:
    """A process's keyring from its key file, re-read when the file changes (rotation steps).

    The file's mtime is looked at most once per ``check_every_s``; a file that fails to load
    keeps the previous keyring (and says why once), so a half-edited file never opens the node.
    """

    def __init__(
        self,
        keyring: Keyring,
        path: Path | None = None,
        check_every_s: float = 1.0,
        known_sender: Callable[[int], bool] = lambda _s: True,
        on_error: Callable[[str], None] | None = None,
        not_before_ms: int = 0,
        identity: Identity | None = None,
    ) -> None:
        self.path = path
        self.keyring = keyring
        #: this process's own key and credential (p2pnode.trust.identity): signs every request beside the
        #: MAC; required by receivers whose keyring trusts an authority
        self.identity = identity
        self.verifier = Verifier(keyring, known_sender, not_before_ms=not_before_ms)
        self.check_every_s = check_every_s
        self._on_error = on_error
        self._mtime = _stamp(path) if path is not None else (0, 0, 0)
        self._next_check = 0.0
        self.reloads = 0
        self._last_error = ""

    @classmethod
    def from_file(
        cls,
        path: Path,
        known_sender: Callable[[int], bool] = lambda _s: True,
        on_error: Callable[[str], None] | None = None,
        not_before_ms: int = 0,
        identity: Identity | None = None,
    ) -> KeyHolder:
        return cls(
            load_keyring(path),
            path,
            known_sender=known_sender,
            on_error=on_error,
            not_before_ms=not_before_ms,
            identity=identity,
        )

    def sign(
        self,
        method: str,
        path: str,
        sender: int,
        body: bytes | memoryview,
        now_ms: int,
        vouched: bool = False,
    ) -> dict[str, str]:
        """The headers of one request: the MAC with the primary key and, with an identity, the
        process's signature and credential (``vouched``: a batch entry, the credential alone)."""
        return sign(self.keyring, method, path, sender, body, now_ms, identity=self.identity, vouched=vouched)

    def refresh(self, now_s: float) -> None:
        if self.path is None or now_s < self._next_check:
            return
        self._next_check = now_s + self.check_every_s
        self.reload()

    def reload(self, force: bool = False) -> bool:
        """Re-read the key file if it changed; True when a new keyring is in use."""
        if self.path is None:
            return False
        try:
            mtime = _stamp(self.path)
            if mtime == self._mtime and not force:
                return False
            keyring = load_keyring(self.path)
        except (OSError, ConfigError) as exc:
            message = f"key file not reloaded, keeping the previous keys: {exc}"
            if message != self._last_error and self._on_error is not None:
                self._on_error(message)
            self._last_error = message
            return False
        self._mtime = mtime
        self._last_error = ""
        self.keyring = keyring
        self.verifier.use(keyring)
        self.reloads += 1
        return True


def _stamp(path: Path) -> tuple[int, int, int]:
    """What tells a changed key file: an atomic replace gives a new inode even within one mtime tick."""
    st = path.stat()
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def process_keys(
    key_file: Path | None,
    identity_file: Path | None,
    env: Mapping[str, str],
    known_sender: Callable[[int], bool],
    hosted: tuple[int, ...],
    on_error: Callable[[str], None] | None = None,
) -> KeyHolder | None:
    """The keys of one ``p2pnode run`` process: its key file (re-read as it changes), else
    ``$P2PNODE_CLUSTER_KEY``, else None (open); with its identity (``identity_file``), checked to
    fit the keyring and to name every ``hosted`` node. Requests signed before this call are
    refused (the nonce cache starts empty). Raises IdentityError, ConfigError."""
    started = int(time.time() * 1000)
    identity = load_identity(identity_file) if identity_file is not None else None
    holder = None
    if key_file is not None:
        holder = KeyHolder.from_file(
            key_file, known_sender=known_sender, on_error=on_error, not_before_ms=started, identity=identity
        )
    elif (ring := keyring_from_env(env)) is not None:
        holder = KeyHolder(ring, None, known_sender=known_sender, not_before_ms=started, identity=identity)
    if holder is None:
        if identity is not None:
            raise IdentityError("--identity signs beside the cluster key: give --cluster-key-file too")
        return None
    ring = holder.keyring
    check_holder(holder.identity, ring.cluster, ring.authorities, ring.revoked, hosted)
    return holder
