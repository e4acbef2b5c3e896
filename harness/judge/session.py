"""What one bench or gate run shares between its groups: its private folder (rank logs, each rank's scratch, each
group's decoy data), the judge's buffers, the isolation in force, and the judge as subreaper of every rank's
descendants."""
import glob
import os
import shutil
import signal
import sys
import tempfile
import threading

import spec
from harness.isolation import cgroup, disk, landlock, procs, users
from harness.isolation.cgroup import Cgroup
from harness.isolation.cuda_lock import CudaLock
from harness.isolation.gpu_memory import GpuMemory
from harness.judge import hardware
from harness.judge.buffers import Buffers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def excluded(isolation=True):
    """The folders a locked-down process of a solution (a rank, its build) must not read: the data and the
    repository; None where it runs unconfined (no Landlock, or isolation off)."""
    if not isolation or os.environ.get("WAN_ASSUME_NO_LANDLOCK") or not landlock.abi():
        return None
    return [os.path.realpath(spec.data_dir(spec.FULL)), ROOT]


class Session:
    def __init__(self, geometry, cpu, isolation=True):
        """isolation: lock the ranks down where the platform can (False: run them unconfined, and say so)."""
        self.geometry, self.cpu = geometry, cpu
        self.stopped = False
        if threading.current_thread() is threading.main_thread():
            # A judge told to stop (SIGTERM: a time limit's kill) ends as Ctrl-C ends it, through its callers' finally
            # blocks: its groups (killed, not asked to quit) and this folder (the ranks' scratch, owned by their
            # users) go with it.
            signal.signal(signal.SIGTERM, self._stop)
        self.folder = tempfile.mkdtemp(prefix="wan-run-")
        self.logs = os.path.join(self.folder, "logs")
        self.scratch = os.path.join(self.folder, "scratch")
        os.makedirs(self.logs, mode=0o700)
        os.makedirs(self.scratch)
        # Ranks under users of their own (harness/isolation/users.py) reach their scratch through these two: access(),
        # with which compilers choose their temporary folder (gcc aborts where it finds none), ignores capabilities.
        for folder in (self.folder, self.scratch):
            os.chmod(folder, 0o711)
        # What a rank imports of the repository, copied: the repository itself stays out of its reach.
        self.pkg = os.path.join(self.folder, "pkg")
        shutil.copytree(os.path.join(ROOT, "harness"), os.path.join(self.pkg, "harness"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("spec.py", "reference.py", "loader.py"):
            shutil.copyfile(os.path.join(ROOT, name), os.path.join(self.pkg, name))
        self.buffers = {}
        # Rank r of a group runs on GPU r: a group of `world` ranks sees the first `world` GPUs and no other.
        self.gpus = [] if cpu else hardware.cuda_uuids()
        self.minors = {} if cpu else hardware.minors()
        procs.become_subreaper()
        self.started_with = procs.descendants()
        # Between its calls a group's GPU work is held (harness/isolation/cuda_lock.py), with or without the sandbox.
        self.hold = None if cpu else CudaLock()
        if self.hold is not None:
            self.hold.start()
        self.gpumem = None if cpu else GpuMemory(self.gpus, context=hardware.cuda_context)
        self.memory_said = None          # the cap's words in the isolation line, where they are
        exclude = excluded(isolation)
        cgroup.sweep()         # what judges killed before their end left behind
        if exclude is not None:
            probe = Cgroup.make(f"wan-probe-{os.getpid()}")
            if probe is not None:
                probe.remove()
            self.isolation = f"landlock (ABI {landlock.abi()})" + (", a cgroup per group" if probe is not None else "")
            if probe is not None:
                tasks = f"at most {cgroup.MAX_TASKS} tasks" if probe.tasks_capped else "tasks not capped"
                memory = f"memory at most {disk.gib(probe.memory_cap)}" if probe.memory_cap else "memory not capped"
                self.isolation += f" ({tasks}, {memory})"
            if landlock.abi() < 6:     # signals are scoped from ABI 6: before it a rank can stop or kill the judge
                self.isolation += ", signals to the judge not refused"
            if not cpu:
                own = hardware.device_nodes(self.gpus, self.minors) is not None
                self.isolation += ", each group only its world's GPUs" + ("" if own else " (their nodes unknown)")
                self.memory_said = self.gpumem.describe()
                self.isolation += ", " + self.hold.describe() + ", " + self.memory_said
            self.users = users.Users()
            self.isolation += ", a user per group" if self.users.why_not is None else \
                f", ranks as the judge's user ({self.users.why_not})"
            self.lock = {"exclude": exclude, "write": [] if cpu else ["/dev/shm"]}
        else:
            self.users = None
            self.isolation = "none" if isolation else "none (--no-isolation)"
            self.lock = None

    def reserve_for_judge(self, fresh, max_frames, groups):
        """Measure the judge's own GPU work (fresh.Fresh.need) before any group starts, and cap each group's GPU
        memory at what is left, shared by `groups` groups alive at once; the isolation line says the cap and why."""
        if self.gpumem is None or self.gpumem.why_not is not None:
            return
        self.gpumem.reserve(fresh.need(max_frames), groups)
        if self.memory_said is not None:       # the cap as it is now, in its place
            said, self.memory_said = self.memory_said, self.gpumem.describe()
            self.isolation = self.isolation.replace(said, self.memory_said)

    def groups_at_once(self, fresh, max_frames, groups):
        """How many of `groups` solutions' groups bench keeps alive at once (GpuMemory.at_once: each may keep at
        least its FLOOR), the judge's own work measured first; all of them where GPU memory is not capped."""
        if self.gpumem is None or self.gpumem.why_not is not None:
            return groups
        self.reserve_for_judge(fresh, max_frames, groups)
        return self.gpumem.at_once(groups)

    def _stop(self, *_):
        self.stopped = True
        sys.exit(128 + signal.SIGTERM)

    def gpus_for(self, world):
        """(CUDA_VISIBLE_DEVICES, device nodes) of a group of `world` ranks on GPUs: the first `world` GPUs by UUID,
        and of /dev/nvidia* the driver's shared nodes and theirs. Every node where a GPU's minor number is unknown
        (the CUDA order still hides the others from the ranks, not from a child that rewrites its environment)."""
        mine = self.gpus[:world]
        nodes = hardware.device_nodes(mine, self.minors)
        return ",".join(mine), sorted(glob.glob("/dev/nvidia*")) if nodes is None else nodes

    def buffers_for(self, slot, world, frames):
        """The judge's buffers of solution `slot` of a wave (one set per solution: solutions interleaved call by call
        never share memory), for `world` ranks and clips up to `frames` latent frames; made once, grown when a later group
        needs more, and wiped by every group that takes them (a group must not find its predecessor's video)."""
        b = self.buffers.get(slot)
        if b is None or len(b.devices) < world or b.max_frames < frames:
            if b is not None:
                b.close()
            self.buffers[slot] = None   # free the old ones before the new ones are made
            self.buffers[slot] = Buffers(self.geometry, self.cpu, max(world, len(b.devices) if b else 0),
                                         max(frames, b.max_frames if b else 0))
        return self.buffers[slot]

    def keep_buffers(self, slots):
        """Free the buffers of slots from `slots` on (a smaller wave of bench's solutions than the last)."""
        for slot in [k for k in self.buffers if k >= slots]:
            b = self.buffers.pop(slot)
            if b is not None:
                b.close()

    def close(self):
        """The folder goes, and every process below the judge that is still alive (the judge is their subreaper)."""
        if self.hold is not None:
            self.hold.close()
        stray = procs.descendants() - self.started_with
        procs.kill(stray)
        procs.reap(stray)
        for b in self.buffers.values():
            if b is not None:
                b.close()
        disk.remove(self.folder)
