"""The kubelet's side of the CRI: a gRPC client for a remote container runtime.

``api/`` holds k8py's subset of the CRI v1 protobuf API and the modules
generated from it (``scripts/gen-cri-stubs``); :mod:`.client` is the asyncio
client over the runtime's unix socket. Needs ``grpcio`` (the ``grpc`` extra).
"""
