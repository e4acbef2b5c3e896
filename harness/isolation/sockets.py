"""What a group's sockets hold of the kernel's memory, counted by the judge: the sockets a network namespace holds
(those no descriptor names too: a listener's unaccepted connections, orphans) and the bytes queued in them.

A group's memory cgroup (harness/isolation/cgroup.py) is charged for unix sockets' buffers, not for those of netlink
sockets, nor in cgroup v1 for TCP's and UDP's (their own pools for the whole host: tcp_mem, udp_mem); a rank may raise a
socket's buffers to net.core.rmem_max (4 MiB here, doubled by the kernel), so 4,096 sockets could queue tens of GiB. The
judge reads the queues of every socket in the group's namespace (or, in the host's, of the sockets its processes hold
descriptors of) from /proc and fails a group past QUEUED_CAP: an honest rank queues kilobytes between its calls."""
import os

from harness.isolation import procs

QUEUED_CAP = 256 << 20
# /proc/PID/net tables: (name, the column of the queued bytes, how to read it, the column of the inode)
_INET = ("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6")   # tx_queue:rx_queue, in hex


def in_namespace(pid):
    """How many sockets the network namespace of process `pid` holds ("sockets: used" of its sockstat, which counts
    sockets with no descriptor too); None where /proc cannot say."""
    view = procs.live_view(pid)
    if view is None:
        return None
    try:
        with open(f"{view}/net/sockstat") as f:
            for line in f:
                if line.startswith("sockets:"):
                    return int(line.split()[2])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rows(view, table):
    try:
        with open(f"{view}/net/{table}") as f:
            next(f, None)
            for line in f:
                yield line.split()
    except OSError:
        return


def queued(pid, inodes=None):
    """The bytes queued (to send and received, not yet read) in the sockets of the network namespace of process `pid`
    that are not unix sockets: TCP, UDP and raw sockets' queues, netlink's and packet sockets' receive (and netlink's
    send) memory. With `inodes`, only the sockets of those inodes (a group in the host's namespace). None where no
    thread of `pid` runs (read through a live one: procs.live_view)."""
    view = procs.live_view(pid)
    if view is None:
        return None
    total = 0
    for table in _INET:
        for f in _rows(view, table):
            if len(f) > 9 and ":" in f[4] and (inodes is None or _inode(f[9]) in inodes):
                tx, rx = f[4].split(":")
                total += int(tx, 16) + int(rx, 16)
    for f in _rows(view, "netlink"):         # sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
        if len(f) > 9 and (inodes is None or _inode(f[9]) in inodes):
            total += int(f[4]) + int(f[5])
    for f in _rows(view, "packet"):          # sk RefCnt Type Proto Iface R Rmem User Inode
        if len(f) > 8 and (inodes is None or _inode(f[8]) in inodes):
            total += int(f[6])
    return total


def _inode(text):
    try:
        return int(text)
    except ValueError:
        return None


def held(pids):
    """The inodes of the sockets processes `pids` hold descriptors of."""
    out = set()
    for view in map(procs.live_view, pids):
        try:
            names = os.listdir(f"{view}/fd") if view else []
        except OSError:
            continue
        for name in names:
            try:
                link = os.readlink(f"{view}/fd/{name}")
            except OSError:
                continue
            if link.startswith("socket:["):
                out.add(int(link[8:-1]))
    return out
