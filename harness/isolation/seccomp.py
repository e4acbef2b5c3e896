"""What Landlock's filesystem lock leaves open to a rank that runs as root: kernel state outside file contents, which
outlives the process and which a later process of the same solution could read (harness/isolation/ipc.py has the System
V part).

- Capabilities: the rank drops them all (effective, permitted, inheritable, bounding), or all but
  CAP_DAC_READ_SEARCH where it takes a user of its own (harness/isolation/users.py), so the host's global state stays
  out of reach (host and domain names, network links and addresses, `trusted.*` extended attributes, sysctls
  through syscalls, the clock's rate), and so do the judge's scheduling, priority and CPUs (it holds more).
- Other processes' resource limits, which the kernel lets any process of the same user lower (a neighbour's rank or
  the judge killed by its own limits): the seccomp filter refuses prlimit on any pid but 0 (the caller).
- Leaving the group's cgroup, which root may do without capabilities through clone3's CLONE_INTO_CGROUP (the kernel
  checks the cgroup files' modes, not Landlock): the filter makes clone3 fail with ENOSYS, as container runtimes do,
  and the C library falls back to clone, which cannot. (Writing cgroup.procs: Landlock gives /sys to read only.)
- Inode metadata and keyrings, which root may change on the files it owns without any capability: the filter's
  metadata part makes the syscalls that write extended attributes, times, modes and owners, and those of the kernel
  keyrings, fail with EPERM. Reading stays allowed.
- Leases and io_uring, at every world: a lease (fcntl F_SETLEASE, which root may take on any file it can read) makes
  every other process's open of that file wait 45 s (lease-break-time) while the rank ignores the break: the judge
  importing its plotting modules, a neighbour's ranks importing theirs, the judge's reads of /proc; the filter refuses
  leases and dnotify (F_NOTIFY, the old form of file watches) with EPERM. io_uring's operations (setting extended
  attributes among them) reach the kernel without a syscall of their own, past the filter: io_uring_setup, _enter
  and _register fail with ENOSYS (torch, NCCL and Python use none of them).
- Inode flags and generations, at every world: ioctls (FS_IOC_SETFLAGS, _SETVERSION, _FSSETXATTR) and file_setattr
  write on-disk state of any file root owns that outlives the run, and the noatime flag (or an O_NOATIME open)
  would read the decoys without moving their access times: refused with EPERM, openat2 (whose flags the filter
  cannot read) with ENOSYS.
- Counts the kernel keeps per user, at every world: under a user of its own (harness/isolation/users.py) they are its
  group's; a rank that runs as root (where the judge cannot make users) holds what every root process of the host
  shares, a neighbour's ranks and whatever runs beside the judge. Pipe buffers past the default (F_SETPIPE_SZ; past
  the per-user soft limit other capless processes get 2-page pipes) and POSIX message queues (mq_open,
  RLIMIT_MSGQUEUE's bytes) are refused with EPERM either way; epoll watches, which gloo and NCCL use, descriptors in
  flight, ordinary pipes and pending signals are bounded only by the user's own count. Counts kept for the whole
  host, every user's: Linux AIO contexts (io_setup, fs.aio-max-nr) are refused with EPERM; open files and sockets
  are the judge's to count (harness/isolation/disk.py's HELD_CAP and SOCKETS_CAP), and the bytes queued in sockets
  (harness/isolation/sockets.py), which reads no MPTCP socket's: MPTCP sockets (socket()'s protocol 262) are refused
  with EPERM.
- User namespaces, at every world: inside one a rank is root again (network namespaces by the thousand, each held
  against the host's limit): unshare and clone with CLONE_NEWUSER fail with EPERM.
- Watches: Landlock does not cover inotify, with which a rank could watch the data folder, the repository and the
  run's folders for the judge's opens and reads (which of its calls are on stored latents, when the judge reads a
  neighbour's log): the metadata part also refuses inotify and fanotify.

x86_64 and aarch64 (their syscall numbers below); elsewhere the filter is not installed and says so."""
import ctypes
import os
import platform
import struct

_libc = ctypes.CDLL(None, use_errno=True)

# The syscalls that write inode metadata, use kernel keyrings or watch files, per architecture (Linux's unistd
# tables).
DENIED = {
    "x86_64": {"setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
               "fremovexattr": 199, "setxattrat": 463, "removexattrat": 466,
               "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
               "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
               "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
               "add_key": 248, "request_key": 249, "keyctl": 250,
               "inotify_init": 253, "inotify_add_watch": 254, "inotify_init1": 294, "fanotify_init": 300,
               "fanotify_mark": 301},
    "aarch64": {"setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
                "fremovexattr": 16, "setxattrat": 463, "removexattrat": 466,
                "utimensat": 88, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "fchownat": 54, "fchown": 55,
                "add_key": 217, "request_key": 218, "keyctl": 219,
                "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263},
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
PRLIMIT64 = {"x86_64": 302, "aarch64": 261}
FCNTL = {"x86_64": 72, "aarch64": 25}
F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ = 1024, 1026, 1031
MQ_OPEN = {"x86_64": 240, "aarch64": 180}
IO_SETUP = {"x86_64": 206, "aarch64": 0}     # Linux AIO: fs.aio-max-nr is one count for the whole host
SOCKET = {"x86_64": 41, "aarch64": 198}
IPPROTO_MPTCP = 262     # its queues are in no /proc/net table the judge reads (harness/isolation/sockets.py)
IO_URING = (425, 426, 427)   # io_uring_setup, _enter, _register: the same on x86_64 and aarch64
OPENAT2, FILE_SETATTR = 437, 469   # the same on both; openat2's flags lie in memory the filter cannot read
# name_to_handle_at, open_by_handle_at: a file opened by its handle, not its path (CAP_DAC_READ_SEARCH, which a rank
# under a user of its own keeps, harness/isolation/users.py); Landlock checks such opens too, refused all the same.
BY_HANDLE = {"x86_64": (303, 304), "aarch64": (264, 265)}
IOCTL = {"x86_64": 16, "aarch64": 29}
OPENAT = {"x86_64": 257, "aarch64": 56}
OPEN = {"x86_64": 2}                 # aarch64 has openat only
UNSHARE = {"x86_64": 272, "aarch64": 97}
CLONE = {"x86_64": 56, "aarch64": 220}
F_SETFL, O_NOATIME, CLONE_NEWUSER = 4, 0o1000000, 0x10000000
# A thread with a file table of its own (unshare(CLONE_FILES), or clone with CLONE_THREAD and not CLONE_FILES): its
# descriptors are in no view of /proc the judge's counts read for its process (/proc/PID/fd is another thread's).
CLONE_FILES, CLONE_THREAD = 0x400, 0x10000
# ioctls that write an inode's flags (noatime, nodump...), generation number, fsxattr, encryption policy or verity:
# on-disk state of files the rank owns (root's), which outlives the run (a policy makes an empty folder refuse
# writes; verity makes a file read-only for good), and noatime disarms the decoys' access times. 32-bit forms too.
INODE_IOCTLS = (0x40086602, 0x40046602, 0x40087602, 0x40047602, 0x40086604, 0x401C5820, 0x800C6613, 0x40016613,
                0x40806685)

PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 24, 38, 22
CLONE3 = 435          # the same on x86_64 and aarch64
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
EPERM, EINVAL, ENOSYS = 1, 22, 38
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_JSET_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
X32_BIT = 0x40000000   # x86_64's x32 calls: the same numbers with this bit, refused whole


def drop_capabilities():
    """Drop every capability of this process (bounding set first, while CAP_SETPCAP is still held). Then the kernel
    also refuses it the scheduling of a process that holds more (the judge): it may change another's only where that
    one's capabilities are a subset of its own."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == EINVAL:          # past the kernel's last capability
                break
            raise OSError(ctypes.get_errno(), f"dropping capability {cap} from the bounding set failed")
    header = struct.pack("II", 0x20080522, 0)        # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)                                  # two (effective, permitted, inheritable) sets, all empty
    if _libc.syscall(126 if platform.machine() == "x86_64" else 91, header, data) != 0:   # capset
        raise OSError(ctypes.get_errno(), "capset failed")


def _assemble(program):
    """Classic BPF from (code, jt, jf, k) tuples whose jt/jf may name a label; a bare string marks a label."""
    labels, ins = {}, []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(ins)
        else:
            ins.append(item)
    out = []
    for i, (code, jt, jf, k) in enumerate(ins):
        jt, jf = (labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        out.append(struct.pack("HBBI", code, jt, jf, k))
    return b"".join(out), len(ins)


def _filter(arch, metadata=True):
    """The BPF program: kill on another architecture; EPERM for DENIED[arch] (and any x32 call) where `metadata`;
    always: EPERM for prlimit64 on any process but this one (pid 0), fcntl's F_SETLEASE, F_NOTIFY and F_SETPIPE_SZ,
    mq_open, io_setup, MPTCP sockets, a thread with a file table of its own (unshare CLONE_FILES, clone with
    CLONE_THREAD without CLONE_FILES), O_NOATIME (open, openat, F_SETFL), the inode ioctls, file_setattr, and CLONE_NEWUSER (unshare, clone);
    ENOSYS for clone3 (its CLONE_INTO_CGROUP would move a child out of the group's cgroup; the C library then falls
    back to clone), openat2 and io_uring (their flags or operations out of the filter's sight), opens by file handle;
    allow the rest."""
    numbers = sorted(set(DENIED[arch].values())) if metadata else []
    pid_or_fd, second, third = 16, 24, 32               # seccomp_data.args[0], [1] and [2], their low words
    program = [(_BPF_LD_W_ABS, 0, 0, 4),               # seccomp_data.arch
               (_BPF_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
               (_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
               (_BPF_LD_W_ABS, 0, 0, 0),               # seccomp_data.nr
               (_BPF_JGE_K, "eperm", 0, X32_BIT)]
    program += [(_BPF_JEQ_K, "eperm", 0, nr) for nr in numbers]
    program += [(_BPF_JEQ_K, "enosys", 0, nr) for nr in (CLONE3, OPENAT2, *IO_URING, *BY_HANDLE[arch])]
    program += [(_BPF_JEQ_K, "eperm", 0, FILE_SETATTR),
                (_BPF_JEQ_K, "eperm", 0, MQ_OPEN[arch]),
                (_BPF_JEQ_K, "eperm", 0, IO_SETUP[arch]),
                (_BPF_JEQ_K, "prlimit", 0, PRLIMIT64[arch]),
                (_BPF_JEQ_K, "fcntl", 0, FCNTL[arch]),
                (_BPF_JEQ_K, "ioctl", 0, IOCTL[arch]),
                (_BPF_JEQ_K, "openat", 0, OPENAT[arch]),
                (_BPF_JEQ_K, "open", 0, OPEN.get(arch, OPENAT[arch])),
                (_BPF_JEQ_K, "socket", 0, SOCKET[arch]),
                (_BPF_JEQ_K, "unshare", 0, UNSHARE[arch]),
                (_BPF_JEQ_K, "clone", "allow", CLONE[arch]),
                "prlimit", (_BPF_LD_W_ABS, 0, 0, pid_or_fd),
                (_BPF_JEQ_K, "allow", "eperm", 0),      # its own (0) only
                "fcntl", (_BPF_LD_W_ABS, 0, 0, second),
                (_BPF_JEQ_K, "eperm", 0, F_SETLEASE),
                (_BPF_JEQ_K, "eperm", 0, F_NOTIFY),
                (_BPF_JEQ_K, "eperm", 0, F_SETPIPE_SZ),
                (_BPF_JEQ_K, 0, "allow", F_SETFL),
                (_BPF_LD_W_ABS, 0, 0, third),           # F_SETFL's flags: no O_NOATIME (the decoys' access times)
                (_BPF_JSET_K, "eperm", "allow", O_NOATIME),
                "ioctl", (_BPF_LD_W_ABS, 0, 0, second),
                *[(_BPF_JEQ_K, "eperm", 0, cmd) for cmd in INODE_IOCTLS],
                (_BPF_JEQ_K, "allow", "allow", 0),     # any other ioctl
                "openat", (_BPF_LD_W_ABS, 0, 0, third),
                (_BPF_JSET_K, "eperm", "allow", O_NOATIME),
                "open", (_BPF_LD_W_ABS, 0, 0, second),
                (_BPF_JSET_K, "eperm", "allow", O_NOATIME),
                "socket", (_BPF_LD_W_ABS, 0, 0, third),          # the protocol: no MPTCP
                (_BPF_JEQ_K, "eperm", "allow", IPPROTO_MPTCP),
                "unshare", (_BPF_LD_W_ABS, 0, 0, pid_or_fd),     # the flags: no user namespace, no own file table
                (_BPF_JSET_K, "eperm", 0, CLONE_NEWUSER),
                (_BPF_JSET_K, "eperm", "allow", CLONE_FILES),
                "clone", (_BPF_LD_W_ABS, 0, 0, pid_or_fd),       # the flags (x86_64 and aarch64): the same
                (_BPF_JSET_K, "eperm", 0, CLONE_NEWUSER),
                (_BPF_JSET_K, 0, "allow", CLONE_THREAD),         # a new process has a table of its own: allowed
                (_BPF_JSET_K, "allow", "eperm", CLONE_FILES),
                "allow", (_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
                "enosys", (_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS),
                "eperm", (_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM)]
    return _assemble(program)


def deny(metadata=True):
    """Install the seccomp filter on this thread (and what it starts later): no process's resource limits but its
    own (a neighbour's or the judge's, which the kernel lets any process of the same user lower), no leases, no
    io_uring or Linux AIO, no inode flags, O_NOATIME, user namespaces, larger pipes or message queues, and with
    `metadata` no writes of inode metadata, no keyrings and no file watches. Returns the architecture, or None where
    it has no table here."""
    arch = platform.machine()
    if arch not in DENIED:
        return None
    code, n = _filter(arch, metadata)
    buf = ctypes.create_string_buffer(code)
    prog = struct.pack("HxxxxxxQ", n, ctypes.addressof(buf))           # struct sock_fprog
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
    return arch


def confine(net=None, whole=True, user=None):
    """Everything a process of the solution's (a rank, the build child) gives up before its Landlock lock, in the
    order the kernel needs (namespaces while root may still enter them, then the capabilities, then the filter).
    net: a descriptor of the namespace to enter (a group's, harness/isolation/netns.py), "new" (one of its own, loopback
    down: nothing to reach; the host's where the kernel refuses one, as for a group) or None (the host's). whole:
    also an IPC namespace of its own and the filter's metadata part. user: (uid, supplementary groups) to take,
    keeping CAP_DAC_READ_SEARCH alone (harness/isolation/users.py); None: the judge's user, every capability dropped.
    Returns what was done, for the isolation report; raises OSError where the kernel refuses the rest."""
    from harness.isolation import ipc, netns
    info = {}
    if net == "new":
        info["net_namespace"] = _libc.unshare(netns.CLONE_NEWNET) == 0
    elif net is not None:
        netns.enter(net)
        os.close(net)
        info["net_namespace"] = True
    if whole:
        info["ipc_namespace"] = ipc.private_namespace()
    if user is None:
        drop_capabilities()
    else:
        from harness.isolation import users
        users.become(*user)
        info["uid"] = user[0]
    info["seccomp"] = deny(metadata=whole)
    return info
