"""k8py: a Kubernetes-compatible cluster written in Python.

Layers (checked by import-linter, see pyproject.toml):

- ``k8py.api``: the shapes shared by server and client — Status errors, object
  metadata helpers, selectors, patch engines, upstream schemas. No I/O.
- ``k8py.storage``: the revisioned key-value store contract and its backends
  (embedded SQLite, etcd v3).
- ``k8py.apiserver``: the only entry point to the store; serves list and watch
  over HTTP with Kubernetes' semantics.
- ``k8py.client``: the informer machinery; talks to any API server over HTTP.
- ``k8py.cli``: entry points that only wire the rest together.
"""

__version__ = "0.1.0"
