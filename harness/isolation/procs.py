"""The judge's view of the processes a solution starts: every descendant of the judge, found through /proc, and
the judge as their subreaper, so that a process a rank detaches (double fork, new session) still ends up a
descendant of the judge, where it can be seen and killed."""
import ctypes
import os
import secrets
import signal

PR_SET_CHILD_SUBREAPER = 36
JUDGE_KEY = "WAN_JUDGE_MARK"


def mark_judge():
    """A secret in this process's environment, which its own children inherit (the data maker's workers,
    multiprocessing's resource tracker) and no rank sees (a rank's environment is made afresh, and Landlock keeps it
    from other processes' /proc entries): the judge's helpers, never taken for a solution's. Returns the mark."""
    return os.environ.setdefault(JUDGE_KEY, secrets.token_hex(16))


def become_subreaper():
    """Orphans of the ranks are re-parented to this process instead of init (Linux); False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents():
    out = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the fields after its last ')' are fixed.
        fields = stat[stat.rindex(b")") + 2:].split()
        # A zombie is dead already, unless only its first thread ended (the raw `exit` call) and others run on.
        if fields[0] != b"Z" or len(threads(name)) > 1:
            out[int(name)] = int(fields[1])
    return out


CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()   # the judge's, at its start


def unslow(pids):
    """Every thread of `pids` back at normal priority, in the normal scheduling class, on every CPU the judge started
    with: a rank may lower the priority, set the idle class or narrow the CPUs of any thread of its user (a
    neighbour's, the judge's), which no sandbox here forbids; all three are per thread."""
    for pid in pids:
        for tid in threads(pid):
            for reset in (lambda: os.setpriority(os.PRIO_PROCESS, tid, 0),
                          lambda: os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0)),
                          lambda: os.sched_setaffinity(tid, CPUS)):
                try:
                    reset()
                except (OSError, AttributeError):
                    pass


def state(path):
    """The state letter of the task whose /proc folder is `path` (R, S, T, Z, ...), or None where it is gone. The
    command name before it may hold spaces and parentheses: the fields after its last ')' are fixed."""
    try:
        with open(f"{path}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def live_view(pid):
    """/proc's folder of a live thread of process `pid` (its first thread's, /proc/PID, while that one runs), or None
    where none runs. A process whose first thread ended while others run on is alive, but /proc/PID then shows
    no descriptors, mappings or network (the ended thread's): the judge reads what it holds through a live one."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in sorted(tids, key=lambda t: t != str(pid)):
        if state(f"/proc/{pid}/task/{tid}") not in (None, "Z", "X", "x"):
            return f"/proc/{pid}" if tid == str(pid) else f"/proc/{pid}/task/{tid}"
    return None


def threads(pid):
    """The thread ids of process `pid` (none where it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def oom_first(pid):
    """The kernel's out-of-memory killer takes this process (a rank) before the judge or anything else: a
    solution that exhausts memory dies, not the harness. A process may raise its score, never lower it unprivileged;
    a rank that keeps its capabilities (on GPUs) could, and then competes with the rest of the machine."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def descendants(root=None):
    """Live pids below `root` (default: this process)."""
    root = os.getpid() if root is None else root
    parents = _parents()
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def marked(pid, key, value):
    """Whether process `pid`'s environment holds key=value (how an orphan re-parented to the judge is traced back
    to the group it came from: each group's ranks have their own MASTER_PORT)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{key}={value}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def environ_has(pid, key):
    """Whether process `pid`'s environment sets `key` at all."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return any(kv.startswith(f"{key}=".encode()) for kv in f.read().split(b"\0"))
    except OSError:
        return False


def descendants_of(pids):
    """Live pids below any of `pids`."""
    out = set()
    for pid in pids:
        out |= descendants(pid)
    return out


def kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def reap(pids):
    """Collect those of `pids` that are this process's exited children (orphans re-parented here), so they do not
    linger as zombies; never waits on a child that is not in the list (a Popen's exit code would be lost)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
