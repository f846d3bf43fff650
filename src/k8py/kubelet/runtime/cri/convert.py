"""Between k8py's runtime dataclasses (:mod:`k8py.kubelet.runtime.protocols`) and CRI's protobuf messages: pure functions.

What :class:`~.runtime.CRIRuntime` sends and reads: times (CRI nanoseconds →
Unix seconds), the pod cgroup (below the runtime's cgroup root, cgroupfs
driver), resources, run-as ids, namespaces (each container its own pid
namespace, as upstream without ``shareProcessNamespace``; host-network pods
in the node's network namespace), and two annotations k8py keeps on the
runtime's objects (:data:`IMAGE_ANNOTATION`, :data:`HOST_NETWORK_ANNOTATION`),
stripped again when read back.
"""

from __future__ import annotations

from k8py.kubelet.runtime.cri.client import pb
from k8py.kubelet.runtime.protocols import ContainerConfig, ContainerState, ContainerStatus, PodSandboxConfig, Resources

__all__ = ["sandbox_config", "container_config", "container_status", "resources", "seconds", "STATES", "PROTOCOLS",
           "IMAGE_ANNOTATION", "HOST_NETWORK_ANNOTATION"]

STATES = {pb.CONTAINER_CREATED: ContainerState.CREATED, pb.CONTAINER_RUNNING: ContainerState.RUNNING,
           pb.CONTAINER_EXITED: ContainerState.EXITED, pb.CONTAINER_UNKNOWN: ContainerState.UNKNOWN}
#: the image name the kubelet asked for, kept on the container: containerd reports an image by its ID's
#: first tag, which differs when two names share one image (upstream keeps pod-spec facts in labels too)
IMAGE_ANNOTATION = "k8py.io/image"
#: on sandboxes in the node's network namespace (the runtime reports no IP for them)
HOST_NETWORK_ANNOTATION = "k8py.io/host-network"
PROTOCOLS = {"TCP": pb.TCP, "UDP": pb.UDP, "SCTP": pb.SCTP}


def seconds(ns: int) -> float:
    """CRI nanoseconds as Unix seconds (0 stays 0: not set)."""
    return ns / 1e9 if ns else 0.0


def resources(r: Resources) -> pb.LinuxContainerResources:
    return pb.LinuxContainerResources(cpu_period=r.cpu_period if r.cpu_quota else 0, cpu_quota=r.cpu_quota,
                                      cpu_shares=r.cpu_shares, memory_limit_in_bytes=r.memory_limit)


def sandbox_config(c: PodSandboxConfig, cgroup_root: str) -> pb.PodSandboxConfig:
    """The CRI sandbox config of ``c``, its cgroup below ``cgroup_root``."""
    cfg = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=c.name, namespace=c.namespace, uid=c.uid, attempt=c.attempt),
        # as upstream, a host-network pod has the node's hostname (its UTS namespace): none is set
        hostname="" if c.host_network else c.hostname or c.name, log_directory=c.log_directory, labels=dict(c.labels),
        annotations=dict(c.annotations),
        port_mappings=[pb.PortMapping(protocol=PROTOCOLS.get(proto.upper(), pb.TCP), container_port=cport,
                                      host_port=hport, host_ip=hip) for proto, cport, hport, hip in c.port_mappings])
    cfg.linux.cgroup_parent = f"{cgroup_root}/{c.cgroup_parent.strip('/')}" if c.cgroup_parent else cgroup_root
    cfg.linux.resources.CopyFrom(resources(c.resources))
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER  # as upstream without shareProcessNamespace
    if c.host_network:  # the node's network namespace (and, in containerd, its UTS namespace): no CNI
        cfg.linux.security_context.namespace_options.network = pb.NODE
        cfg.annotations[HOST_NETWORK_ANNOTATION] = "true"
    return cfg


def container_config(c: ContainerConfig, *, host_network: bool) -> pb.ContainerConfig:
    """The CRI container config of ``c`` (own pid namespace; the node's network for a host-network pod)."""
    cfg = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=c.name, attempt=c.attempt), image=pb.ImageSpec(image=c.image),
        command=list(c.command), args=list(c.args), working_dir=c.working_dir,
        envs=[pb.KeyValue(key=k, value=v) for k, v in c.env],
        mounts=[pb.Mount(container_path=m.container_path, host_path=m.host_path, readonly=m.readonly) for m in c.mounts],
        labels=dict(c.labels), annotations={**c.annotations, IMAGE_ANNOTATION: c.image}, log_path=c.log_path,
        stdin=c.stdin, stdin_once=c.stdin_once, tty=c.tty)
    cfg.linux.resources.CopyFrom(resources(c.resources))
    # the proto default (POD) would put every container in the sandbox's pid namespace, under pause
    cfg.linux.security_context.namespace_options.pid = pb.CONTAINER
    if host_network:
        cfg.linux.security_context.namespace_options.network = pb.NODE
    if c.run_as_user is not None:
        cfg.linux.security_context.run_as_user.value = c.run_as_user
    if c.run_as_group is not None:
        cfg.linux.security_context.run_as_group.value = c.run_as_group
    return cfg


def container_status(s: pb.ContainerStatus, sandbox_id: str) -> ContainerStatus:
    """k8py's status of a CRI container status (the image name the kubelet asked for, from its annotation)."""
    return ContainerStatus(id=s.id, sandbox_id=sandbox_id, name=s.metadata.name, attempt=s.metadata.attempt,
                           state=STATES.get(s.state, ContainerState.UNKNOWN),
                           image=s.annotations.get(IMAGE_ANNOTATION) or s.image.image,
                           image_ref=s.image_ref, created_at=seconds(s.created_at), started_at=seconds(s.started_at),
                           finished_at=seconds(s.finished_at), exit_code=s.exit_code, reason=s.reason,
                           message=s.message, labels=dict(s.labels),
                           annotations={k: v for k, v in s.annotations.items() if k != IMAGE_ANNOTATION},
                           log_path=s.log_path)
