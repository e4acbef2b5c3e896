"""Landlock self-confinement, through ctypes, for a process that is about to import untrusted code.

A rank process calls `lock(read=allowed_reads(extra=...), write=[scratch], devices=['/dev'])` before it imports the
solution. On platforms or kernels without Landlock, `abi()` is 0 and `lock` raises SandboxError: the caller decides
whether to run without isolation, it never happens silently.
"""
import ctypes
import os
import platform
import site
import stat
import sys
import threading

# The same numbers in x86_64's table and the generic one (aarch64); other machines are untested, so abi() says 0.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_MACHINES = ("x86_64", "amd64", "aarch64", "arm64")
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8: restrict every thread of the process at once

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # the kernel refuses others on a file
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_DEVICE = _READ_FILE | _WRITE_FILE | _READ_DIR | _TRUNCATE | _IOCTL_DEV
_SCOPE_SIGNAL = 1 << 1  # never SCOPE_ABSTRACT_UNIX_SOCKET (1 << 0): NCCL's ranks talk over abstract sockets

_SYSTEM_READS = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/opt", "/sys")
# Of /etc only what the loader, the C library, compilers (Triton builds its launcher) and locales read: not its
# secrets (shadow, the machine's keys and credentials).
_ETC_READS = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group", "nsswitch.conf",
              "hosts", "host.conf", "resolv.conf", "gai.conf", "protocols", "services", "os-release", "lsb-release",
              "debian_version", "alternatives", "ssl", "ca-certificates", "pki", "mime.types", "locale.alias",
              "locale.conf", "nvidia", "OpenCL", "vulkan", "glvnd", "fonts", "magic", "magic.mime", "machine-id")
# Not /proc as a whole: other processes' environ and cmdline hold the harness's secrets and paths.
_PROC_READS = ("cpuinfo", "meminfo", "stat", "sys", "driver", "filesystems", "version", "loadavg", "uptime")


class SandboxError(RuntimeError):
    """Landlock is unavailable, or a step of locking failed (the message names the syscall or path and errno)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _layout_ = "ms"  # Python >= 3.14 deprecates _pack_ without it; older versions ignore it
    _pack_ = 1  # the kernel's struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long  # the default c_int would truncate a long return
    return libc


def _call(libc, what, number, *args):
    ctypes.set_errno(0)
    res = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    if res < 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what} failed: errno {err} ({os.strerror(err)})")
    return res


def abi() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is unavailable (non-Linux, disabled, old kernel)."""
    if not sys.platform.startswith("linux") or platform.machine().lower() not in _MACHINES:
        return 0
    try:
        return max(0, int(_libc().syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_long(0),
                                          ctypes.c_long(_CREATE_RULESET_VERSION))))
    except (OSError, AttributeError):
        return 0


def _handled(version):
    rights = (1 << 13) - 1  # EXECUTE .. MAKE_SYM, ABI 1
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    if version >= 5:
        rights |= _IOCTL_DEV
    return rights


def _thread_count():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # /proc not mounted: Python's own threads are the best count left
        return threading.active_count()


def lock(read=(), write=(), devices=(), scope_signals=True) -> dict:
    """Restrict this process, and every thread and child it later has, for good.

    read: files or directories readable and executable, recursively (READ_FILE, READ_DIR, EXECUTE).
    write: directories fully writable (every right the ABI handles) and readable.
    devices: paths such as '/dev' readable and writable with IOCTL_DEV (ABI >= 5), for /dev/null, /dev/nvidia*...
    Everything else on the filesystem is denied; the network is not restricted. scope_signals (ABI >= 6): no
    signals to processes outside the domain; abstract unix sockets stay open (NCCL needs them).
    Rights the running ABI does not know are left out; paths that do not exist are skipped and listed.
    CUDA names its threads by writing /proc/<pid>/task/<tid>/comm and fails to start (error 304) where it cannot:
    for GPU work pass f"/proc/{os.getpid()}/task" in write, with '/dev/shm' (NCCL) and the Triton cache's folder.
    Before ABI 8 only the calling thread can be restricted, so it raises if other threads already run: lock before
    importing torch or starting threads. Calls prctl(PR_SET_NO_NEW_PRIVS) first.
    Returns {"isolation": "landlock", "abi": n, "skipped": [paths]}; raises SandboxError where Landlock is
    unavailable or a step fails."""
    version = abi()
    if version == 0:
        raise SandboxError("Landlock is unavailable (non-Linux, old kernel or disabled): no isolation")
    threads = _thread_count()
    if version < 8 and threads > 1:
        raise SandboxError(f"{threads} threads already run and Landlock ABI {version} < 8 restricts only the "
                           "calling thread: lock before starting threads (e.g. before importing torch)")
    handled = _handled(version)
    libc = _libc()
    ctypes.set_errno(0)
    if libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: errno {err} ({os.strerror(err)})")
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL if scope_signals and version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24  # older kernels reject fields they do not know
    ruleset = _call(libc, "landlock_create_ruleset", _CREATE_RULESET, ctypes.addressof(attr), size, 0)
    skipped = []
    try:
        for paths, wanted in ((read, _READ), (write, handled), (devices, _DEVICE)):
            for path in paths:
                path = os.fspath(path)
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except (FileNotFoundError, NotADirectoryError):
                    skipped.append(path)
                    continue
                except OSError as e:
                    raise SandboxError(f"open({path!r}, O_PATH) failed: errno {e.errno} ({e.strerror})") from e
                try:
                    allowed = wanted & handled
                    if not stat.S_ISDIR(os.fstat(fd).st_mode):
                        allowed &= _FILE_RIGHTS
                    rule = _PathBeneathAttr(allowed, fd)
                    _call(libc, f"landlock_add_rule({path!r})", _ADD_RULE, ruleset, _RULE_PATH_BENEATH,
                          ctypes.addressof(rule), 0)
                finally:
                    os.close(fd)
        _call(libc, "landlock_restrict_self", _RESTRICT_SELF, ruleset, _RESTRICT_SELF_TSYNC if version >= 8 else 0)
    finally:
        os.close(ruleset)
    return {"isolation": "landlock", "abi": version, "skipped": skipped}


def _in_checkout(path):
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def _contains(outer, inner):
    return os.path.commonpath([outer, inner]) == outer


def check_grants(paths, exclude, within=()):
    """Raise SandboxError where a path the judge grants a locked-down process (a solution's folder, its build
    folder) covers a directory of `exclude` or lies inside one, except inside those also in `within` (the
    repository, which holds solution folders). Each path is judged as its real path: the rule's open follows a
    link, so a folder that is a link to the data would grant the data."""
    for path in paths:
        real = os.path.realpath(path)
        for excluded in exclude:
            out = os.path.realpath(excluded)
            inside_ok = _contains(out, real) and real != out and out in [os.path.realpath(w) for w in within]
            if _contains(real, out) or (_contains(out, real) and not inside_ok):
                raise SandboxError(f"{os.fspath(path)!r} (really {real!r}) overlaps {os.fspath(excluded)!r}, which a "
                                   f"solution may not read")


def allowed_reads(extra=(), exclude=()) -> list:
    """The paths a Python process running torch reads and executes, then `extra` (kept even where missing, so that
    lock reports them): the interpreter's prefixes and site-packages, sys.path entries other than the working
    directory, its ancestors and repository checkouts (the caller passes its own files in `extra`), /usr, /lib,
    /lib64, /bin, /sbin, /etc, /opt, /sys, and of /proc only /proc/<this pid> (which /proc/self and
    /proc/thread-self resolve into) and a few system-wide files. Call it in the process that locks: the pid is its own.
    Raises SandboxError naming both paths where a returned path covers, or lies inside, a directory of `exclude`."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # a deleted working directory: nothing to leave out for it
        cwd = None
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else cwd  # '' is the working directory
        if real and not (cwd and _contains(real, cwd)) and not _in_checkout(real):
            found.append(entry)
    found += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    found += [site.getusersitepackages()] + list(_SYSTEM_READS) + [f"/etc/{name}" for name in _ETC_READS]
    found += [f"/proc/{os.getpid()}"] + [f"/proc/{name}" for name in _PROC_READS]
    paths = []
    for path in found:
        path = os.path.abspath(path)
        if path not in paths and os.path.exists(path):
            paths.append(path)
    paths += [os.path.abspath(p) for p in extra if os.path.abspath(p) not in paths]
    for path in paths:
        for excluded in exclude:
            real, out = os.path.realpath(path), os.path.realpath(excluded)
            if _contains(real, out) or _contains(out, real):
                raise SandboxError(f"read path {path!r} overlaps the excluded directory {os.fspath(excluded)!r}")
    return paths
