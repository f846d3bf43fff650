"""Kubeconfig writing for the entry points (kept here for existing imports; the code lives in :mod:`k8py.cluster.kubeconfig`)."""

from k8py.cluster.kubeconfig import kubeconfig_document, merge_into_user_kubeconfig, write_kubeconfig

__all__ = ["write_kubeconfig", "kubeconfig_document", "merge_into_user_kubeconfig"]
