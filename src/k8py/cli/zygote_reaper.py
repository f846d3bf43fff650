"""The retired zygote: what ``k8py zygote`` becomes once every component is forked.

Why: the zygote imported k8py once so that its children share those pages,
but each child then writes to much of what it shares (reference counts, the
code objects it runs, the dicts it touches: copy-on-write gives it its own
copy of each page it writes), and a page every child has copied is the
zygote's alone — measured on an idle one-node cluster, some 12 MB of the
zygote's 20 MB PSS, held only to fork components that were all forked long
ago. Once ``k8py up``'s cluster is ready the supervisor asks the zygote to
retire (``{"retire": true}``, see :mod:`k8py.cli.zygote`): it answers
``{"retired": true}`` and :func:`retire` replaces its image with this file,
run by a bare interpreter (``python -I -S``: the standard library's core,
no site-packages, about 0.5 MB of PSS).

What stays the same: the pid (``exec`` keeps it, so the children keep their
parent and the supervisor keeps the process it supervises), the name
(``k8py-zygote``, with its output still in ``DATA_DIR/logs/zygote.log``:
how ``k8py down``'s sweep knows it), the death signal (the zygote still goes
with the supervisor), and the protocol of each child's connection: when a
child exits, its connection gets ``{"exit": CODE}`` (a negative code: killed
by that signal) and is closed, exactly as the zygote would have done.

What changes: nothing is forked any more (the socket is gone, so a request
fails at once: the supervisor starts a component that dies later as its own
interpreter). The reaper exits 0 once it has no child left.

Invariants: standard library only (no k8py import: it runs without
site-packages); each child's exit is reported once, on the connection the
supervisor followed it by; an exit that no connection asked for (a child
whose follower went away) is reaped all the same, so no zombie is left.
"""

from __future__ import annotations

import os
import sys

__all__ = ["retire", "reaper_argv", "main"]

NAME = b"k8py-zygote"


def reaper_argv(children: dict[int, int]) -> list[str]:
    """The command :func:`retire` runs: this file, with each child as ``PID:FD``
    (``FD``: the connection its exit is reported on)."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *(f"{pid}:{fd}" for pid, fd in children.items())]


def retire(children: dict[int, int]) -> None:
    """Replace this process (the zygote) with the reaper; never returns.

    ``children`` maps each live child to the descriptor of its connection,
    which is kept across the ``exec``; every other descriptor the caller
    opened must be close-on-exec (Python's are, unless made inheritable)."""
    for fd in children.values():
        os.set_inheritable(fd, True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    argv = reaper_argv(children)
    os.execv(argv[0], argv)


def main(args: list[str]) -> int:
    try:
        with open("/proc/self/comm", "wb") as comm:  # exec named it after the interpreter
            comm.write(NAME)
    except OSError:
        pass  # not Linux: the name is only what top shows
    followers: dict[int, int] = {}
    for arg in args:
        pid, _, fd = arg.partition(":")
        followers[int(pid)] = int(fd)
    print(f"k8py zygote: retired, following {len(followers)} children", flush=True)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0  # every child has exited and been reported
        fd = followers.pop(pid, None)
        if fd is None:
            continue
        try:
            os.write(fd, b'{"exit": %d}\n' % os.waitstatus_to_exitcode(status))
        except OSError:
            pass  # the supervisor went away (and this process goes with it)
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
