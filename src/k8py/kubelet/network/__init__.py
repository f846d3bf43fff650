"""Pod networks for the process runtime: one network namespace per pod, set up by CNI.

Opt-in (``k8py kubelet --pod-network=cni``); the default stays the loopback
mode, where every pod binds its own 127.x address on the host's network.

- :mod:`.names` — every name this node's network uses (bridge, namespaces,
  the CNI network), derived from the node name and the kubelet's root dir so
  two kubelets on one machine never share one, and so cleanup can find
  exactly what this kubelet made and nothing else;
- :mod:`.cni` — a CNI runtime as the spec describes one: exec the plugins
  of a conflist with ``CNI_*`` env and the config on stdin, chain
  ``prevResult``, cache the result (and the config used) in the kubelet's
  directory so DEL works after a restart;
- :mod:`.host` — the host-side pieces CNI does not make: named network
  namespaces (``ip netns``), the bridge, the Service range's route;
- :mod:`.pod_network` — :class:`CNIPodNetwork`, what the runtime calls:
  sandbox up (netns + ADD → pod IP), sandbox down (DEL + netns removed),
  the argv prefix that puts a container process into its pod's netns, and
  a full cleanup.
"""
