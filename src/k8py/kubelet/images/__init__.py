"""The node's image service: pull OCI/Docker images from registries and keep them.

The pieces, each its own module:

- :mod:`.reference` — image references as the distribution grammar has
  them (``host[:port]/path[:tag][@digest]``), normalised the way the node
  lists them, and which ones are pulled from a registry;
- :mod:`.credentials` — ``kubernetes.io/dockerconfigjson`` pull secrets and
  the node's own ``config.json``: which username/password to try for a host;
- :mod:`.registry` — the registry v2 client (Bearer token challenge, basic
  auth, manifests and indexes with platform selection, blobs verified by
  digest, plain HTTP only for loopback registries);
- :mod:`.unpack` — applying layer tars onto a rootfs: whiteouts, opaque
  directories, diff_ids verified, nothing written outside the root;
- :mod:`.store` — the content store on the node, shared by every pod:
  blobs by digest, one unpacked rootfs per image, the image records;
- :mod:`.gc` — image garbage collection by disk thresholds, as upstream's
  ``imageGCHighThresholdPercent``/``imageGCLowThresholdPercent``;
- :mod:`.puller` — :class:`~.puller.ImagePuller`: pull (one at a time per
  reference), status, list, remove; the failures as the kubelet reports them.

Nothing here knows about pods: the kubelet passes credentials in, the
runtime asks for a rootfs and an image config.
"""
