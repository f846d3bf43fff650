"""The registry v2 client: resolve a reference to a manifest, fetch blobs.

Requests (``GET /v2/<name>/manifests/<tag|digest>``, ``GET
/v2/<name>/blobs/<digest>``) go first without credentials, or with the
token already earned for the repository. A ``401`` carries a
``WWW-Authenticate`` challenge:

- ``Bearer realm=…,service=…,scope=…`` → a token from the realm (sent the
  credential by basic auth when there is one), then the request again with
  ``Authorization: Bearer``;
- ``Basic`` → the request again with the credential by basic auth.

A second ``401`` is ``unauthorized``. Manifests are asked for with every
media type we read (OCI index/manifest, Docker schema2 manifest and
manifest list); an index is narrowed to the node's platform (``linux`` and
the host's architecture; a variant only breaks ties). Every manifest and
blob is verified against its digest (and size) before it is used:
content is addressed by digest, so a mismatch is an error, never a
retry with other content.

Errors are :class:`RegistryError` with ``kind`` in ``not-found``,
``unauthorized``, ``unreachable``, ``invalid``; :mod:`.puller` words them
as containerd does. Plain HTTP only for loopback hosts (see
:mod:`.reference`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import platform
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import aiohttp

from k8py.kubelet.images.credentials import Credential
from k8py.kubelet.images.reference import Reference

__all__ = ["RegistryClient", "RegistryError", "Resolved", "host_platform", "MANIFEST_TYPES", "INDEX_TYPES"]

logger = logging.getLogger(__name__)

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = ("application/vnd.docker.distribution.manifest.v1+json", "application/vnd.docker.distribution.manifest.v1+prettyjws")
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
_ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
_MAX_MANIFEST = 4 * 1024 * 1024
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm", "i686": "386",
           "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def host_platform() -> tuple[str, str]:
    m = platform.machine().lower()
    return "linux", _GOARCH.get(m, m)


@dataclass
class Resolved:
    """A reference resolved to one platform's image manifest."""

    #: digest of what the tag points at (the index when there is one): the repo digest
    digest: str
    #: the platform manifest's digest and parsed body
    manifest_digest: str
    manifest: dict[str, Any]
    media_type: str


@dataclass
class _Auth:
    credential: Credential | None
    header: str = ""
    #: tokens per scope already earned
    tokens: dict[str, str] = field(default_factory=dict)


def _basic(cred: Credential) -> str:
    return "Basic " + base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()


def _digest_ok(digest: str, body: bytes) -> bool:
    algo, _, hexd = digest.partition(":")
    if algo != "sha256":
        return False
    return hashlib.sha256(body).hexdigest() == hexd.lower()


class RegistryClient:
    """One pull's conversation with a registry (it keeps the token it earned)."""

    def __init__(self, session: aiohttp.ClientSession, ref: Reference, credential: Credential | None, *,
                 platform_: tuple[str, str] | None = None) -> None:
        self.session = session
        self.ref = ref
        self.base = f"{ref.scheme()}://{ref.domain}/v2/{ref.path}"
        self.auth = _Auth(credential)
        self.platform = platform_ or host_platform()

    # -- auth -------------------------------------------------------------------------------

    async def _token(self, challenge: str) -> str:
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise RegistryError("unauthorized", f"the registry's Bearer challenge has no realm: {challenge}")
        query = {k: v for k, v in params.items() if k in ("service", "scope")}
        if "scope" not in query:
            query["scope"] = f"repository:{self.ref.path}:pull"
        auth = _basic(self.auth.credential) if self.auth.credential else None
        try:
            async with self.session.get(realm, params=query, headers={"Authorization": auth} if auth else {}) as r:
                if r.status in (401, 403):
                    raise RegistryError("unauthorized", f"failed to fetch {'oauth' if auth else 'anonymous'} token: "
                                        f"unexpected status from GET request to {realm}: {r.status} {r.reason}")
                if r.status != 200:
                    raise RegistryError("unreachable", f"failed to fetch token: {realm}: {r.status} {r.reason}")
                doc = await r.json(content_type=None)
        except aiohttp.ClientError as err:
            raise RegistryError("unreachable", f"failed to fetch token from {realm}: {err}") from err
        token = doc.get("token") or doc.get("access_token")
        if not token:
            raise RegistryError("unauthorized", f"the token service at {realm} returned no token")
        return str(token)

    async def _request(self, url: str, headers: Mapping[str, str]) -> aiohttp.ClientResponse:
        """GET ``url``, answering one auth challenge; the caller reads and releases the response."""
        for attempt in range(2):
            h = dict(headers)
            if self.auth.header:
                h["Authorization"] = self.auth.header
            try:
                r = await self.session.get(url, headers=h)
            except aiohttp.ClientError as err:
                raise RegistryError("unreachable", f'failed to do request: Get "{url}": {err}') from err
            if r.status != 401:
                return r
            challenge = r.headers.get("WWW-Authenticate", "")
            r.release()
            if attempt == 1:
                break
            scheme = challenge.split(" ", 1)[0].lower()
            if scheme == "bearer":
                self.auth.header = f"Bearer {await self._token(challenge)}"
            elif scheme == "basic" and self.auth.credential is not None:
                self.auth.header = _basic(self.auth.credential)
            else:
                break
        raise RegistryError("unauthorized", "authorization failed: 401 Unauthorized"
                            + ("" if self.auth.credential else " (no credentials for this registry: add an imagePullSecret)"))

    # -- manifests --------------------------------------------------------------------------

    async def _manifest(self, obj: str) -> tuple[str, str, bytes]:
        url = f"{self.base}/manifests/{obj}"
        r = await self._request(url, {"Accept": _ACCEPT})
        try:
            if r.status == 404:
                raise RegistryError("not-found", f"{self.ref.repository}:{obj}: not found" if ":" not in obj else f"{self.ref.repository}@{obj}: not found")
            if r.status == 403:
                raise RegistryError("unauthorized", "authorization failed: 403 Forbidden")
            if r.status != 200:
                raise RegistryError("unreachable", f"unexpected status from GET request to {url}: {r.status} {r.reason}")
            body = await r.content.read(_MAX_MANIFEST + 1)
            if len(body) > _MAX_MANIFEST:
                raise RegistryError("invalid", f"manifest {url} is larger than {_MAX_MANIFEST} bytes")
            media = r.headers.get("Content-Type", "").split(";", 1)[0].strip()
            header_digest = r.headers.get("Docker-Content-Digest", "")
        finally:
            r.release()
        digest = obj if obj.startswith("sha256:") else "sha256:" + hashlib.sha256(body).hexdigest()
        if not _digest_ok(digest, body) or (header_digest and header_digest != digest and header_digest.startswith("sha256:")):
            raise RegistryError("invalid", f"manifest {url}: content does not match digest {header_digest or digest}")
        try:
            doc = json.loads(body)
        except ValueError as err:
            raise RegistryError("invalid", f"manifest {url} is not JSON: {err}") from err
        media = doc.get("mediaType") or media
        if media in DOCKER_SCHEMA1 or doc.get("schemaVersion") == 1:
            raise RegistryError("invalid", "Docker Image Format v1 and Docker Image manifest version 2, schema 1 are no longer "
                                "supported: push the image again with a current tool")
        if not media:
            media = OCI_INDEX if "manifests" in doc else OCI_MANIFEST
        return digest, media, body

    def _select(self, index: Mapping[str, Any]) -> Mapping[str, Any]:
        want_os, want_arch = self.platform
        matches = [m for m in index.get("manifests") or []
                   if (m.get("platform") or {}).get("os") == want_os and (m.get("platform") or {}).get("architecture") == want_arch]
        if not matches:
            have = sorted({f"{(m.get('platform') or {}).get('os')}/{(m.get('platform') or {}).get('architecture')}"
                           for m in index.get("manifests") or []})
            raise RegistryError("not-found", f"no match for platform in manifest: not found (the node is {want_os}/{want_arch}; "
                                f"the image has {', '.join(have) or 'no platforms'})")
        matches.sort(key=lambda m: 0 if (m.get("platform") or {}).get("variant") in (None, "", "v8") else 1)
        return matches[0]

    async def resolve(self) -> Resolved:
        digest, media, body = await self._manifest(self.ref.object)
        top = digest
        for _ in range(2):  # an index of indexes is allowed one level deep
            if media not in INDEX_TYPES:
                break
            chosen = self._select(json.loads(body))
            digest, media, body = await self._manifest(str(chosen["digest"]))
        if media not in MANIFEST_TYPES:
            raise RegistryError("invalid", f"unsupported manifest media type {media!r}")
        return Resolved(top, digest, json.loads(body), media)

    # -- blobs ------------------------------------------------------------------------------

    async def blob_bytes(self, digest: str, limit: int = _MAX_MANIFEST) -> bytes:
        url = f"{self.base}/blobs/{digest}"
        r = await self._request(url, {})
        try:
            if r.status == 404:
                raise RegistryError("not-found", f"blob {digest}: not found")
            if r.status != 200:
                raise RegistryError("unreachable", f"unexpected status from GET request to {url}: {r.status} {r.reason}")
            body = await r.content.read(limit + 1)
        finally:
            r.release()
        if len(body) > limit or not _digest_ok(digest, body):
            raise RegistryError("invalid", f"blob {digest}: content does not match its digest")
        return body

    async def blob_to_file(self, digest: str, size: int, dest: str) -> None:
        """Stream a blob into ``dest`` (atomically: a temp file renamed once the digest matched)."""
        url = f"{self.base}/blobs/{digest}"
        r = await self._request(url, {})
        tmp = f"{dest}.partial-{os.getpid()}-{id(self)}"
        h = hashlib.sha256()
        n = 0
        try:
            if r.status == 404:
                raise RegistryError("not-found", f"blob {digest}: not found")
            if r.status != 200:
                raise RegistryError("unreachable", f"unexpected status from GET request to {url}: {r.status} {r.reason}")
            with open(tmp, "wb") as f:
                async for chunk in r.content.iter_chunked(1 << 20):
                    n += len(chunk)
                    if size and n > size:
                        raise RegistryError("invalid", f"blob {digest}: longer than its descriptor's {size} bytes")
                    h.update(chunk)
                    f.write(chunk)
            if (size and n != size) or f"sha256:{h.hexdigest()}" != digest:
                raise RegistryError("invalid", f"blob {digest}: got {n} bytes with digest sha256:{h.hexdigest()}")
            os.replace(tmp, dest)
        except aiohttp.ClientError as err:
            raise RegistryError("unreachable", f"failed to copy {digest}: {err}") from err
        finally:
            r.release()
            if os.path.exists(tmp):
                os.unlink(tmp)
