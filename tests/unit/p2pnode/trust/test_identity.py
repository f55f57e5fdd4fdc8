"""Process identities: credentials bound to node ids, request signatures, revocation, proofs."""

from __future__ import annotations

from pathlib import Path

import pytest

from p2pnode.config import ConfigError
from p2pnode.trust.auth import KeyHolder, Keyring, Verifier, load_keyring, save_keyring, sign
from p2pnode.trust.identity import (
    H_CRED,
    H_SIG,
    Authority,
    Credential,
    Trust,
    load_authority,
    load_identity,
    new_challenge,
    parse_ranges,
    save_authority,
    save_identity,
)

PATH = "/v1/nodes/4/gossip"
BODY = b"\x85frame-bytes"
NOW = 1_800_000_000_000


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority.generate("lab")


def ring(authority: Authority) -> Keyring:
    return Keyring("lab", {"k1": b"a" * 32}, "k1").trust(authority.public_key)


def verifier(keyring: Keyring) -> Verifier:
    return Verifier(keyring, known_sender=lambda s: 0 <= s < 40)


def test_a_process_signs_only_for_the_ids_its_credential_names(authority: Authority) -> None:
    proc_a = authority.issue([(0, 19)])
    keyring = ring(authority)
    v = verifier(keyring)
    ok = sign(keyring, "POST", PATH, 7, BODY, NOW, identity=proc_a)
    verdict = v.check("POST", PATH, ok, BODY, NOW)
    assert verdict.ok and verdict.sender == 7 and verdict.serial == proc_a.credential.serial
    # the same member, holding the cluster key, signs as node 25 of another process
    forged = sign(keyring, "POST", PATH, 25, BODY, NOW, identity=proc_a)
    assert (
        v.check("POST", PATH, forged, BODY, NOW).status,
        v.check("POST", PATH, forged, BODY, NOW).reason,
    ) == (
        403,
        "not-holder",
    )


def test_without_an_identity_or_with_a_borrowed_credential_a_member_is_refused(authority: Authority) -> None:
    keyring = ring(authority)
    v = verifier(keyring)
    bare = sign(keyring, "POST", PATH, 25, BODY, NOW)  # the cluster key alone
    assert v.check("POST", PATH, bare, BODY, NOW).reason == "no-identity"
    proc_a, proc_b = authority.issue([(0, 19)]), authority.issue([(20, 39)])
    # A copies B's (public) credential and signs with its own key
    borrowed = sign(keyring, "POST", PATH, 25, BODY, NOW, identity=proc_a)
    borrowed[H_CRED] = proc_b.header
    verdict = v.check("POST", PATH, borrowed, BODY, NOW)
    assert (verdict.status, verdict.reason) == (401, "bad-signature")
    # a credential the authority never signed (A widens its own ranges)
    cred = proc_a.credential
    widened = Credential(
        cred.cluster, cred.serial, cred.public_key, ((0, 39),), cred.issued_ms, cred.signature
    )
    forged = sign(keyring, "POST", PATH, 25, BODY, NOW, identity=proc_a)
    forged[H_CRED] = widened.encode()
    assert v.check("POST", PATH, forged, BODY, NOW).reason == "bad-credential"
    # another cluster's authority
    other = Authority.generate("lab").issue([(0, 39)])
    assert v.check(
        "POST", PATH, sign(keyring, "POST", PATH, 25, BODY, NOW, identity=other), BODY, NOW
    ).reason == ("bad-credential")


@pytest.mark.parametrize("header", [H_CRED, H_SIG])
@pytest.mark.parametrize("value", ["", "!!!", "A" * 5000, "gqF4"])
def test_garbage_identity_headers_are_refused_with_401(authority: Authority, header: str, value: str) -> None:
    keyring = ring(authority)
    headers = sign(keyring, "POST", PATH, 3, BODY, NOW, identity=authority.issue([(0, 9)]))
    headers[header] = value
    verdict = verifier(keyring).check("POST", PATH, headers, BODY, NOW)
    assert verdict.status == 401 and verdict.reason in ("no-identity", "bad-credential", "bad-signature")


def test_the_signature_covers_the_request_and_replays_are_still_refused(authority: Authority) -> None:
    keyring = ring(authority)
    v = verifier(keyring)
    proc = authority.issue([(0, 9)])
    headers = sign(keyring, "POST", PATH, 3, BODY, NOW, identity=proc)
    other = sign(keyring, "POST", PATH, 3, BODY + b"x", NOW, identity=proc)
    swapped = {**headers, H_SIG: other[H_SIG]}
    assert v.check("POST", PATH, swapped, BODY, NOW).reason == "bad-signature"
    assert v.check("POST", PATH, headers, BODY, NOW).ok
    assert v.check("POST", PATH, headers, BODY, NOW).reason == "replay"


def test_a_revoked_credential_is_refused_after_a_reload(tmp_path: Path, authority: Authority) -> None:
    path = tmp_path / "cluster.key"
    save_keyring(path, ring(authority))
    proc = authority.issue([(0, 9)])
    holder = KeyHolder.from_file(path)
    ok = holder.verifier.check(
        "POST", PATH, sign(holder.keyring, "POST", PATH, 3, BODY, NOW, identity=proc), BODY, NOW
    )
    assert ok.ok
    save_keyring(path, load_keyring(path).revoke(proc.credential.serial))
    assert holder.reload()
    verdict = holder.verifier.check(
        "POST", PATH, sign(holder.keyring, "POST", PATH, 3, BODY, NOW, identity=proc), BODY, NOW
    )
    assert (verdict.status, verdict.reason) == (403, "revoked")
    # the keyring file keeps both the authority and the revocation
    again = load_keyring(path)
    assert again.authorities == (authority.public_key,) and proc.credential.serial in again.revoked


def test_an_address_proof_binds_the_challenge_and_the_address(authority: Authority) -> None:
    trust = Trust("lab", (authority.public_key,))
    proc = authority.issue([(20, 39)])
    challenge = new_challenge()
    answer = proc.prove(challenge, "10.0.0.2:7070")
    cred = trust.check_proof(answer, challenge, "10.0.0.2:7070")
    assert cred is not None and cred.names(25) and not cred.names(5)
    # relayed by another address, or replayed for another challenge: proves nothing
    assert trust.check_proof(answer, challenge, "10.0.0.9:7070") is None
    assert trust.check_proof(answer, new_challenge(), "10.0.0.2:7070") is None
    assert trust.check_proof({"credential": 1, "proof": None}, challenge, "10.0.0.2:7070") is None


def test_files_round_trip_owner_only_and_serials_advance(tmp_path: Path) -> None:
    authority = Authority.generate("lab")
    first = authority.issue(parse_ranges("0-19,40,21-22"))
    second = authority.issue(parse_ranges("20"))
    assert (first.credential.serial, second.credential.serial) == (1, 2)
    assert first.credential.ranges == ((0, 19), (21, 22), (40, 40))
    save_authority(tmp_path / "a.key", authority)
    save_identity(tmp_path / "p.identity", first)
    assert (tmp_path / "a.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "p.identity").stat().st_mode & 0o777 == 0o600
    assert load_authority(tmp_path / "a.key").next_serial == 3
    loaded = load_identity(tmp_path / "p.identity")
    assert loaded.credential == first.credential and loaded.credential.verify([authority.public_key])
    (tmp_path / "bad.identity").write_text('private_key = "00"\ncredential = "x"\n')
    with pytest.raises(ConfigError, match=r"bad\.identity"):
        load_identity(tmp_path / "bad.identity")
    with pytest.raises(ConfigError):
        parse_ranges("5-2")
    with pytest.raises(ConfigError):
        authority.issue([(i * 2, i * 2) for i in range(100)])  # too many ranges for one credential


def test_a_wide_range_is_never_listed() -> None:
    """A credential for every id is two numbers, not two billion."""
    proc = Authority.generate("lab").issue(parse_ranges("0-2147483647"))
    assert proc.credential.names(2_000_000_000) and len(proc.header) < 300


def test_a_batch_entry_vouched_for_by_its_batch_skips_only_its_own_signature(authority: Authority) -> None:
    """An entry of a batch whose signature was verified, carrying the batch's credential, is not
    verified again (the batch's signed digest covers it); another credential, a sender the
    credential does not name, or a replayed nonce are still refused."""
    proc_a, proc_b = authority.issue([(0, 19)]), authority.issue([(20, 39)])
    keyring = ring(authority)
    v = verifier(keyring)
    vouched = proc_a.credential.encode()
    entry = sign(keyring, "POST", PATH, 7, BODY, NOW, identity=proc_a)
    entry[H_SIG] = "A" * 86  # a signature that does not verify
    assert v.check_headers("POST", PATH, entry, NOW).reason == "bad-signature"
    assert v.check_headers("POST", PATH, entry, NOW, vouched=vouched).ok
    assert v.check_headers("POST", PATH, entry, NOW, vouched=vouched).reason == "replay"
    other = sign(keyring, "POST", PATH, 27, BODY, NOW, identity=proc_b)
    other[H_SIG] = "A" * 86
    assert v.check_headers("POST", PATH, other, NOW, vouched=vouched).reason == "bad-signature"
    forged = sign(keyring, "POST", PATH, 25, BODY, NOW, identity=proc_a)
    assert v.check_headers("POST", PATH, forged, NOW, vouched=vouched).reason == "not-holder"


def test_a_sender_signs_a_batch_entry_with_the_mac_alone_and_only_its_batch_lets_it_in(
    authority: Authority,
) -> None:
    """A batch entry carries its MAC and its process's credential but no signature of its own (the
    batch's signature covers it): taken when vouched for by that credential's batch, refused as
    a post of its own or inside another process's batch."""
    proc_a, proc_b = authority.issue([(0, 19)]), authority.issue([(20, 39)])
    keyring = ring(authority)
    v = verifier(keyring)
    entry = sign(keyring, "POST", PATH, 7, BODY, NOW, identity=proc_a, vouched=True)
    assert H_SIG not in entry and entry[H_CRED] == proc_a.credential.encode()
    assert v.check_headers("POST", PATH, dict(entry), NOW).reason == "bad-signature"
    assert v.check_headers("POST", PATH, dict(entry), NOW, vouched=proc_b.credential.encode()).reason == (
        "bad-signature"
    )
    assert v.check_headers("POST", PATH, dict(entry), NOW, vouched=proc_a.credential.encode()).ok
