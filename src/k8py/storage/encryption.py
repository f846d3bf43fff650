"""Encryption at rest: upstream's ``EncryptionConfiguration`` providers, and a Storage that applies them.

``--encryption-provider-config`` names, per group of resources, an ordered
list of providers::

    apiVersion: apiserver.config.k8s.io/v1
    kind: EncryptionConfiguration
    resources:
    - resources: [secrets]              # also configmaps, deployments.apps, *.apps, *.*
      providers:
      - aesgcm: {keys: [{name: key1, secret: <base64 of 16, 24 or 32 bytes>}]}
      - aescbc: {keys: [...]}
      - secretbox: {keys: [{name: k, secret: <base64 of 32 bytes>}]}
      - identity: {}

Invariants, as upstream's ``k8s.io/apiserver/pkg/storage/value``:

- the *first* provider (its first key) encrypts every write; ``identity``
  first means plaintext is written;
- every provider reads: a value stored as ``k8s:enc:<provider>:v1:<key>:``
  followed by the ciphertext is decrypted by that provider's key of that
  name; a value without the prefix is plaintext and is readable only when
  ``identity`` is among the providers; anything else is an error that names
  the key that is missing;
- a value read with anything but the first provider and key is *stale*: the
  object store rewrites it on the next update even when the object is
  unchanged, so ``kubectl get secrets -A -o json | kubectl replace -f -``
  rotates keys, as upstream;
- aesgcm binds the ciphertext to the storage key (authenticated data), so a
  value copied under another key does not decrypt; aescbc and secretbox do not.

:class:`EncryptedStorage` wraps any :class:`~k8py.storage.Storage` and is
transparent to its callers (the watch cache sees plaintext). A bad file or
key is an :class:`EncryptionConfigError` that says what to fix; the server
refuses to start.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Protocol

import yaml
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from k8py.storage.interface import KeyValue, ListResult, Storage, StorageError, WatchBatch, WatchEvent

__all__ = ["EncryptionConfigError", "Transformer", "ProviderChain", "ResourceEncryption", "load_encryption_config",
           "EncryptedStorage", "StaleKeyValue", "PREFIX"]

PREFIX = b"k8s:enc:"
_KEY_SIZES = {"aescbc": (16, 24, 32), "aesgcm": (16, 24, 32), "secretbox": (32,)}


class EncryptionConfigError(ValueError):
    """A bad ``--encryption-provider-config`` (the server does not start)."""


class DecryptError(StorageError):
    """A stored value cannot be decrypted with the configured keys."""


class Transformer(Protocol):
    def encrypt(self, data: bytes, context: bytes) -> bytes: ...

    def decrypt(self, data: bytes, context: bytes) -> bytes: ...


class _AESCBC:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def encrypt(self, data: bytes, context: bytes) -> bytes:
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        enc = Cipher(algorithms.AES(self.key), modes.CBC(iv)).encryptor()
        return iv + enc.update(padder.update(data) + padder.finalize()) + enc.finalize()

    def decrypt(self, data: bytes, context: bytes) -> bytes:
        if len(data) < 32 or len(data) % 16:
            raise DecryptError("the stored data is not a whole number of AES blocks")
        dec = Cipher(algorithms.AES(self.key), modes.CBC(data[:16])).decryptor()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            return unpadder.update(dec.update(data[16:]) + dec.finalize()) + unpadder.finalize()
        except ValueError:
            raise DecryptError("invalid PKCS7 padding: the key does not match the data") from None


class _AESGCM:
    def __init__(self, key: bytes) -> None:
        self.aead = AESGCM(key)

    def encrypt(self, data: bytes, context: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self.aead.encrypt(nonce, data, context)

    def decrypt(self, data: bytes, context: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            return self.aead.decrypt(data[:12], data[12:], context)
        except InvalidTag:
            raise DecryptError("the AES-GCM tag does not verify: wrong key, or data moved from another key") from None


class _SecretBox:
    def __init__(self, key: bytes) -> None:
        import nacl.secret

        self.box = nacl.secret.SecretBox(key)

    def encrypt(self, data: bytes, context: bytes) -> bytes:
        return bytes(self.box.encrypt(data))  # nonce (24) + ciphertext, as upstream lays it out

    def decrypt(self, data: bytes, context: bytes) -> bytes:
        import nacl.exceptions

        try:
            return self.box.decrypt(data)
        except nacl.exceptions.CryptoError:
            raise DecryptError("secretbox could not open the data: wrong key") from None


_MAKERS: dict[str, Callable[[bytes], Transformer]] = {"aescbc": _AESCBC, "aesgcm": _AESGCM, "secretbox": _SecretBox}


@dataclass(frozen=True)
class ProviderChain:
    """One resource group's providers: ``write`` (None = identity) and every readable (provider, key)."""

    write: tuple[bytes, Transformer] | None
    readers: dict[bytes, Transformer]  # b"k8s:enc:aescbc:v1:key1:" -> transformer
    identity_reads: bool

    def to_storage(self, data: bytes, context: bytes) -> bytes:
        if self.write is None:
            return data
        prefix, transformer = self.write
        return prefix + transformer.encrypt(data, context)

    def from_storage(self, data: bytes, context: bytes) -> tuple[bytes, bool]:
        """(plaintext, stale)."""
        if data.startswith(PREFIX):
            end = _prefix_end(data)
            prefix = data[:end] if end else b""
            transformer = self.readers.get(prefix)
            if transformer is None:
                raise DecryptError(f"no key configured for {prefix.decode(errors='replace') or 'the stored prefix'} "
                                   f"(add it to --encryption-provider-config)")
            return transformer.decrypt(data[end:], context), self.write is None or prefix != self.write[0]
        if not self.identity_reads:
            raise DecryptError("the stored data is not encrypted and identity is not among the providers")
        return data, self.write is not None


def _prefix_end(data: bytes) -> int:
    """The end of ``k8s:enc:<provider>:v1:<key>:`` (0 if malformed)."""
    colons = 0
    for i in range(len(PREFIX), min(len(data), 300)):
        if data[i] == 0x3A:
            colons += 1
            if colons == 3:
                return i + 1
    return 0


def _decode_key(provider: str, entry: Any, where: str) -> tuple[str, bytes]:
    if not isinstance(entry, dict) or not entry.get("name") or not entry.get("secret"):
        raise EncryptionConfigError(f"{where}: every key needs a name and a secret")
    try:
        secret = base64.b64decode(str(entry["secret"]), validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionConfigError(f"{where}: key {entry['name']!r}: secret is not valid base64") from None
    if len(secret) not in _KEY_SIZES[provider]:
        sizes = " or ".join(str(s) for s in _KEY_SIZES[provider])
        raise EncryptionConfigError(f"{where}: key {entry['name']!r} is {len(secret)} bytes; {provider} needs {sizes} "
                                    f"(make one with: head -c 32 /dev/urandom | base64)")
    return str(entry["name"]), secret


def _chain(providers: Any, where: str) -> ProviderChain:
    if not isinstance(providers, list) or not providers:
        raise EncryptionConfigError(f"{where}: providers must be a non-empty list")
    write: tuple[bytes, Transformer] | None = None
    readers: dict[bytes, Transformer] = {}
    identity = False
    for i, provider in enumerate(providers):
        if not isinstance(provider, dict) or len(provider) != 1:
            raise EncryptionConfigError(f"{where}.providers[{i}]: exactly one provider per entry")
        (kind, body), = provider.items()
        if kind == "identity":
            identity = True
            continue
        if kind == "kms":
            raise EncryptionConfigError(f"{where}.providers[{i}]: kms is not supported by k8py; use aesgcm, aescbc or secretbox")
        if kind not in _MAKERS:
            raise EncryptionConfigError(f"{where}.providers[{i}]: unknown provider {kind!r}: use aesgcm, aescbc, secretbox or identity")
        keys = (body or {}).get("keys") if isinstance(body, dict) else None
        if not keys:
            raise EncryptionConfigError(f"{where}.providers[{i}].{kind}: at least one key is needed")
        for j, entry in enumerate(keys):
            name, secret = _decode_key(kind, entry, f"{where}.providers[{i}].{kind}.keys[{j}]")
            prefix = PREFIX + f"{kind}:v1:{name}:".encode()
            if prefix in readers:
                raise EncryptionConfigError(f"{where}.providers[{i}].{kind}: key name {name!r} is used twice")
            readers[prefix] = _MAKERS[kind](secret)
            if i == 0 and j == 0:  # the first provider's first key writes
                write = (prefix, readers[prefix])
    return ProviderChain(write, readers, identity)


@dataclass(frozen=True)
class ResourceEncryption:
    """The configuration: (resource patterns, chain) in file order; the first pattern that matches wins."""

    rules: tuple[tuple[tuple[str, ...], ProviderChain], ...]

    def chain_for(self, resource: str, group: str) -> ProviderChain | None:
        qualified = f"{resource}.{group}" if group else resource
        for patterns, chain in self.rules:
            for p in patterns:
                if p in (qualified, "*.*") or (p.startswith("*.") and p[2:] == group) or (p == "*." and not group):
                    return chain
        return None


def load_encryption_config(path: str) -> ResourceEncryption:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as err:
        raise EncryptionConfigError(f"cannot read encryption provider config {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise EncryptionConfigError(f"encryption provider config {path} is not valid YAML: {err}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "EncryptionConfiguration":
        raise EncryptionConfigError(f"{path}: expected kind EncryptionConfiguration (apiVersion apiserver.config.k8s.io/v1)")
    if doc.get("apiVersion") != "apiserver.config.k8s.io/v1":
        raise EncryptionConfigError(f"{path}: unsupported apiVersion {doc.get('apiVersion')!r}: use apiserver.config.k8s.io/v1")
    rules = []
    for i, entry in enumerate(doc.get("resources") or ()):
        where = f"{path}: resources[{i}]"
        patterns = tuple(str(r) for r in (entry or {}).get("resources") or ())
        if not patterns:
            raise EncryptionConfigError(f"{where}.resources: name at least one resource (secrets, *.*, ...)")
        rules.append((patterns, _chain((entry or {}).get("providers"), where)))
    if not rules:
        raise EncryptionConfigError(f"{path}: resources is empty: nothing would be encrypted")
    return ResourceEncryption(tuple(rules))


class StaleKeyValue(KeyValue):
    """A value read with a provider or key other than the writing one: rewrite it on update."""

    __slots__ = ()


class EncryptedStorage:
    """A Storage whose values are encrypted per key prefix; reads and watches give plaintext.

    ``chain_for_key(key)`` returns the resource's chain (None: stored as is);
    the server resolves it from the registry (custom resources included)."""

    #: its watch events carry decrypted copies, never the bytes a write was
    #: given (not delegated to the inner store: see ``SqliteStorage``)
    events_carry_written_values = False

    def __init__(self, inner: Storage, chain_for_key: Callable[[str], ProviderChain | None]) -> None:
        self.inner = inner
        self._chain_for_key = chain_for_key

    def __getattr__(self, name: str) -> Any:  # start, close, revisions, compact, request_progress, count, ...
        return getattr(self.inner, name)

    def _encode(self, key: str, value: bytes) -> bytes:
        chain = self._chain_for_key(key)
        return value if chain is None else chain.to_storage(value, key.encode())

    def _decode_lenient(self, kv: KeyValue | None) -> KeyValue | None:
        """For lists and watches: an undecryptable value passes as stored (the watch cache
        counts it as undecodable) instead of failing every other object with it."""
        try:
            return self._decode(kv)
        except DecryptError:
            return kv

    def _decode(self, kv: KeyValue | None) -> KeyValue | None:
        if kv is None:
            return None
        chain = self._chain_for_key(kv.key)
        if chain is None:
            return kv
        value, stale = chain.from_storage(kv.value, kv.key.encode())
        cls = StaleKeyValue if stale else KeyValue
        return cls(kv.key, value, kv.create_revision, kv.mod_revision)

    async def create(self, key: str, value: bytes) -> KeyValue:
        kv = await self.inner.create(key, self._encode(key, value))
        return KeyValue(kv.key, value, kv.create_revision, kv.mod_revision)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> KeyValue:
        kv = await self.inner.update(key, self._encode(key, value), expected_revision=expected_revision)
        return KeyValue(kv.key, value, kv.create_revision, kv.mod_revision)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        kv = await self.inner.delete(key, expected_revision=expected_revision)
        return self._decode_lenient(kv) or kv

    async def get(self, key: str, *, revision: int = 0) -> KeyValue | None:
        return self._decode(await self.inner.get(key, revision=revision))

    async def list(self, prefix: str, **kw: Any) -> ListResult:
        result = await self.inner.list(prefix, **kw)
        return ListResult([self._decode_lenient(kv) for kv in result.kvs], result.revision, result.more,  # type: ignore[misc]
                          result.remaining)

    async def watch(self, prefix: str, *, after: int) -> AsyncIterator[WatchBatch]:
        async for batch in self.inner.watch(prefix, after=after):
            yield WatchBatch(batch.revision, tuple(
                WatchEvent(e.type, self._decode_lenient(e.kv) or e.kv, self._decode_lenient(e.prev_kv))
                for e in batch.events))
