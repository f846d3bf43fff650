"""CertificateSigningRequest controllers of the controller manager.

- ``csrsigning`` (:mod:`.signer`): signs approved CSRs for the
  ``kubernetes.io/kube-apiserver-client``, ``kube-apiserver-client-kubelet``
  and ``kubelet-serving`` signers with ``--cluster-signing-cert-file`` /
  ``--cluster-signing-key-file``, writing ``status.certificate``, or a
  ``Failed`` condition when the request breaks its signer's rules;
- ``csrapproving`` (:mod:`.approver`): approves kubelets' client certificate
  requests (``kube-apiserver-client-kubelet``) from bootstrap tokens and from
  nodes renewing their own, after a SubjectAccessReview, as upstream's
  ``sarapprove``;
- :mod:`.csr_checks`: the pure rules both use (what a node client or a
  kubelet serving request must look like).

They watch CertificateSigningRequests only and write only their ``status``
(signer) and ``approval`` (approver) subresources.
"""
