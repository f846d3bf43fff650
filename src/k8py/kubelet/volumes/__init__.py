"""Pod volumes on disk (upstream's volume manager, for the in-tree kinds k8py has).

- :mod:`.atomic_writer` — the ``..data`` symlink swap that makes ConfigMap,
  Secret, downwardAPI and projected volumes change all at once;
- :mod:`.manager` — lays out each pod's volumes under
  ``<root>/pods/<uid>/volumes/<kind>/<name>`` and turns volumeMounts into
  runtime mounts.
"""
