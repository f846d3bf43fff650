"""Audit logging (upstream ``k8s.io/apiserver/pkg/audit``): a Policy, a filter, a log backend.

``policy``       which requests are recorded at which level (audit.k8s.io/v1 Policy)
``auditor``      the filter writing an Event at each stage of a selected request
``log_backend``  JSON lines to a file (or stdout), rotated by size and age

Sits beside admission (handlers and the server use it); imports only authn below it.
"""
