"""What the server describes about itself: discovery and OpenAPI.

``discovery``   ``/api``, ``/apis`` and the per-group-version resource lists
                (legacy and aggregated), from the registry
``v3``          the ``/openapi/v3`` documents, from the registry and the
                upstream schemas
``v2``          the ``/openapi/v2`` document (Swagger JSON or gnostic
                protobuf) that kubectl's client-side validation reads
``paths``       the operations (``paths``) of one group-version document

Read-only over the registry; served by ``app``.
"""
