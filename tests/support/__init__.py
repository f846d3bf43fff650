"""Shared test kit: real API servers (in a thread or as a process), kubeconfigs, kubectl."""
