"""A Docker token-auth server for tests: the ``realm`` of a docker-registry's Bearer challenge.

docker-registry (``auth: token``) answers ``401`` with ``WWW-Authenticate:
Bearer realm=…,service=…,scope=…``; a client fetches a JWT from the realm
(basic auth for a user, none for anonymous) and retries with it. This
server issues RS256 JWTs whose ``x5c`` header carries a self-signed
certificate the registry trusts (its ``rootcertbundle``). ``users`` may
pull and push every repository; anonymous callers get a token with no
access, which the registry refuses (as Docker Hub does for a private repo).
"""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import os
import secrets
import threading
import time
import urllib.parse
from typing import Mapping

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

__all__ = ["TokenServer"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    def __init__(self, workdir: str, *, users: Mapping[str, str], service: str = "k8py-test-registry",
                 issuer: str = "k8py-test-issuer") -> None:
        self.users = dict(users)
        self.service = service
        self.issuer = issuer
        self.cert_path = os.path.join(workdir, "token-cert.pem")
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k8py test token issuer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        os.makedirs(workdir, exist_ok=True)
        with open(self.cert_path, "wb") as f:
            f.write(self.cert.public_bytes(serialization.Encoding.PEM))
        #: (user or "", scope) of each token request, for assertions
        self.requests: list[tuple[str, str]] = []
        self._httpd: http.server.ThreadingHTTPServer | None = None

    @property
    def realm(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/token"

    def token(self, user: str, scope: str) -> str:
        access = []
        if user and scope:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        der = self.cert.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": user, "aud": self.service, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": secrets.token_hex(8), "access": access}
        signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        sig = self.key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing}.{_b64(sig)}"

    def start(self) -> "TokenServer":
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                url = urllib.parse.urlparse(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                user = ""
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    name, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                    if outer.users.get(name) != password:
                        self.send_response(401)
                        self.end_headers()
                        return
                    user = name
                outer.requests.append((user, query.get("scope", "")))
                body = json.dumps({"token": outer.token(user, query.get("scope", "")), "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="registry-token-server", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def registry_config(self) -> str:
        return (f"auth:\n  token:\n    realm: {self.realm}\n    service: {self.service}\n    issuer: {self.issuer}\n"
                f"    rootcertbundle: {self.cert_path}\n")
