"""The names of one node's pod network, and the test for "is this ours".

Linux limits interface names to 15 bytes, so names carry a 6-hex-digit tag
(a hash of the node name and the kubelet's root directory) rather than the
node name itself; the bridge also gets the node name as its ``ifalias``
so ``ip -d link`` says whose it is. Everything this node creates starts
with :attr:`NetworkNames.prefix`; cleanup removes exactly those names.

Invariants: a name is a pure function of (node, root dir, sandbox id), so
a restarted kubelet finds its bridge and namespaces again; two kubelets
with different root dirs never collide (up to the 24-bit tag).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["NetworkNames"]


@dataclass(frozen=True)
class NetworkNames:
    node: str
    root_dir: str

    @property
    def tag(self) -> str:
        return hashlib.sha1(f"{self.node}\0{self.root_dir}".encode()).hexdigest()[:6]

    @property
    def prefix(self) -> str:
        """What every netns of this node is called first (``k8py-<tag>-``)."""
        return f"k8py-{self.tag}-"

    @property
    def bridge(self) -> str:
        return f"k8pybr-{self.tag}"  # 13 bytes: fits IFNAMSIZ

    @property
    def network(self) -> str:
        """The CNI network name (host-local keeps its leases under it)."""
        return f"k8py-{self.tag}"

    def netns(self, sandbox_id: str) -> str:
        return f"{self.prefix}{sandbox_id[:12]}"

    def owns_netns(self, name: str) -> bool:
        return name.startswith(self.prefix)
