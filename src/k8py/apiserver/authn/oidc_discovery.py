"""Service-account issuer discovery: ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``.

So that anyone can verify this cluster's service-account tokens without
asking the API server (a cloud's workload identity federation, Vault), as
upstream's ``pkg/serviceaccount/openidmetadata.go``:

- the configuration names the issuer, ``jwks_uri`` (``--service-account-jwks-uri``,
  else the issuer URL with the path ``/openid/v1/jwks``), ``response_types_supported``
  ``["id_token"]``, ``subject_types_supported`` ``["public"]`` and the signing
  algorithms of the verifying keys;
- the JWKS holds the public verifying keys (``kid`` as the tokens carry it);
- both are cacheable for an hour (``Cache-Control: public, max-age=3600``).

An issuer that is not an ``https://`` URL (and no explicit jwks URI) serves no
discovery, as upstream: a 404 says what to set. Documents are built once.
"""

from __future__ import annotations

from typing import Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import orjson
from aiohttp import web

from k8py.api.errors import NotFound
from k8py.api.service_account_keys import jwks
from k8py.apiserver.authn.service_account import ServiceAccountTokens

__all__ = ["OIDCDiscovery", "CONFIGURATION_PATH", "JWKS_PATH"]

CONFIGURATION_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
CACHE_CONTROL = "public, max-age=3600"


def _jwks_uri(config: ServiceAccountTokens) -> str:
    if config.jwks_uri:
        return config.jwks_uri
    parts = urlsplit(config.issuer)
    if parts.scheme != "https" or not parts.netloc:
        return ""
    return urlunsplit(("https", parts.netloc, JWKS_PATH, "", ""))


class OIDCDiscovery:
    def __init__(self, config: ServiceAccountTokens) -> None:
        uri = _jwks_uri(config)
        self.enabled = bool(uri)
        self.configuration = orjson.dumps({
            "issuer": config.issuer,
            "jwks_uri": uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": sorted({k.algorithm for k in config.verifying_keys}) or ["RS256"],
        })
        self.keys = orjson.dumps(jwks(config.verifying_keys))

    def _check(self) -> None:
        if not self.enabled:
            raise NotFound("service account issuer discovery is off: --service-account-issuer is not an https:// URL; "
                           "give one, or set --service-account-jwks-uri")

    async def serve_configuration(self, request: web.Request) -> web.StreamResponse:
        self._check()
        return web.Response(body=self.configuration, headers={"Content-Type": "application/json", "Cache-Control": CACHE_CONTROL})

    async def serve_jwks(self, request: web.Request) -> web.StreamResponse:
        self._check()
        return web.Response(body=self.keys, headers={"Content-Type": "application/jwk-set+json", "Cache-Control": CACHE_CONTROL})

    def routes(self) -> dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]]:
        return {CONFIGURATION_PATH: self.serve_configuration, JWKS_PATH: self.serve_jwks}
