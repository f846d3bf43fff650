"""What ``k8py up`` writes into a new cluster besides what the API server bootstraps itself.

As kubeadm does after ``kubeadm init``: the ClusterRoleBinding
:data:`NODE_ROTATION_BINDING`, so that kubelets' client-certificate renewals
(they run with ``--rotate-certificates``) are approved by csrapproving —
``system:nodes`` may ask for ``selfnodeclient``. Created once; on a cluster
that has it the API server answers 409, which is success too.
"""

from __future__ import annotations

from k8py.cluster.readiness import Prober

__all__ = ["NODE_ROTATION_BINDING", "ensure_node_certificate_rotation"]

#: kubeadm's name for it
NODE_ROTATION_BINDING = "kubeadm:node-autoapprove-certificate-rotation"


async def ensure_node_certificate_rotation(prober: Prober, api_url: str) -> str:
    """Create the binding; returns "" or, when it could not be made, a warning to show."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": NODE_ROTATION_BINDING},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}
    answer = await prober.post_json(f"{api_url}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    if answer is not None and answer[0] in (201, 409):
        return ""
    return (f"warning: could not create the ClusterRoleBinding {NODE_ROTATION_BINDING} "
            f"({answer[0] if answer else 'no answer'}): kubelets' certificate renewals will wait for kubectl certificate approve")
