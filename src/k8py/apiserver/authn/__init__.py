"""Authentication: who a request comes from.

``user``      :class:`UserInfo`, the identity every later stage (authorization,
              admission, audit, webhooks) reads from ``request[USER_KEY]``,
              and the well-known user and group names

The authenticator chain (x509 client certificates, tokens, anonymous,
impersonation) fills ``request[USER_KEY]`` in a middleware before any handler
runs; a request no authenticator accepts gets 401. Sits below ``admission`` so
that admission plugins can read the user, and never imports the handlers.
"""
