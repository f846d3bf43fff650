"""Encryption of Secrets at rest (``--encryption-provider-config``): the
SQLite file holds only ``k8s:enc:<provider>:v1:<key>:`` ciphertext, every read
path (get, list, watch cache) gives the plaintext back, keys rotate by
rewriting, and a bad configuration stops the server with a clear error."""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys

import httpx
import pytest

from tests.support.servers import ServerThread, sqlite_storage

SECRET_VALUE = "hunter2-plaintext-marker"


def key(n: int = 32, fill: bytes = b"") -> str:
    return base64.b64encode(fill * n if fill else os.urandom(n)).decode()


def config(path, providers: str) -> str:
    path.write_text(f"""apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
{providers}
""")
    return str(path)


def stored_value(data_dir, name: str) -> bytes:
    with sqlite3.connect(os.path.join(data_dir, "k8py.db")) as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        for table in tables:
            cols = [r[1] for r in db.execute(f"pragma table_info({table})")]
            if "key" in cols and "value" in cols:
                rows = db.execute(f"select value from {table} where key = ? order by rowid desc", (f"/registry/secrets/default/{name}",)).fetchall()
                if rows:
                    return bytes(rows[0][0])
    raise AssertionError("secret not found in the SQLite file")


def raw_file(data_dir) -> bytes:
    out = b""
    for f in os.listdir(data_dir):
        with open(os.path.join(data_dir, f), "rb") as fh:
            out += fh.read()
    return out


def secret(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"password": base64.b64encode(SECRET_VALUE.encode()).decode()}}


@pytest.mark.parametrize("provider", ["aescbc", "aesgcm", "secretbox"])
def test_a_secret_is_not_readable_in_the_sqlite_file_but_is_served(tmp_path, provider):
    data = tmp_path / "data"
    cfg = config(tmp_path / "enc.yaml", f"""  - {provider}:
      keys:
      - name: key1
        secret: {key()}
  - identity: {{}}""")
    with ServerThread(sqlite_storage(str(data)), encryption_provider_config=cfg) as s:
        with httpx.Client(base_url=s.url, timeout=30) as http:
            assert http.post("/api/v1/namespaces/default/secrets", json=secret("db")).status_code == 201
            assert http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "plain"}, "data": {"k": "visible-cm"}}).status_code == 201
            expected = base64.b64encode(SECRET_VALUE.encode()).decode()
            assert http.get("/api/v1/namespaces/default/secrets/db").json()["data"]["password"] == expected
            listed = http.get("/api/v1/namespaces/default/secrets").json()["items"]
            assert [i["data"]["password"] for i in listed if i["metadata"]["name"] == "db"] == [expected]
        value = stored_value(str(data), "db")
        assert value.startswith(f"k8s:enc:{provider}:v1:key1:".encode())
    blob = raw_file(str(data))
    assert SECRET_VALUE.encode() not in blob and expected.encode() not in blob
    assert b"visible-cm" in blob  # configmaps were not listed: stored as they are


def test_keys_rotate_by_rewriting_and_plaintext_stays_readable_through_identity(tmp_path):
    data = tmp_path / "data"
    with ServerThread(sqlite_storage(str(data))) as s:  # before encryption: plaintext
        assert httpx.post(f"{s.url}/api/v1/namespaces/default/secrets", json=secret("old"), timeout=30).status_code == 201
    old_key, new_key = key(), key()
    first = config(tmp_path / "a.yaml", f"""  - aescbc:
      keys:
      - name: first
        secret: {old_key}
  - identity: {{}}""")
    with ServerThread(sqlite_storage(str(data)), encryption_provider_config=first) as s:
        with httpx.Client(base_url=s.url, timeout=30) as http:
            obj = http.get("/api/v1/namespaces/default/secrets/old").json()
            assert base64.b64decode(obj["data"]["password"]).decode() == SECRET_VALUE
            assert http.put("/api/v1/namespaces/default/secrets/old", json=obj).status_code == 200  # unchanged, yet rewritten
    assert stored_value(str(data), "old").startswith(b"k8s:enc:aescbc:v1:first:")
    second = config(tmp_path / "b.yaml", f"""  - aescbc:
      keys:
      - name: second
        secret: {new_key}
      - name: first
        secret: {old_key}""")
    with ServerThread(sqlite_storage(str(data)), encryption_provider_config=second) as s:
        with httpx.Client(base_url=s.url, timeout=30) as http:
            obj = http.get("/api/v1/namespaces/default/secrets/old").json()
            assert http.put("/api/v1/namespaces/default/secrets/old", json=obj).status_code == 200
    assert stored_value(str(data), "old").startswith(b"k8s:enc:aescbc:v1:second:")


@pytest.mark.parametrize("providers, message", [
    ("  - aescbc:\n      keys:\n      - name: k\n        secret: c2hvcnQ=", "key 'k' is 5 bytes; aescbc needs 16 or 24 or 32"),
    ("  - aesgcm:\n      keys:\n      - name: k\n        secret: '!!notbase64'", "secret is not valid base64"),
    ("  - kms: {name: x}", "kms is not supported by k8py"),
    ("  - rot13: {}", "unknown provider 'rot13'"),
])
def test_the_cli_refuses_to_start_on_a_bad_config_or_key(tmp_path, providers, message):
    cfg = config(tmp_path / "bad.yaml", providers)
    result = subprocess.run([sys.executable, "-m", "k8py", "apiserver", "--data-dir", str(tmp_path / "d"), "--port", "0",
                             "--encryption-provider-config", cfg], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
