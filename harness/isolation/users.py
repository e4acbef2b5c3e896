"""A user of its own for every group of ranks.

What the kernel keeps per user is then the group's: the counts every process of a user shares (epoll watches,
descriptors in flight in unix sockets, pipe pages, pending signals, inotify instances, the key quota), which a rank
running as the judge's user could spend for every solution after it; what any process may do to another of its
user (its priority, I/O class, CPUs, resource limits, signals, ptrace and its /proc files), which a rank could do to
another solution's ranks or to an unrelated job of the host's; and what an owner may do to its files (modes, times,
extended attributes), which leaves a rank only its scratch and what it makes in /dev/shm (whose sticky bit keeps it
from another group's names there).

The judge (root, holding CAP_SETUID) picks for each group a uid no account and no live process has (`Users.take`)
and gives it the group's scratch; the rank takes it before it locks itself down (`become`, from
harness/isolation/seccomp.py's confine), keeping one capability: CAP_DAC_READ_SEARCH, to read every file and search
every folder (Python, torch and the solution's build may lie under folders only root may enter, such as /root; Landlock,
not file modes, says what a rank may read), as an ambient capability that its children keep. It holds fewer
capabilities than the judge and another user's, so the kernel refuses it the judge's scheduling, limits and
signals. Where the judge cannot make users (not root, a user namespace without spare uids), ranks keep the judge's
user and drop every capability, and the isolation line says so."""
import ctypes
import os
import platform
import secrets
import stat
import struct

CAP_CHOWN, CAP_DAC_READ_SEARCH, CAP_SETGID, CAP_SETUID, CAP_SETPCAP = 0, 2, 6, 7, 8
KEPT = CAP_DAC_READ_SEARCH
PR_CAPBSET_DROP, PR_SET_KEEPCAPS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 24, 8, 47, 2
EINVAL = 22
# Below this, uids belong to accounts and services (nobody is 65534); a namespace that maps no higher uid gives none.
LOWEST = 1 << 16
HIGHEST = (1 << 31) - 2      # the top of a 32-bit map, (uid_t)-1 and -2 excluded


def _capabilities():
    """This process's effective capabilities, as a bit mask (0 where /proc cannot say)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def _ranges(path):
    """[(first, end)] of the ids this namespace maps (/proc/self/uid_map or gid_map), clipped to LOWEST..HIGHEST."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                inside, _, count = map(int, line.split())
                lo, hi = max(inside, LOWEST), min(inside + count, HIGHEST)
                if hi > lo:
                    out.append((lo, hi))
    except (OSError, ValueError):
        pass
    return out


def _named(path):
    """The ids an account or group of /etc/passwd or /etc/group names."""
    ids = set()
    try:
        with open(path, errors="replace") as f:
            for line in f:
                parts = line.split(":")
                if len(parts) > 2 and parts[2].isdigit():
                    ids.add(int(parts[2]))
    except OSError:
        pass
    return ids


def _live_owners():
    """The uids and gids of every live process (the owners of /proc's numbered folders)."""
    uids, gids = set(), set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                st = os.stat(f"/proc/{name}")
            except OSError:
                continue
            uids.add(st.st_uid)
            gids.add(st.st_gid)
    return uids, gids


class Users:
    """The judge's side: one uid (and a gid of the same number) per live group."""

    def __init__(self):
        self.taken = set()
        need = (1 << CAP_SETUID) | (1 << CAP_SETGID) | (1 << CAP_CHOWN) | (1 << CAP_SETPCAP)
        self.ranges = [r for r in _ranges("/proc/self/uid_map") if r in _ranges("/proc/self/gid_map")]
        if os.environ.get("WAN_ASSUME_NO_USERS"):     # tests: the same run as a platform without users gives
            self.why_not = "users off (WAN_ASSUME_NO_USERS)"
        elif os.geteuid() != 0 or _capabilities() & need != need:
            self.why_not = "the judge cannot change users (not root, or without CAP_SETUID)"
        elif not self.ranges:
            self.why_not = f"this user namespace maps no uid from {LOWEST} on"
        else:
            self.why_not = None

    def take(self):
        """A uid for a new group (its gid the same number): in the namespace's map, no account's or group's, no live
        process's, no live group's of this judge. None where users cannot be made."""
        if self.why_not:
            return None
        used_u, used_g = _live_owners()
        used_u |= _named("/etc/passwd") | self.taken
        used_g |= _named("/etc/group")
        span = sum(hi - lo for lo, hi in self.ranges)
        for _ in range(100):
            at = secrets.randbelow(span)
            for lo, hi in self.ranges:
                if at < hi - lo:
                    uid = lo + at
                    break
                at -= hi - lo
            if uid not in used_u and uid not in used_g:
                self.taken.add(uid)
                return uid
        return None

    def give_back(self, uid):
        self.taken.discard(uid)


def owned(folder, uid):
    """The paths of the names in `folder` (not below) that `uid` owns: a group's in /dev/shm, which the judge counts
    against its disk cap and removes when it closes."""
    out = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        out.append(entry.path)
                except OSError:
                    pass
    except OSError:
        pass
    return out


def device_groups(paths):
    """The groups that open `paths` (device nodes) for reading and writing where the nodes' mode lets their group but
    not everyone: a rank's supplementary groups, so that its GPUs stay open to it under a uid of its own."""
    groups = set()
    for path in paths:
        try:
            mode, gid = os.stat(path).st_mode, os.stat(path).st_gid
        except OSError:
            continue
        if mode & (stat.S_IROTH | stat.S_IWOTH) != (stat.S_IROTH | stat.S_IWOTH) and \
                mode & (stat.S_IRGRP | stat.S_IWGRP) == (stat.S_IRGRP | stat.S_IWGRP):
            groups.add(gid)
    return sorted(groups)


def become(uid, groups=()):
    """The rank's side, while it is still root with every capability and runs one thread: drop every capability but
    CAP_DAC_READ_SEARCH from the bounding set, take uid (and gid uid, with `groups` as supplementary groups) for
    real, effective and saved ids, and keep CAP_DAC_READ_SEARCH effective, permitted, inheritable and ambient
    (the kernel clears the ambient set on the change). Raises OSError where a step is refused."""
    libc = ctypes.CDLL(None, use_errno=True)

    def prctl(what, *args):
        args = [ctypes.c_ulong(a) for a in args] + [ctypes.c_ulong(0)] * (4 - len(args))
        if libc.prctl(ctypes.c_int(what), *args) != 0:
            return ctypes.get_errno()
        return 0

    for cap in range(64):
        if cap != KEPT:
            err = prctl(PR_CAPBSET_DROP, cap)
            if err == EINVAL:                       # past the kernel's last capability
                break
            if err:
                raise OSError(err, f"dropping capability {cap} from the bounding set failed")
    if prctl(PR_SET_KEEPCAPS, 1):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS) failed")
    os.setgroups(list(groups))
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    header = struct.pack("II", 0x20080522, 0)        # _LINUX_CAPABILITY_VERSION_3, this process
    kept = 1 << KEPT
    data = struct.pack("IIIIII", kept, kept, kept, 0, 0, 0)   # effective, permitted, inheritable; the high words
    if libc.syscall(126 if platform.machine() == "x86_64" else 91, header, data) != 0:   # capset
        raise OSError(ctypes.get_errno(), "capset failed")
    err = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, KEPT)
    if err:
        raise OSError(err, "raising CAP_DAC_READ_SEARCH into the ambient set failed")
    prctl(PR_SET_KEEPCAPS, 0)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or _capabilities() != kept:
        raise OSError(EINVAL, f"the change to uid {uid} did not hold: ids {os.getresuid()}, capabilities "
                              f"{_capabilities():#x}")
