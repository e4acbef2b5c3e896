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
import json
import os
import pickle
import resource
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

from harness import disk, env, ipc, procs
from harness.jail import Jail
from harness.report import plain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# CLOCK_MONOTONIC_RAW: the hardware counter as it runs, which no frequency or tick adjustment (adjtimex: the host's
# NTP, or a rank with CAP_SYS_TIME) slows or speeds.
CLOCK = (lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)) if hasattr(time, "CLOCK_MONOTONIC_RAW") \
    else time.monotonic_ns
STARTUP_S = 300.0          # load, build cache, prepare, first-call autotuning
CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
MAX_LINE = 1 << 20         # a protocol line is a few hundred bytes; a report with problems, a few KiB
MAX_DONE = 256             # `done {"call": N, "nonce": "..."}`: about 50
# What a rank may say of itself: failures only (its own harness code reports these; a solution can forge them, and
# then fails).
RANK_FAILURES = ("runtime error", "load error", "tampering", "incorrect", "harness error")
REPORTED = ("tampering", "incorrect")      # what a rank's report may find after a call (guards, census, out)
# What a rank's `ready` may hold, by type (harness/rank.py).
READY = {"rank": int, "isolation": dict, "ipc_namespace": bool, "seccomp": (str, type(None)), "device": str,
         "torch": str, "gpu": str, "cudnn": (int, type(None)), "nccl": str, "triton": (str, type(None)),
         "prepare_s": (int, float)}
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class GroupFailed(Exception):
    def __init__(self, status, message, rank=None):
        super().__init__(message)
        self.status, self.message, self.rank = status, message, rank


def _free_port():
    """(MASTER_ADDR, port) for a new group; GroupFailed, never OSError, when the loopback has none."""
    found = env.free_port(Group.ports)
    if found is None:
        why = "; an earlier solution's ranks may have exhausted them" if Group.spawned else ""
        raise GroupFailed("harness error", f"no free TCP port on 127.0.0.1 or {env.OTHER_ADDRESSES} other loopback "
                                           f"addresses{why}")
    return found


class Group:
    """The rank processes of one solution at one world size, judged from this process."""
    ranks = set()      # the pids of every live group's ranks
    ports = set()      # their MASTER_PORTs, which tell their orphans apart
    spawned = 0        # ranks started by this process so far

    def __init__(self, solution, world, geometry, cpu, buffers, run, frames, sandbox, profiling=False):
        """solution: a loader.Solution (described, built); run: the run's folder (harness.run.Run); frames: the
        clip lengths the group will see; sandbox: the lock's settings for a rank, or None for no isolation;
        profiling: a call may be profiled (the ranks start the profiler once before their snapshot of torch).
        Raises GroupFailed, after closing what it started, where the ranks do not all come up."""
        self.world, self.cpu, self.buffers, self.run = world, cpu, buffers, run
        self.procs, self.logs, self.fds, self.cmds, self.bufs, self.scratch = [], [], [], [], {}, []
        self.calls, self._arrived, self._limit, self._disk_at = 0, CLOCK(), STARTUP_S, 0.0
        self.jail, self.shm, self.sysv = None, None, ipc.snapshot()
        earlier = Group.spawned     # ranks were alive before this group's: they may have spent the ports
        addr, port = _free_port()
        self.port = port
        Group.ports.add(port)
        try:
            self._start(solution, geometry, frames, sandbox, profiling, addr)
            self.info = [self._ready(r, fields) for r, fields, _ in self._each("ready", None, STARTUP_S)]
            # The rank's census passed views of these as they came: they must still be so.
            self.buffers.settle()
            changed = [r for r in range(self.world) if self.buffers.weights_modified(r)]
            if changed:
                raise GroupFailed("input modified", f"rank {changed[0]}: the weights were modified by prepare",
                                  changed[0])
        except BaseException as e:
            self.close(graceful=False)
            if not isinstance(e, GroupFailed):
                if not isinstance(e, Exception):
                    raise
                raise GroupFailed("harness error", f"starting the ranks: {type(e).__name__}: {e}") from e
            if e.status == "harness error" and earlier and "address" in e.message.lower():
                e.message += "; an earlier solution's ranks may have exhausted the loopback's ports"
            raise

    def _start(self, solution, geometry, frames, sandbox, profiling, addr):
        """The ranks' processes, each given its setup; a cgroup for them where there is one."""
        import loader
        from harness.decoys import Decoys
        from harness.sandbox import SandboxError, check_grants
        world, cpu, run = self.world, self.cpu, self.run
        build = loader.build_dir(solution)
        if sandbox is not None:
            try:
                check_grants([solution.path, build], sandbox["exclude"], within=[ROOT])
            except SandboxError as e:
                raise GroupFailed("load error", str(e)) from e
        self.jail = Jail.make(f"wan-{os.getpid()}-{self.port}") if sandbox is not None else None
        # Decoys of its own: another group's ranks, alive between this group's calls, cannot be blamed on it.
        self.decoys = Decoys(tempfile.mkdtemp(prefix="data-", dir=run.folder), geometry)
        self.buffers.wipe()
        blobs = [self.buffers.lend(r) for r in range(world)]
        # Where ranks may write to /dev/shm (NCCL on GPUs), what they leave there goes with the group.
        shared = sandbox is not None and "/dev/shm" in sandbox.get("write", [])
        self.shm = set(os.listdir("/dev/shm")) if shared else None
        for r in range(world):
            scratch = tempfile.mkdtemp(prefix=f"rank{r}-", dir=run.scratch)
            self.scratch.append(scratch)
            cmd_r, cmd_w = os.pipe()
            res_r, res_w = os.pipe()
            self.cmds.append(cmd_w)
            self.fds.append(res_r)
            self.bufs[res_r] = bytearray()
            log = open(os.path.join(run.logs, f"{solution.name}-x{world}-rank{r}-{len(os.listdir(run.logs))}.log"),
                       "w")
            self.logs.append(log)
            environ = env.rank_env(r, world, self.port, scratch, cpu, self.decoys.folder, os.path.dirname(build),
                                   run.pkg, addr)
            lock = None
            if sandbox is not None:
                lock = {"extra": [run.pkg, os.path.abspath(solution.path), build, self.decoys.folder],
                        "exclude": sandbox["exclude"],
                        "write": [scratch] + ([] if cpu else sandbox["write"]),
                        "devices": list(DEVICES) + ([] if cpu else sandbox["gpu_devices"])}
            setup = {"rank": r, "world": world, "geometry": geometry.name, "device": "cpu" if cpu else "cuda",
                     "solution": os.path.abspath(solution.path), "buffers": blobs[r], "frames": sorted(frames),
                     "sandbox": lock, "scratch": scratch, "trace": self.trace(r), "profiling": profiling}
            # the run's folder on the command line only names the run in `ps` (a rank ignores it)
            try:
                p = subprocess.Popen([sys.executable, "-m", "harness.rank", str(cmd_r), str(res_w), run.folder],
                                     env=environ, pass_fds=(cmd_r, res_w), stdout=log, stderr=subprocess.STDOUT,
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
            os.write(cmd_w, struct.pack("<Q", len(blob)))
            self._write(cmd_w, blob)

    @staticmethod
    def _write(fd, data):
        while data:
            data = data[os.write(fd, data):]

    # -- the protocol
    def _lines(self, deadline, wanted):
        """Yield (rank, kind, fields, arrival ns) of the ranks in `wanted` (a set the caller shrinks; the others'
        lines wait in their buffers) until the deadline; a dead rank or the deadline raises."""
        while True:
            for rank in sorted(wanted):
                fd = self.fds[rank]
                end = self.bufs[fd].find(b"\n") if rank in wanted else -1
                if end >= 0:
                    line = bytes(self.bufs[fd][:end])
                    del self.bufs[fd][:end + 1]
                    yield rank, *self._parse(line, rank), self._arrived
            if not wanted:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise GroupFailed("timeout", f"no answer within {self._limit:.1f} s")
            ready, _, _ = select.select(self.fds, [], [], min(left, 0.5))
            self._arrived = CLOCK()
            if not ready:       # while idle only: a walk must not delay the stamp of a line that is there
                self._disk()
            for fd in ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self._died(self.fds.index(fd))
                self.bufs[fd] += chunk
                if len(self.bufs[fd]) > MAX_LINE and self.bufs[fd].find(b"\n") < 0:
                    raise GroupFailed("tampering", f"rank {self.fds.index(fd)} sent a line of more than "
                                                   f"{MAX_LINE} bytes", self.fds.index(fd))
            for rank, p in enumerate(self.procs):
                if p.poll() is not None and not self.bufs[self.fds[rank]] and \
                        not select.select([self.fds[rank]], [], [], 0)[0]:
                    self._died(rank)

    def _died(self, rank):
        p = self.procs[rank]
        try:
            code = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code == -signal.SIGXFSZ:
            raise GroupFailed("tampering", f"rank {rank} wrote a file of more than {disk.gib(disk.FILE_CAP)} (its log "
                                           f"or in its scratch) and was killed by SIGXFSZ", rank)
        raise GroupFailed("crash", f"rank {rank} died (exit code {code})", rank)

    def _disk(self, now=False):
        """About once a second (or `now`): the ranks' scratch folders and logs within the caps (harness/disk.py)."""
        if not now and time.monotonic() < self._disk_at:
            return
        why = disk.over(self.scratch + [log.name for log in self.logs])
        self._disk_at = time.monotonic() + 1.0
        if why:
            raise GroupFailed("tampering", f"the ranks {why}")

    def trace(self, rank):
        """Where rank `rank`'s profiler trace must be: the judge's choice, never the rank's word."""
        return os.path.join(self.scratch[rank], disk.TRACE_NAME)

    @staticmethod
    def _parse(line, rank):
        if line.startswith(b"done ") and len(line) > MAX_DONE:
            raise GroupFailed("tampering", f"rank {rank} sent a `done` of {len(line)} bytes (at most {MAX_DONE})", rank)
        kind, _, rest = bytes(line).decode("utf-8", "replace").partition(" ")
        try:
            fields = json.loads(rest)
            if not isinstance(fields, dict):
                raise ValueError("not an object")
        except Exception:   # ValueError, but a deeply nested document raises RecursionError
            raise GroupFailed("tampering", f"rank {rank} sent a malformed line: {bytes(line[:200])!r}", rank)
        return plain(kind), _plain(fields)

    def _each(self, kind, call, limit):
        """[(rank, fields)] of one `kind` line from every rank, in rank order; anything else is a failure."""
        self._limit = limit
        got, wanted = {}, set(range(self.world))
        for rank, k, fields, at in self._lines(time.monotonic() + limit, wanted):
            if k == "error":
                where = f" in {fields['phase']}" if isinstance(fields.get("phase"), str) else ""
                status = fields.get("status")
                if status not in RANK_FAILURES:      # a rank can only fail itself, never pass
                    raise GroupFailed("tampering", f"rank {rank} reported the status {str(status)[:40]!r}", rank)
                if status == "harness error":        # the rank's process is the solution's: its failure is too
                    status, where = "runtime error", f" (it reported a harness error{where})"
                raise GroupFailed(status, f"rank {rank}{where}: {str(fields.get('error'))[:4000]}", rank)
            if k != kind or fields.get("call") != call:
                raise GroupFailed("tampering", f"rank {rank} sent an unexpected '{k}' line (call "
                                               f"{fields.get('call')}) while the judge waited for '{kind}' of call "
                                               f"{call}", rank)
            got[rank] = (fields, at)
            wanted.discard(rank)
        return [(r, *got[r]) for r in range(self.world)]

    @staticmethod
    def _ready(rank, f):
        """A rank's `ready`, its fields checked as _report's are (what it says of itself is recorded, never
        believed: the isolation in force is the judge's own finding)."""
        def fine(v, kind):
            if isinstance(v, dict):      # the lock's own words: {"isolation", "abi", "skipped"}
                return all(isinstance(k, str) and fine(x, (str, int, list)) for k, x in v.items())
            if isinstance(v, list):
                return all(isinstance(x, str) for x in v)
            return isinstance(v, kind) and (not isinstance(v, (int, float)) or 0 <= v < 2 ** 50)
        bad = sorted(k for k, v in f.items() if k not in READY or not fine(v, READY[k]))
        if bad:
            raise GroupFailed("tampering", f"rank {rank} sent a malformed ready (fields {bad[:5]})", rank)
        return f

    @staticmethod
    def _report(rank, f):
        """A rank's report, its fields checked: malformed is tampering (its figures are diagnostics only)."""
        ok = _count(f.get("t0")) and _count(f.get("t1")) and (f.get("peak") is None or _count(f.get("peak"))) and \
            isinstance(f.get("problems"), list) and \
            all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) and p[0] in REPORTED
                for p in f["problems"])
        if not ok:
            raise GroupFailed("tampering", f"rank {rank} sent a malformed report: {json.dumps(f)[:200]}", rank)
        return f

    def quiet(self):
        """After a call's figures: no rank may have written anything more (a second `done` or `report`)."""
        self._quiet("after its done and report")

    def _quiet(self, when="between calls"):
        """Lines that arrived while no call was running are tampering; so is a flood of the disk meanwhile."""
        self._disk(now=True)
        ready, _, _ = select.select(self.fds, [], [], 0)
        for fd in ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self._died(self.fds.index(fd))
            self.bufs[fd] += chunk
        for rank, fd in enumerate(self.fds):
            if self.bufs[fd]:
                raise GroupFailed("tampering", f"rank {rank} wrote {when}: {bytes(self.bufs[fd][:120])!r}", rank)

    # -- a call
    def call(self, z, timeout, profile=False):
        """Run one call on latents `z` (CPU bf16 [1, C, T, h, w]); returns (seconds, read 1 of out, reports,
        problems found by the judge). The caller checks read 1 and then calls `settled(read1)`."""
        torch = self.buffers.torch
        self.calls += 1
        call, t = self.calls, z.shape[2]
        n = z.numel()
        self._quiet()
        self.buffers.stage(z)
        out = self._out = self.buffers.out_view(t)
        self.buffers.poison(out.numel())
        early = self.decoys.read()          # read in prepare or between calls
        self.decoys.arm()
        before = self._mine()
        self._unslow()
        verb = "profile" if profile else "go"
        for r in range(self.world) if profile else ():
            _unlink(self.trace(r))      # a trace there must be this call's
        nonce = secrets.token_hex(8)      # a `done` must echo it: none can be written before `go`
        t0 = CLOCK()
        self.buffers.place(n)
        for fd in self.cmds:
            self._write(fd, f"{verb} {call} {t} {nonce}\n".encode())
        arrivals = self._each("done", call, timeout)
        bad = [r for r, fields, _ in arrivals if fields.get("nonce") != nonce]
        if bad:
            raise GroupFailed("tampering", f"rank {bad[0]} sent a `done` that does not answer this call's `go`", bad[0])
        odd = [r for r, fields, _ in arrivals if set(fields) != {"call", "nonce"}]
        if odd:
            raise GroupFailed("tampering", f"rank {odd[0]} sent a `done` with fields other than call and nonce", odd[0])
        # The clock stops here, when every `done` is read and checked, just before read 1: the time the judge took
        # to read the lines (a long line, a starved judge: the ranks' doing) is theirs, and no work of theirs can
        # finish between the stop and read 1 but during the copy itself.
        t1 = CLOCK()
        read1 = out.clone()
        self.buffers.settle()
        reports = [self._report(r, fields) for r, fields, _ in self._each("report", call, STARTUP_S)]
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

    def _unslow(self):
        """Every thread of the judge and of this group's ranks back at normal priority, in the normal scheduling
        class, on every CPU the judge started with: a rank may lower the priority, set the idle class or narrow the
        CPUs of any thread of its user (a neighbour's, the judge's), which no sandbox here forbids; all three are
        per thread."""
        for pid in [os.getpid()] + [p.pid for p in self.procs]:
            for tid in procs.threads(pid):
                for reset in (lambda: os.setpriority(os.PRIO_PROCESS, tid, 0),
                              lambda: os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0)),
                              lambda: os.sched_setaffinity(tid, CPUS)):
                    try:
                        reset()
                    except (OSError, AttributeError):
                        pass

    def freeze(self, stop=True):
        """Stop (or let go on) every process of this group while another group's call runs: a solution's threads
        and helpers must not run beside another solution's timed call."""
        if self.jail is not None:
            self.jail.freeze(stop)
        sig = signal.SIGSTOP if stop else signal.SIGCONT
        for pid in {p.pid for p in self.procs} | self._mine():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _mine(self):
        """Live processes this group's ranks started, but the ranks: the ranks' descendants, and with a cgroup the
        members of its cgroup, which none can leave (each rank is the root of its own cgroup namespace, so the
        kernel refuses a move out of it) and which is the only evidence taken: an orphan's environment is the
        solution's to write (another group's port, none at all), so with cgroups an orphan outside them is no
        group's (killed at the close). Without cgroups an orphan re-parented to the judge is the group's whose
        MASTER_PORT it carries; one that cleared its environment is counted by every group, so it appears in the
        difference around the call that made it. The judge's own helpers carry its mark (procs.mark_judge)."""
        ranks = {p.pid for p in self.procs}
        out = procs.descendants_of(ranks)
        if self.jail is not None:
            return out | (self.jail.members() - ranks)
        orphans = procs.descendants() - Group.ranks - procs.descendants_of(Group.ranks)
        judge = procs.mark_judge()
        others = {pid for pid in orphans if procs.marked(pid, procs.JUDGE_KEY, judge) or
                  procs.environ_has(pid, "MASTER_PORT") and not procs.marked(pid, "MASTER_PORT", self.port)}
        return out | (orphans - others)

    # -- the end
    def close(self, graceful=True):
        self.freeze(False)
        if graceful:
            try:
                for fd in self.cmds:
                    self._write(fd, b"quit\n")
                deadline = time.monotonic() + 20
                for p in self.procs:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except (OSError, subprocess.TimeoutExpired):
                pass
        stray = self._mine()
        if self.jail is not None:
            self.jail.kill()
        Group.ranks.difference_update(p.pid for p in self.procs)
        # And every other process below the judge that no live group's rank started: an orphan that cleared its
        # environment cannot be traced to its group, and must not outlive it into another world's or run's.
        # (The judge has no children of its own while groups run.)
        stray |= procs.descendants() - Group.ranks - procs.descendants_of(Group.ranks)
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
        if self.jail is not None:
            self.jail.remove()
        for fd in self.fds + self.cmds:
            try:
                os.close(fd)
            except OSError:
                pass
        for log in self.logs:
            log.close()
            disk.trim(log.name)
        for folder in self.scratch:     # what a group wrote goes with it (the run's end would be too late)
            shutil.rmtree(folder, ignore_errors=True)
        Group.ports.discard(self.port)
        ipc.remove_new(self.sysv)
        if self.shm is not None:
            for name in set(os.listdir("/dev/shm")) - self.shm:
                path = os.path.join("/dev/shm", name)
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else _unlink(path)

    def log_tail(self, rank, n=15):
        try:
            return plain("".join(disk.tail(self.logs[rank].name).splitlines(keepends=True)[-n:]))
        except (IndexError, TypeError):
            return ""


def _count(x):
    """An int the judge can do arithmetic and print with (json carries any size)."""
    return type(x) is int and 0 <= x < 2 ** 63


def _plain(value):
    """A rank's message with every string in it plain (report.plain): what the judge prints and records of it."""
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, dict):
        return {plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
