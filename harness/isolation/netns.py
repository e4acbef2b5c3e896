"""A network namespace per group of ranks. The kernel keeps network state that outlives a process and that no file
lock covers: the TCP metrics cache (an entry per address connected to, readable without privileges), ports in
TIME_WAIT, abstract unix sockets, neighbour entries. In the host's namespace a rank could leave bytes there for a later
group or run. Here the judge makes a namespace with its loopback up (a forked helper unshares it, the judge keeps a
descriptor of it, the helper exits), each rank of the group enters it before it drops its capabilities, and the
namespace goes when the group's ranks and the judge's descriptor have.

On the CPU and on GPUs at world 1; at worlds 2 and 4 on GPUs the ranks stay in the host's namespace (NCCL between GPUs
in one is not yet run), as the README's known limits say."""
import ctypes
import fcntl
import os
import socket
import struct
import warnings

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
_libc = ctypes.CDLL(None, use_errno=True)


def _loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH14s", b"lo", 0, b"")))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def make():
    """A descriptor of a new network namespace whose loopback is up; None where the kernel refuses one. A forked
    helper (no new interpreter: a group's start stays cheap) unshares it, brings `lo` up and waits until the judge
    has opened /proc/<helper>/ns/net; it runs nothing but these syscalls, then exits."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    with warnings.catch_warnings():     # Python >= 3.12 warns of fork beside threads: the helper runs syscalls only
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:                        # the helper
        ok = b"0"
        try:
            os.close(ready_r)
            os.close(done_w)
            if _libc.unshare(CLONE_NEWNET) == 0:
                _loopback_up()
                ok = b"1"
        except BaseException:
            pass
        try:
            os.write(ready_w, ok)
            os.read(done_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    fd = None
    try:
        if os.read(ready_r, 1) == b"1":
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = None
    finally:
        os.close(ready_r)
        os.close(done_w)
        os.waitpid(pid, 0)
    return fd


def enter(fd):
    """Move this process into the namespace of `fd` (needs CAP_SYS_ADMIN: before the capabilities go); raises
    OSError where the kernel refuses."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns into the group's network namespace failed: {os.strerror(err)}")

