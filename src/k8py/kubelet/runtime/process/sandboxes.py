"""The process runtime's pod sandboxes: records on disk and the pod IPs.

A sandbox here is bookkeeping, not a process: the pod's identity, its log
directory and its IP (from :class:`~k8py.kubelet.runtime.ipam.PodIPAllocator`,
or the node's address for ``hostNetwork`` pods). Containers refer to it by
id. Records live in ``<state-dir>/sandboxes/<id>.json`` so a restarted
kubelet finds them (and re-reserves their IPs when it learns the CIDR).
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from typing import Any

from k8py.kubelet.runtime.ipam import IPExhausted, PodIPAllocator
from k8py.kubelet.runtime.process.records import read_records, write_record
from k8py.kubelet.runtime.protocols import NotFoundError, PodSandboxConfig, PodSandboxStatus, RuntimeErrorStatus, SandboxState

__all__ = ["Sandboxes"]


class Sandboxes:
    def __init__(self, state_dir: str, *, node_ip: str) -> None:
        self.dir = os.path.join(state_dir, "sandboxes")
        self.node_ip = node_ip
        self.records: dict[str, dict[str, Any]] = {}
        self._ipam: PodIPAllocator | None = None
        os.makedirs(self.dir, exist_ok=True)

    def load(self) -> None:
        for rec in read_records(self.dir):
            self.records[rec["id"]] = rec

    def set_cidr(self, pod_cidr: str) -> None:
        if self._ipam is not None and self._ipam.cidr == str(PodIPAllocator(pod_cidr).network):
            return
        self._ipam = PodIPAllocator(pod_cidr)
        for sb in self.records.values():
            if sb["state"] == SandboxState.READY.value and sb.get("ip") and not sb["config"].get("host_network") and not sb.get("netns"):
                self._ipam.reserve(sb["ip"])

    def create(self, config: PodSandboxConfig, *, network: tuple[str, str] | None = None, sid: str = "") -> str:
        """A new READY sandbox; ``network`` = (IP, netns name) when a pod network made them."""
        if network is not None:
            ip = network[0]
        elif config.host_network:
            ip = self.node_ip
        else:
            if self._ipam is None:
                raise RuntimeErrorStatus("NetworkNotReady", "network is not ready: the runtime has no pod CIDR yet")
            try:
                ip = self._ipam.allocate()
            except IPExhausted:
                raise RuntimeErrorStatus("FailedCreatePodSandBox", f"failed to allocate for range 0: no IP addresses available in range "
                                         f"set: {self._ipam.cidr} (a /24 holds 253 pods: give the node a larger pod CIDR)") from None
        sid = sid or secrets.token_hex(32)
        rec = {"id": sid, "state": SandboxState.READY.value, "created_at": time.time(), "ip": ip, "netns": network[1] if network else "",
               "config": {"name": config.name, "namespace": config.namespace, "uid": config.uid, "attempt": config.attempt,
                          "hostname": config.hostname, "log_directory": config.log_directory, "labels": dict(config.labels),
                          "annotations": dict(config.annotations), "host_network": config.host_network,
                          "cgroup_parent": config.cgroup_parent,
                          "port_mappings": [list(m) for m in config.port_mappings]}}
        self.records[sid] = rec
        os.makedirs(config.log_directory, exist_ok=True)
        write_record(os.path.join(self.dir, f"{sid}.json"), rec)
        return sid

    def get(self, sid: str) -> dict[str, Any]:
        try:
            return self.records[sid]
        except KeyError:
            raise NotFoundError(f"pod sandbox {sid} not found") from None

    def mark_stopped(self, sid: str) -> None:
        sb = self.get(sid)
        if sb["state"] == SandboxState.READY.value:
            sb["state"] = SandboxState.NOTREADY.value
            if self._ipam is not None and not sb["config"].get("host_network") and not sb.get("netns"):
                self._ipam.release(sb["ip"])
            write_record(os.path.join(self.dir, f"{sid}.json"), sb)

    def delete(self, sid: str) -> None:
        sb = self.records.pop(sid, None)
        if sb is None:
            return
        shutil.rmtree(sb["config"]["log_directory"], ignore_errors=True)
        try:
            os.unlink(os.path.join(self.dir, f"{sid}.json"))
        except FileNotFoundError:
            pass

    @staticmethod
    def status(sb: dict[str, Any]) -> PodSandboxStatus:
        cfg = sb["config"]
        return PodSandboxStatus(sb["id"], cfg["name"], cfg["namespace"], cfg["uid"], cfg["attempt"], SandboxState(sb["state"]),
                                sb["created_at"], ip=sb["ip"] if sb["state"] == SandboxState.READY.value else "",
                                labels=cfg["labels"], annotations=cfg["annotations"])
