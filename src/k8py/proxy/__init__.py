"""k8py.proxy: kube-proxy and the cluster DNS, one pair per node.

What it watches: Services, EndpointSlices and its own Node (the proxy);
Services, EndpointSlices and Namespaces (DNS). What it writes: nothing but
the ``kube-system/kube-dns`` Service and Endpoints that advertise the DNS
server. What it is the source of truth for: how this node moves traffic
addressed to a Service, and the answers to cluster DNS names.

- :mod:`.service_table`: Services + slices → the endpoints each service port
  may use (ready, terminating fallback, traffic policies) — pure;
- :mod:`.balancer`: round-robin and ClientIP session affinity;
- :mod:`.backend`: the one interface a forwarding backend implements;
- :mod:`.userspace` (+ :mod:`.tcp_relay`, :mod:`.udp_relay`): the asyncio
  backend that needs no root;
- :mod:`.proxier`: informers → table → backend, one sync per change;
- :mod:`.dns_zone` (records, pure), :mod:`.dns_server` (wire, sockets);
- :mod:`.app`: ``run_proxy`` and ``run_dns`` for ``k8py proxy`` and ``k8py dns``.

Imports only :mod:`k8py.client` and :mod:`k8py.api` (checked by import-linter).
"""
