"""Authorization: may this user do this verb on this resource (or path)?

``attributes``  :class:`Attributes` of one request, :class:`Decision`, and the
                :class:`Authorizer` protocol every authorizer (RBAC, Node,
                always-allow) implements

Authorizers are asked in order (``--authorization-mode=Node,RBAC``); the first
that allows or denies decides, and a request no one allows gets 403 with
upstream's message. Reads cluster state only through protocols (listers), so
this package sits beside ``authn`` and below ``admission``.
"""
