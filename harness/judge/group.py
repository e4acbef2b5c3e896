"""The judge's side of one solution at one world size: the rank processes, the protocol, and the clock.

A call, as the judge runs it (`Group.call`):
  1. Before the clock: the pipes are quiet (a line between calls is tampering), the latents are staged on every
     rank's device, `out` is poisoned with NaN, the judge lists its descendant processes.
  2. The clock (the judge's CLOCK_MONOTONIC_RAW) starts; the judge copies the latents into every rank's buffer and
     writes `go` to every rank.
  3. It stops when the judge has read and checked the last rank's `done` (its call and the call's nonce, nothing
     else). Each rank sends exactly `done CALL` then `report CALL`; a duplicate, early, stale, unknown or malformed
     line is tampering.
  4. The judge copies `out` at once (read 1), waits for the reports, checks the inputs, the processes and the decoy
     data, then the caller computes the figures from read 1; `out` read again afterwards (read 2) must be bit-equal
     to read 1, else a rank said `done` before its work was finished ("out changed after done").
"""
import contextlib
import os
import pickle
import resource
import secrets
import signal
import struct
import subprocess
import sys
import tempfile
import time

from harness.isolation import disk, ipc, netns, procs, users
from harness.isolation.caps import Caps
from harness.isolation.cgroup import FREEZE_S, Cgroup
from harness.judge import protocol, rank_env
from harness.judge.pipes import CLOCK, REPORT_S, STARTUP_S, Pipes
from harness.judge.protocol import GroupFailed  # noqa: F401 (GroupFailed: the callers')
from harness.load.solution import build_dir
from harness.report.console import plain

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _free_port():
    """(MASTER_ADDR, port) for a new group; GroupFailed, never OSError, when the loopback has none."""
    found = rank_env.free_port(Group.ports)
    if found is None:
        why = "; an earlier solution's ranks may have exhausted them" if Group.spawned else ""
        raise GroupFailed("harness error", f"no free TCP port on 127.0.0.1 or {rank_env.OTHER_ADDRESSES} other "
                                           f"loopback addresses{why}")
    return found


def _failed(failed, when=""):     # the hold's (rank index, reason), if any
    if failed:
        raise GroupFailed("tampering", f"rank {failed[0]}{when}: {failed[1]}", failed[0])


def _orphans():
    """Live processes below the judge that no live group's rank started, but the judge's own helpers, which carry its
    mark (harness/isolation/cuda_lock.py's; the data maker's workers)."""
    judge = procs.mark_judge()
    return {pid for pid in procs.descendants() - Group.ranks - procs.descendants_of(Group.ranks)
            if not procs.marked(pid, procs.JUDGE_KEY, judge)}


class Group(Pipes, Caps):
    """The rank processes of one solution at one world size, judged from this process."""
    ranks = set()      # the pids of every live group's ranks
    ports = set()      # their MASTER_PORTs, which tell their orphans apart
    spawned = 0        # ranks started by this process so far

    def __init__(self, solution, world, geometry, cpu, buffers, run, frames, sandbox, profiling=False):
        """solution: a loader.Solution (described, built); run: the run's folder (harness.judge.session.Session);
        frames: the clip lengths the group will see; sandbox: the lock's settings for a rank, or None for no isolation;
        profiling: a call may be profiled (the ranks start the profiler once before their snapshot of torch).
        Raises GroupFailed, after closing what it started, where the ranks do not all come up."""
        self.world, self.cpu, self.buffers, self.run, self.profiling = world, cpu, buffers, run, profiling
        self.procs, self.logs, self.fds, self.cmds, self.bufs, self.scratch = [], [], [], [], {}, []
        self.calls, self._arrived, self._limit, self._watch = 0, CLOCK(), STARTUP_S, disk.Watch()
        self.jail, self.shm, self.sysv, self.net, self.unfrozen = None, None, ipc.snapshot(), None, None
        self.uid, self._counted_at = None, 0.0
        earlier = Group.spawned     # ranks were alive before this group's: they may have spent the ports
        addr, self.port = _free_port()
        Group.ports.add(self.port)
        try:
            self._start(solution, geometry, frames, sandbox, profiling, addr)
            self.info = [protocol.ready(r, fields) for r, fields, _ in self._each("ready", None, STARTUP_S)]
            self._disk(now=True)     # what prepare left on the disk and holds of the host's pools
            # The rank's census passed views of these as they came: they must still be so.
            self.buffers.settle()
            changed = [r for r in range(self.world) if self.buffers.weights_modified(r)]
            if changed:
                raise GroupFailed("input modified", f"rank {changed[0]}: the weights were modified by prepare",
                                  changed[0])
            self._park("after prepare")
        except GroupFailed as e:
            self.close(graceful=False)
            if e.status in ("harness error", "runtime error") and earlier and "address" in e.message.lower():
                e.message += "; an earlier solution's ranks may have exhausted the loopback's ports"
            raise
        except Exception as e:
            self.close(graceful=False)
            raise GroupFailed("harness error", f"starting the ranks: {type(e).__name__}: {e}") from e
        except BaseException:
            self.close(graceful=False)
            raise

    def _start(self, solution, geometry, frames, sandbox, profiling, addr):
        """The ranks' processes, each given its setup; a cgroup for them where there is one."""
        from harness.isolation.landlock import SandboxError, check_grants
        from harness.judge.decoys import Decoys
        world, cpu, run = self.world, self.cpu, self.run
        build = build_dir(solution)
        if sandbox is not None:
            try:
                check_grants([solution.path, build], sandbox["exclude"], within=[ROOT])
            except SandboxError as e:
                raise GroupFailed("load error", str(e)) from e
        self.jail = Cgroup.make(f"wan-{os.getpid()}-{self.port}") if sandbox is not None else None
        # Decoys of its own: another group's ranks, alive between this group's calls, cannot be blamed on it.
        self.decoys = Decoys(tempfile.mkdtemp(prefix="data-", dir=run.folder), geometry)
        self.buffers.wipe()
        blobs = [self.buffers.lend(r) for r in range(world)]
        # Where ranks may write to /dev/shm (NCCL on GPUs), what they leave there goes with the group.
        shared = sandbox is not None and "/dev/shm" in sandbox.get("write", [])
        self.shm = set(os.listdir("/dev/shm")) if shared else None
        visible, nodes = (None, []) if cpu else run.gpus_for(world)
        # Its own network namespace where the whole lock applies (harness/isolation/netns.py); None: the host's.
        self.net = netns.make() if sandbox is not None and (cpu or world == 1) else None
        # A user of its own (harness/isolation/users.py): what the kernel counts per user is then the group's.
        made = getattr(run, "users", None) if sandbox is not None else None
        self.uid = made.take() if made is not None else None
        user = None if self.uid is None else (self.uid, users.device_groups(list(DEVICES) + nodes))
        for r in range(world):
            scratch = tempfile.mkdtemp(prefix=f"rank{r}-", dir=run.scratch)
            self.scratch.append(scratch)
            if self.uid is not None:
                os.chown(scratch, self.uid, self.uid)
            cmd_r, cmd_w = os.pipe()
            res_r, res_w = os.pipe()
            os.set_blocking(cmd_w, False)      # the judge's writes have a deadline (_tell)
            self.cmds.append(cmd_w)
            self.fds.append(res_r)
            self.bufs[res_r] = bytearray()
            log = open(os.path.join(run.logs, f"{solution.name}-x{world}-rank{r}-{len(os.listdir(run.logs))}.log"),
                       "w")
            self.logs.append(log)
            environ = rank_env.rank_env(r, world, self.port, scratch, cpu, self.decoys.folder, os.path.dirname(build),
                                   run.pkg, addr, gpus=visible, own_network=self.net is not None)
            lock = None
            if sandbox is not None:
                lock = {"extra": [run.pkg, os.path.abspath(solution.path), build, self.decoys.folder,
                                  *rank_env.import_paths()],
                        "exclude": sandbox["exclude"],
                        "write": [scratch] + ([] if cpu else sandbox["write"]),
                        "devices": list(DEVICES) + nodes}
            setup = {"rank": r, "world": world, "geometry": geometry.name, "device": "cpu" if cpu else "cuda",
                     "solution": os.path.abspath(solution.path), "buffers": blobs[r], "frames": sorted(frames),
                     "sandbox": lock, "scratch": scratch, "trace": self.trace(r), "profiling": profiling,
                     "netns_fd": self.net, "user": user}
            # the run's folder on the command line only names the run in `ps` (a rank ignores it)
            try:
                inherited = (cmd_r, res_w) + ((self.net,) if self.net else ()) + self.buffers.lent_fds(r)
                p = subprocess.Popen([sys.executable, "-m", "harness.rank", str(cmd_r), str(res_w), run.folder],
                                     env=environ, pass_fds=inherited, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=scratch)
            finally:
                os.close(cmd_r)
                os.close(res_w)
            self.procs.append(p)
            Group.ranks.add(p.pid)
            Group.spawned += 1
            try:    # before any code of the solution runs; inherited by whatever it starts
                resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (disk.FILE_CAP, disk.FILE_CAP))
            except OSError:
                pass
            procs.oom_first(p.pid)
            if self.jail is not None:   # before the rank reads its setup, so before any code of the solution runs
                try:
                    self.jail.add(p.pid)
                except OSError:
                    self.jail.remove()
                    self.jail = None
            blob = pickle.dumps(setup)
            self._tell(r, struct.pack("<Q", len(blob)) + blob, STARTUP_S)

    def trace(self, rank):
        """Where rank `rank`'s profiler trace must be: the judge's choice, never the rank's word."""
        return os.path.join(self.scratch[rank], disk.TRACE_NAME)

    def quiet(self):
        """After a call's figures: no rank wrote more (a second `done` or `report`); the group is then parked."""
        self._quiet("after its done and report")
        self._park("after its call")

    def _park(self, when):
        """Between its calls nothing of the group runs: its CUDA held (the hold needs the ranks running, so first),
        what it keeps of the GPUs counted, then every process frozen until its next call, while the judge decodes
        references, starts other groups or runs their calls. A process beside the ranks then (started after the
        call's own check, or in prepare) is the solution's: killed, and the group fails (it would run unheld and
        unfrozen beside the others, its GPU work too)."""
        self._hold(when)
        self.freeze()
        if self.unfrozen:
            raise GroupFailed("tampering", self.unfrozen)
        # Without a cgroup, every orphan below the judge but its own helpers: each park kills what it finds and only
        # this group ran since the last one, so any orphan is this group's, whatever its environment says.
        stray = self._mine() if self.jail is not None else \
            procs.descendants_of({p.pid for p in self.procs}) | _orphans()
        if stray:
            procs.kill(stray)
            procs.reap(stray)
            raise GroupFailed("tampering", f"processes left running {when}: {sorted(stray)}")

    def _hold(self, when):
        """Lock the ranks' CUDA until the next call (harness/isolation/cuda_lock.py; not where the profiler may run:
        CUPTI), then count what the group keeps of the GPUs' memory, which it cannot grow until it is let go."""
        hold = None if self.profiling else getattr(self.run, "hold", None)
        _failed(hold and hold.hold([p.pid for p in self.procs]), f" {when}")
        self._gpu_memory(when)

    def _release(self):
        hold = getattr(self.run, "hold", None)     # it unlocks only the pids it holds
        _failed(hold and hold.release([p.pid for p in self.procs]))

    # -- a call
    def call(self, z, timeout, profile=False):
        """Run one call on latents `z` (CPU bf16 [1, C, T, h, w]); returns (seconds, read 1 of out, reports,
        problems found by the judge). The caller checks read 1 and then calls `settled(read1)`."""
        self.calls += 1
        call, t = self.calls, z.shape[2]
        n = z.numel()
        if self.unfrozen:
            raise GroupFailed("tampering", self.unfrozen)
        self.freeze(False)      # parked since its last call (_park)
        self._quiet()
        self.buffers.drop_cache()       # while the ranks' CUDA is still held
        # Lent weights changed while the group waited, held and frozen, are another process's doing (another
        # group's rank can open them with a forged IPC handle, harness/judge/buffers.py): put back, not blamed on it.
        for r in range(self.world):
            self.buffers.weights_modified(r)
        self._release()
        self.buffers.stage(z)
        out = self._out = self.buffers.out_view(t)
        self.buffers.poison(out.numel())
        early = self.decoys.read()          # read in prepare or between calls
        self.decoys.arm()
        before = self._mine()
        procs.unslow([os.getpid()] + [p.pid for p in self.procs])
        verb = "profile" if profile else "go"
        for r in range(self.world) if profile else ():
            with contextlib.suppress(OSError):
                os.unlink(self.trace(r))      # a trace there must be this call's
        nonce = secrets.token_hex(8)      # a `done` must echo it: none can be written before `go`
        t0 = CLOCK()
        self.buffers.place(n)
        for r in range(self.world):
            self._tell(r, f"{verb} {call} {t} {nonce}\n".encode())
        arrivals = self._each("done", call, timeout)
        for r, fields, _ in arrivals:
            protocol.done(r, fields, nonce)
        # The clock stops when every `done` is read and checked, just before read 1: reading the lines is the ranks'
        # time, and no work of theirs can finish between the stop and read 1 but during the copy itself.
        t1 = CLOCK()
        read1 = out.clone()
        self.buffers.settle()
        # A report holds a rank's own checks (under a millisecond) and, profiled, its trace's export; a late one is
        # untimed work of the rank's while the judge and every frozen group wait for it.
        reports = [protocol.report(r, fields)
                   for r, fields, _ in self._each("report", call, STARTUP_S if profile else REPORT_S)]
        problems = []
        for r in range(self.world):
            changed = self.buffers.modified(r, n)
            if changed:
                problems.append(("input modified", f"rank {r}: {' and '.join(changed)} "
                                                   f"{'were' if changed[-1] == 'the weights' else 'was'} modified"))
        # With a cgroup every helper is seen, those started in prepare too: none may be alive after a call.
        new = self._mine() if self.jail is not None else self._mine() - before
        if new:
            problems.append(("tampering", f"processes left running after the call: {sorted(new)}"))
            procs.kill(new)
        read = early + self.decoys.read()
        self.decoys.arm()
        if read:
            problems.append(("tampering", f"a rank read the decoy references {read}"))
        for rep in reports:
            problems += [tuple(p) for p in rep.get("problems") or []]
        return (t1 - t0) / 1e9, read1, reports, problems, [(at - t0) / 1e9 for _, _, at in arrivals]

    def settled(self, read1):
        """Read 2: `out` again, after the figures were computed: any change since read 1 means work went on after
        `done`."""
        torch = self.buffers.torch
        self.buffers.settle()
        return torch.equal(self._out.view(torch.int16), read1.view(torch.int16))

    def freeze(self, stop=True):
        """Stop (or let go on) every process of this group: from the end of its start or call to its next call or
        its close. Stopped, what it holds of the host's pools is counted: a group over a cap (disk.HELD_CAP,
        SOCKETS_CAP, its disk) is killed at once, so that another group's call never runs short of them, and fails
        at its next call."""
        if self.jail is not None and not self.jail.freeze(stop) and self.unfrozen is None:
            self.unfrozen = (f"its processes did not all stop within {FREEZE_S:g} s of the judge's freeze between its "
                             f"calls (work in the kernel outlasts a freeze)")
        sig = signal.SIGSTOP if stop else signal.SIGCONT
        for pid in {p.pid for p in self.procs} | self._mine():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if stop and self.unfrozen is None:
            try:
                self._disk(now=True)
            except GroupFailed as e:
                self.unfrozen = f"{e.message} between its calls"
                self._kill()

    def _mine(self):
        """Live processes this group's ranks started, but the ranks: their descendants, and with a cgroup (which none
        can leave) its members, the only evidence taken (an orphan's environment is the solution's to write). Without
        cgroups an orphan re-parented to the judge is the group's whose MASTER_PORT it carries, or every group's
        where it carries none (so it shows in the difference around the call that made it)."""
        ranks = {p.pid for p in self.procs}
        out = procs.descendants_of(ranks)
        if self.jail is not None:
            return out | (self.jail.members() - ranks)
        return out | {pid for pid in _orphans() if not procs.environ_has(pid, "MASTER_PORT")
                      or procs.marked(pid, "MASTER_PORT", self.port)}

    # -- the end
    def _kill(self, stray=frozenset()):
        """Every process of the group dead (its cgroup, its ranks' process groups, their descendants) and `stray`."""
        stray = set(stray) | self._mine()
        if self.jail is not None:
            self.jail.kill()
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for _ in range(50):          # a helper that keeps forking new pids is caught within a few rounds
            procs.kill(stray)
            procs.reap(stray)
            stray = self._mine()
            if not stray:
                break
            time.sleep(0.01)

    def close(self, graceful=True):
        self.freeze(False)
        if graceful and not getattr(self.run, "stopped", False):
            try:
                self._release()       # a rank that is held would block in its exit
                for r in range(len(self.cmds)):
                    self._tell(r, b"quit\n", 1.0)
                deadline = time.monotonic() + 20
                for p in self.procs:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except (OSError, GroupFailed, subprocess.TimeoutExpired):
                pass
        stray = self._mine()
        Group.ranks.difference_update(p.pid for p in self.procs)
        # And every orphan below the judge: one that cleared its environment cannot be traced to its group.
        self._kill(stray | _orphans())
        if self.jail is not None:
            self.jail.remove()
        for fd in self.fds + self.cmds + ([self.net] if self.net is not None else []):
            try:
                os.close(fd)
            except OSError:
                pass
        for log in self.logs:
            log.close()
            disk.trim(log.name)
        for folder in self.scratch:     # what a group wrote goes with it (the run's end would be too late)
            disk.remove(folder)
        Group.ports.discard(self.port)
        ipc.remove_new(self.sysv)
        if self.shm is not None:
            # Under a user of its own, the group's names are its user's, whenever they came (another live group's
            # are another user's); else every name new since the group started.
            gone = users.owned("/dev/shm", self.uid) if self.uid is not None else \
                [os.path.join("/dev/shm", name) for name in set(os.listdir("/dev/shm")) - self.shm]
            for path in gone:
                disk.remove(path)
        made = getattr(self.run, "users", None)
        if self.uid is not None and made is not None:
            made.give_back(self.uid)

    def log_tail(self, rank, n=15):
        try:
            return plain("".join(disk.tail(self.logs[rank].name).splitlines(keepends=True)[-n:]))
        except (IndexError, TypeError):
            return ""
