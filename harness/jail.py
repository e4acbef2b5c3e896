"""A cgroup per group of ranks, where the platform lets the judge make one: every process a rank starts stays in it
(a double fork, a new session or a dead parent change nothing), so the judge freezes the whole group at once while
another solution's call runs, counts its processes, caps their number, and kills them all at the end, new forks
included. Without cgroups the judge falls back to signals and the process tree (harness/procs.py)."""
import os
import re
import time

V2 = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")   # a hybrid host's cgroup2 mount, or a pure cgroup2 host's
PIDS_V1 = "/sys/fs/cgroup/pids"
FREEZE_S = 2.0        # every task of a group frozen within this, or the group's next call fails
MAX_TASKS = 8192      # threads count too: a rank of torch with NCCL runs a few hundred
OWNED = re.compile(r"wan-(?:build-|probe-)?(\d+)(?:-|$)")    # the judge's pid in the names it gives (make())


def _v2_root():
    """The cgroup2 mount, where there is one (its directories have cgroup.controllers; cgroup v1's have not)."""
    for root in V2:
        if os.path.exists(os.path.join(root, "cgroup.controllers")):
            return root
    return None


def sweep():
    """Remove the empty cgroups of judges that are gone (killed before they could remove their own); returns their
    names. A live judge's, and any that still holds a process, stay."""
    removed = []
    for root in (_v2_root(), PIDS_V1):
        try:
            names = os.listdir(root) if root else []
        except OSError:
            continue
        for name in names:
            m = OWNED.match(name)
            if m is None or _alive(int(m.group(1))):
                continue
            try:
                os.rmdir(os.path.join(root, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Jail:
    """make() returns one, or None where no cgroup can be made here."""

    @classmethod
    def make(cls, name):
        root = _v2_root()
        if root is None:
            return None
        try:
            path = os.path.join(root, name)
            os.mkdir(path)
        except OSError:
            return None
        if not os.path.exists(os.path.join(path, "cgroup.kill")) or \
                not os.path.exists(os.path.join(path, "cgroup.freeze")):
            os.rmdir(path)
            return None
        return cls(path, name)

    def __init__(self, path, name):
        self.path, self.pids = path, None
        try:   # a cap on tasks where the pids controller is there (cgroup v1 here; v2 hosts name it in subtree_control)
            self.pids = os.path.join(PIDS_V1, name)
            os.mkdir(self.pids)
            self._write(os.path.join(self.pids, "pids.max"), str(MAX_TASKS))
        except OSError:
            self.pids = None

    @staticmethod
    def _write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def add(self, pid):
        self._write(os.path.join(self.path, "cgroup.procs"), str(pid))
        if self.pids:
            self._write(os.path.join(self.pids, "cgroup.procs"), str(pid))

    def members(self):
        """Its processes (those of the pids cgroup too: a process that left the cgroup2 group stays in that one)."""
        out = set()
        for path in (self.path, self.pids):
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    out |= {int(p) for p in f.read().split()}
            except (OSError, TypeError):
                pass
        return out

    def freeze(self, on=True, limit=FREEZE_S):
        """Freeze (or thaw) the whole cgroup. Freezing waits until the kernel reports every task frozen: a task stops
        only on its way back to user space, so one inside a long system call (a read-only MAP_POPULATE of many GiB)
        works on. False when that took longer than `limit` seconds."""
        self._write(os.path.join(self.path, "cgroup.freeze"), "1" if on else "0")
        deadline = time.monotonic() + limit
        while on:
            try:
                with open(os.path.join(self.path, "cgroup.events")) as f:
                    if "frozen 1" in f.read():
                        return True
            except OSError:
                return True           # cgroup v1's pids hierarchy, or gone: nothing to wait for
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
        return True

    def kill(self):
        """Every process in it, forks made meanwhile too (they stay until their parent reaps them: remove())."""
        try:
            self._write(os.path.join(self.path, "cgroup.kill"), "1")
        except OSError:
            pass

    def remove(self):
        """The cgroup goes once its processes have (waits a few seconds at most)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = self.members()
            if not left:
                break
            for pid in left:          # killed orphans are the judge's children now: reap them
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            time.sleep(0.01)
        for path in (self.path, self.pids):
            if path:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
