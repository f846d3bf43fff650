"""CustomResourceDefinitions: ``apiextensions.k8s.io/v1`` and the resources they serve.

- :mod:`.definition` — the CustomResourceDefinition kind itself (defaults,
  validation, the cleanup finalizer a DELETE adds);
- :mod:`.custom` — the :class:`~k8py.apiserver.registry.ResourceDefinition` a
  CRD version becomes, and the strategy custom objects are written with;
- :mod:`.registrar` — follows CRDs in the store and registers, replaces and
  removes their resources at run time, sets their conditions, and deletes a
  deleted CRD's objects before letting it go.
"""

from k8py.apiserver.crd.definition import CRD_DEFINITION, CLEANUP_FINALIZER
from k8py.apiserver.crd.registrar import CRDRegistrar

__all__ = ["CRD_DEFINITION", "CLEANUP_FINALIZER", "CRDRegistrar"]
