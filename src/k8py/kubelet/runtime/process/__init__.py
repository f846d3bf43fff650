"""The process runtime: every container is a host process.

- :mod:`.images` — the image catalog: what command an image name stands for;
- :mod:`.launcher` — the argv that starts a container (bubblewrap where
  present: own pid/ipc/uts namespaces, private /tmp, volumes at their
  mountPath over a read-only view of the host; plainly otherwise) and whom to
  signal to stop it;
- :mod:`.container_record` — a created container's record (argv, env, mounts, securityContext);
- :mod:`.spawn` — starting a created container (stdio FIFOs or a pty, the launch, cgroups);
- :mod:`.security` — capabilities, user and groups, privileged, no_new_privs (``setpriv``);
- :mod:`.terminal` — a ``tty: true`` container's pty master: attach, resize, its log;
- :mod:`.log_pump` — container stdout/stderr (FIFOs) into CRI-format log
  files with rotation;
- :mod:`.records` — the on-disk state that lets a restarted kubelet adopt
  the containers it started (and never touch others); :mod:`.adoption` — adopting them;
- :mod:`.runtime` — :class:`~.runtime.ProcessRuntime`, the protocols' implementation, with its pod
  sandbox calls in :mod:`.sandbox_lifecycle` and its streaming calls in :mod:`.streaming`;
- :mod:`.nginx` — the small built-in web server the ``nginx`` image runs.
"""
