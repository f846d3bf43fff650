"""Service-account key files: what loads, the kid upstream computes, one key when many processes make it at once."""

from __future__ import annotations

import base64
import hashlib
import multiprocessing
import os

import pytest
from cryptography.hazmat.primitives import serialization

from k8py.api.service_account_keys import (
    KeyFileError, ensure_signing_key_file, generate_signing_key, jwks, load_signing_key, load_verifying_keys,
)
from k8py.client import certs


def test_the_key_id_is_upstreams_hash_of_the_public_key() -> None:
    key = generate_signing_key()
    der = key.private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert key.kid == base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()
    assert key.algorithm == "RS256" and generate_signing_key(ec_p256=True).algorithm == "ES256"
    published = jwks([key.verifying, key.verifying])["keys"]
    assert len(published) == 1 and published[0]["kid"] == key.kid and "d" not in published[0]


def test_verifying_files_take_public_keys_private_keys_and_certificates(tmp_path) -> None:
    a, b = generate_signing_key(), generate_signing_key(ec_p256=True)
    ca = certs.new_self_signed_ca("x")
    public = a.private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path = tmp_path / "keys.pem"
    path.write_bytes(public + b.pem() + ca.cert_pem)
    kids = [k.kid for k in load_verifying_keys(str(path))]
    assert kids[:2] == [a.kid, b.kid] and len(kids) == 3
    assert load_signing_key(str(tmp_path / "keys.pem")).kid == b.kid  # the first private key


def test_a_file_without_a_key_says_what_to_do(tmp_path) -> None:
    (tmp_path / "junk").write_text("not a key")
    with pytest.raises(KeyFileError) as err:
        load_signing_key(str(tmp_path / "junk"))
    assert "holds no RSA or EC private key in PEM (make one with: openssl genrsa -out sa.key 2048)" in str(err.value)
    with pytest.raises(KeyFileError) as err:
        load_verifying_keys(str(tmp_path / "missing"), flag="--service-account-key-file")
    assert str(err.value).startswith(f"--service-account-key-file {tmp_path / 'missing'}: cannot read it")


def _kid(path: str) -> str:
    return ensure_signing_key_file(path).kid


def test_processes_starting_together_end_up_with_one_key(tmp_path) -> None:
    path = str(tmp_path / "sa.key")
    # forked from a fork server, not from this test process: a pytest worker has threads (execnet's,
    # servers left by other tests), and a child forked while one of them held a lock can hang on it
    with multiprocessing.get_context("forkserver").Pool(4) as pool:
        kids = pool.map(_kid, [path] * 8)
    assert len(set(kids)) == 1 and os.listdir(tmp_path) == ["sa.key"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert _kid(path) == kids[0]  # made once, kept


def test_a_key_file_is_parsed_once_until_it_changes(tmp_path) -> None:
    """The API server's start reads its signing key three times; RSA validation
    costs a tenth of a second each, so an unchanged file gives the loaded key."""
    path = str(tmp_path / "sa.key")
    made = ensure_signing_key_file(path)
    assert load_signing_key(path) is made and load_signing_key(path) is made
    other = generate_signing_key()
    with open(path + ".new", "wb") as f:
        f.write(other.pem())
    os.replace(path + ".new", path)  # a new inode: the rotated key is read, not the cached one
    assert load_signing_key(path).kid == other.kid != made.kid
