"""A network namespace per group of ranks. The kernel keeps network state that outlives a process and that no file
lock covers: the TCP metrics cache (an entry per address connected to, readable without privileges), ports in
TIME_WAIT, abstract unix sockets, neighbour entries. In the host's namespace a rank could leave bytes there for a later
group or run. Here the judge makes a namespace with its loopback up (a helper process unshares it, the judge keeps a
descriptor of it, the helper exits), each rank of the group enters it before it drops its capabilities, and the
namespace goes when the group's ranks and the judge's descriptor have.

On the CPU and on GPUs at world 1; at worlds 2 and 4 on GPUs the ranks stay in the host's namespace (NCCL between GPUs
in one is not yet run), as the README's known limits say."""
import ctypes
import os
import subprocess
import sys

CLONE_NEWNET = 0x40000000
# The helper: a new namespace, its loopback up (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP), "ok", then it waits for
# the judge to have opened /proc/<helper>/ns/net.
HELPER = """import ctypes, fcntl, socket, struct, sys
if ctypes.CDLL(None, use_errno=True).unshare(0x40000000) != 0:
    sys.exit(1)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, struct.pack("16sH14s", b"lo", 0, b"")))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))
print("ok", flush=True)
sys.stdin.read()
"""
_libc = ctypes.CDLL(None, use_errno=True)


def make():
    """A descriptor of a new network namespace whose loopback is up; None where the kernel refuses one."""
    try:
        p = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", "")})
    except OSError:
        return None
    fd = None
    try:
        if p.stdout.readline() == b"ok\n":
            fd = os.open(f"/proc/{p.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = None
    finally:
        p.stdin.close()
        p.wait()
        p.stdout.close()
    return fd


def enter(fd):
    """Move this process into the namespace of `fd` (needs CAP_SYS_ADMIN: before the capabilities go); raises
    OSError where the kernel refuses."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns into the group's network namespace failed: {os.strerror(err)}")


def inode(pid="self"):
    """The network namespace of a process, as the kernel numbers it."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino
