"""The system trust roots of the TLS contexts a module makes at import, loaded later.

Why: aiohttp makes two TLS client contexts when it is imported and loads the
system's trust roots into both (some 150 certificates: 60 ms of CPU). The
zygote (:mod:`k8py.cli.zygote`) imports aiohttp on the way to the API
server's first answer, so it imports it inside :func:`deferred_trust_roots`
and calls :func:`load_trust_roots` once the API server is forked, before any
other component is: every other child has aiohttp's default contexts as they
would have been. The API server's stay without roots — it never makes a TLS
connection with them: webhooks, aggregated API servers and kubelets each get
a context of their own (their CA bundle, or a fresh default context), and
etcd is spoken to over plain HTTP; one that did would fail to verify, never
connect unverified.

Invariant: :mod:`ssl` is as it was once the ``with`` block ends (the
override lives on :class:`ssl.SSLContext` only inside it), and one already
made by someone else is left alone (nothing is then deferred).
"""

from __future__ import annotations

import contextlib
import ssl
from typing import Iterator

__all__ = ["deferred_trust_roots", "load_trust_roots"]


@contextlib.contextmanager
def deferred_trust_roots() -> Iterator[list[ssl.SSLContext]]:
    """Inside the block, a TLS context made and told to load the system trust
    roots is left without them and appended to the yielded list, for
    :func:`load_trust_roots`."""
    contexts: list[ssl.SSLContext] = []
    cls = ssl.SSLContext
    if "set_default_verify_paths" in cls.__dict__:  # someone else's override: leave it alone
        yield contexts
        return

    def defer(context: ssl.SSLContext) -> None:  # load_default_certs (create_default_context) and aiohttp's own call end here
        contexts.append(context)

    cls.set_default_verify_paths = defer  # type: ignore[method-assign]
    try:
        yield contexts
    finally:
        del cls.set_default_verify_paths  # (the C method underneath is back)


def load_trust_roots(contexts: list[ssl.SSLContext]) -> None:
    """Load the trust roots into the contexts :func:`deferred_trust_roots` gathered."""
    while contexts:
        contexts.pop().set_default_verify_paths()
