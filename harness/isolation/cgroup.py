"""A cgroup per group of ranks, where the platform lets the judge make one: every process a rank starts stays in it
(a double fork, a new session or a dead parent change nothing), so the judge freezes the whole group at once while
another solution's call runs, counts its processes, caps their number, and kills them all at the end, new forks
included. Without cgroups the judge falls back to signals and the process tree (harness/isolation/procs.py).

Where the memory controller is there too (cgroup v1's hierarchy, or cgroup2's where its parent enables it), a group's
memory is capped: what its processes hold in RAM, the files they write to memory (/dev/shm, page cache) and the
kernel's objects made for them (pipe buffers, page tables) together, one count however many processes share it.
Past the cap the kernel's out-of-memory killer ends a process of that group and no other: a group that spreads its
memory over many small processes cannot make the killer pick a larger rank of another group (every rank's
oom_score_adj is 1000, and the killer then takes the largest)."""
import os
import re
import time

V2 = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")   # a hybrid host's cgroup2 mount, or a pure cgroup2 host's
PIDS_V1 = "/sys/fs/cgroup/pids"
MEMORY_V1 = "/sys/fs/cgroup/memory"
MEMORY_SHARE = 4      # a group may hold a quarter of the host's memory: three groups at their caps leave the judge room
CAP_SLACK = 8 << 20   # a charge the cap refused may be up to a huge page: the peak then sits below the cap by as much
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
    for root in (_v2_root(), PIDS_V1, MEMORY_V1):
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


def memory_cap():
    """The bytes a group's processes may hold together: a MEMORY_SHARE-th of the host's memory (WAN_GROUP_MEMORY, in
    bytes, in the judge's environment sets it for tests)."""
    if os.environ.get("WAN_GROUP_MEMORY"):
        return int(os.environ["WAN_GROUP_MEMORY"])
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 // MEMORY_SHARE
    raise RuntimeError("/proc/meminfo has no MemTotal")


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class Cgroup:
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
        self.path = path
        # A cap on tasks (threads count) and on memory, in its cgroup2 group or in cgroup v1 groups of its own.
        pids = self._cap("pids", "pids.max", PIDS_V1, "pids.max", name, MAX_TASKS)
        self.pids, self.tasks_capped = (pids if isinstance(pids, str) else None), pids is not None
        cap = memory_cap()
        memory = self._cap("memory", "memory.max", MEMORY_V1, "memory.limit_in_bytes", name, cap)
        self.memory, self.memory_cap = (memory if isinstance(memory, str) else None), (cap if memory else None)
        # Swap counted with it, where the kernel accounts swap.
        swap = os.path.join(self.path, "memory.swap.max") if memory is True else \
            os.path.join(memory, "memory.memsw.limit_in_bytes") if memory else None
        try:
            if swap and os.path.exists(swap):
                self._write(swap, "0" if memory is True else str(cap))
        except OSError:
            pass

    def _cap(self, controller, v2_file, v1_root, v1_file, name, value):
        """Write `value` as the group's limit of `controller`: True where cgroup2 gives the group the controller (its
        parent enables it), else the path of a cgroup v1 group of its own under `v1_root`; None where neither is."""
        if controller in _read(os.path.join(os.path.dirname(self.path), "cgroup.subtree_control")).split():
            try:
                self._write(os.path.join(self.path, v2_file), str(value))
                return True
            except OSError:
                pass
        path = os.path.join(v1_root, name)
        try:
            os.mkdir(path)
        except OSError:
            return None
        try:
            self._write(os.path.join(path, v1_file), str(value))
        except OSError:
            os.rmdir(path)
            return None
        return path

    def oom(self):
        """(kills, at its cap): how many of the group's processes the out-of-memory killer ended, and whether the group
        reached its own cap (else the kills were the host's killer's or an enclosing cgroup's, at a shortage that is
        not the group's). cgroup2 counts the times the group met its limit (memory.events' `oom`); cgroup v1 does
        not, and there the group met its cap where its peak since the last look that found no kill (the judge looks at
        every count: about once a second while it waits, between calls, at every freeze) came within CAP_SLACK of
        it."""
        if self.memory:
            kills = re.search(r"^oom_kill (\d+)", _read(os.path.join(self.memory, "memory.oom_control")), re.M)
            kills = int(kills.group(1)) if kills else 0
            peak = _read(os.path.join(self.memory, "memory.max_usage_in_bytes")).strip()
            if not kills:           # the peak since the last look without a kill: an old peak judges no later kill
                try:
                    self._write(os.path.join(self.memory, "memory.max_usage_in_bytes"), "0")
                except OSError:
                    pass
            return kills, peak.isdigit() and int(peak) >= self.memory_cap - CAP_SLACK
        if self.memory_cap:
            events = dict(line.split() for line in _read(os.path.join(self.path, "memory.events")).splitlines()
                          if len(line.split()) == 2)
            return int(events.get("oom_kill", 0)), int(events.get("oom", 0)) > 0
        return 0, False

    @staticmethod
    def _write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def add(self, pid):
        self._write(os.path.join(self.path, "cgroup.procs"), str(pid))
        for v1 in (self.pids, self.memory):
            if v1:
                self._write(os.path.join(v1, "cgroup.procs"), str(pid))

    def members(self):
        """Its processes (those of the v1 groups too: a process that left the cgroup2 group stays in those)."""
        out = set()
        for path in (self.path, self.pids, self.memory):
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
        for path in (self.path, self.pids, self.memory):
            if path:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
