"""The authenticator protocols the chain is built from, as upstream's.

A :class:`RequestAuthenticator` looks at the whole request (x509 client
certificates, front-proxy request headers); a :class:`TokenAuthenticator`
at a bearer token only (static token file, bootstrap tokens,
service-account JWTs). Each answers ``None`` when the credential is not one
it knows ("not mine"; the next is asked) and raises
:class:`~k8py.api.errors.Unauthorized` when it is its kind of credential but
invalid (expired, bad signature, revoked): the chain then answers 401 unless
another authenticator accepts it, as upstream's union authenticator does.
"""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from k8py.apiserver.authn.user import UserInfo

__all__ = ["RequestAuthenticator", "TokenAuthenticator"]


class RequestAuthenticator(Protocol):
    async def authenticate_request(self, request: web.Request) -> UserInfo | None: ...


class TokenAuthenticator(Protocol):
    async def authenticate_token(self, token: str) -> UserInfo | None: ...
