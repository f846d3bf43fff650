"""The static token file authenticator (``--token-auth-file``, upstream ``tokenfile``).

The file is CSV, one token a line, as upstream reads it::

    token,user,uid,"group1,group2"

At least three columns (token, user name, uid); the fourth, optional, is a
comma-separated group list. Leading spaces of a field are ignored; a line
whose token repeats an earlier one replaces it (upstream logs a warning and
keeps the later). The file is read once, at start.

A bearer token in the file is that user; any other token is ``None`` (not
this authenticator's: another token authenticator may know it).
"""

from __future__ import annotations

import csv
import logging
from typing import Mapping

from k8py.apiserver.authn.user import UserInfo

__all__ = ["StaticTokenAuthenticator", "TokenFileError"]

log = logging.getLogger(__name__)


class TokenFileError(ValueError):
    """A token file that cannot be used (the message says which line and why)."""


class StaticTokenAuthenticator:
    def __init__(self, tokens: Mapping[str, UserInfo]) -> None:
        self._tokens = dict(tokens)

    @classmethod
    def from_file(cls, path: str) -> "StaticTokenAuthenticator":
        tokens: dict[str, UserInfo] = {}
        try:
            with open(path, newline="", encoding="utf-8-sig") as f:
                for number, record in enumerate(csv.reader(f, skipinitialspace=True), start=1):
                    if not record or record == [""]:
                        continue
                    if len(record) < 3:
                        raise TokenFileError(f"token file '{path}' must have at least 3 columns (token, user name, user uid), found {len(record)}")
                    token, name, uid = record[0], record[1], record[2]
                    if not token:
                        raise TokenFileError(f"token file '{path}': record {number} has an empty token")
                    groups = tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
                    if token in tokens:
                        log.warning("duplicate token in token file; the later record wins", extra={"path": path, "record": number})
                    tokens[token] = UserInfo(name, uid=uid, groups=groups)
        except OSError as err:
            raise TokenFileError(f"cannot read token file {path}: {err.strerror or err}") from err
        return cls(tokens)

    async def authenticate_token(self, token: str) -> UserInfo | None:
        return self._tokens.get(token)
