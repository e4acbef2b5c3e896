"""System V IPC (shared memory, semaphores, message queues) and POSIX message queues: state outside the
filesystem, which Landlock does not mediate and which outlives the process that made it. A rank could keep decoded
videos there for a later process of the same solution (another group, another run) to replay.

Two defences: on the CPU, and on GPUs at world 1, each rank enters an IPC namespace of its own before it locks itself
(what it makes there is gone with it; on one H200 CUDA IPC of the judge's buffers works across it); everywhere the
judge removes, when a group closes, every System V object made while the group ran (the judge makes none itself),
and the new POSIX message queues where their file system is mounted (/dev/mqueue). At worlds 2 and 4 on GPUs the
ranks stay in the host's namespace (the namespace not yet run with NCCL between GPUs), so there the removal is the
defence."""
import ctypes
import os

KINDS = ("shm", "sem", "msg")
MQUEUE = "/dev/mqueue"
CLONE_NEWIPC = 0x08000000
IPC_RMID = 0
_libc = ctypes.CDLL(None, use_errno=True)


def snapshot():
    """{(kind, id)} of the System V objects this IPC namespace holds now (empty where /proc/sysvipc is missing)."""
    out = set()
    for kind in KINDS:
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        out.update((kind, int(line.split()[1])) for line in lines if line.strip())
    try:         # POSIX message queues, where their file system is mounted (elsewhere they cannot be listed)
        out.update(("mq", name) for name in os.listdir(MQUEUE))
    except OSError:
        pass
    return out


def remove_new(before):
    """Remove every System V object not in `before` (a snapshot()); returns those removed."""
    removed = []
    for kind, ident in sorted(snapshot() - before, key=str):
        if kind == "mq":
            try:
                os.unlink(os.path.join(MQUEUE, ident))
                removed.append((kind, ident))
            except OSError:
                pass
            continue
        fn = {"shm": _libc.shmctl, "sem": _libc.semctl, "msg": _libc.msgctl}[kind]
        args = (ident, 0, IPC_RMID, None) if kind == "sem" else (ident, IPC_RMID, None)
        if fn(*args) == 0:
            removed.append((kind, ident))
    return removed


def private_namespace():
    """Enter a new IPC namespace (this thread, and what it starts later); False where the kernel refuses."""
    return _libc.unshare(CLONE_NEWIPC) == 0
