"""Probes: startup, liveness and readiness (upstream's ``prober`` package).

- :mod:`.probes` — run one probe once (exec, httpGet, tcpSocket, grpc);
- :mod:`.manager` — one worker task per (container, probe kind) applying
  initialDelaySeconds, periodSeconds, timeoutSeconds and the success and
  failure thresholds; the source of truth for each container's ``ready``
  and ``started``, and for which containers must be killed (liveness or
  startup failure). Every change wakes the pod's worker.
"""
