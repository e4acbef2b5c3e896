"""The judge's hold on the processes and threads a solution could reach: helpers it must find, neighbours' threads
it must put back to normal before a call, the out-of-memory killer's choice, a group that fails to start."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

from harness.isolation import procs, users
from harness.judge import checks, protocol
from harness.judge.group import Group, GroupFailed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A helper whose first thread ends with the raw `exit` call while a second runs on: /proc says Z for it.
ZOMBIE_LEADER = """import ctypes, threading, time
threading.Thread(target=time.sleep, args=(60,)).start()
ctypes.CDLL(None).syscall(60 if __import__("platform").machine() == "x86_64" else 93, 0)   # exit, this thread only
"""

THREADS = """import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("ready", flush=True)
time.sleep(60)
"""


def _state(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_a_zombie_whose_other_threads_run_is_alive():
    """Without a cgroup the process tree is the judge's only view: a helper that only looks dead is still found."""
    p = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER])
    try:
        for _ in range(100):
            if _state(p.pid) == "Z":
                break
            time.sleep(0.05)
        assert _state(p.pid) == "Z" and len(procs.threads(p.pid)) == 2
        assert p.pid in procs.descendants()
    finally:
        p.kill()
        p.wait()
    assert p.pid not in procs.descendants()          # reaped: gone for good


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling calls")
def test_a_call_starts_with_every_thread_of_the_ranks_and_the_judge_at_normal_priority():
    """A rank may put any thread of its user (a neighbour's rank, the judge) in the idle class, at a low priority or
    on one CPU; each is per thread, and the judge undoes all three for every thread before a call."""
    p = subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        tids = procs.threads(p.pid) + procs.threads(os.getpid())
        assert len(procs.threads(p.pid)) >= 4
        one = {min(os.sched_getaffinity(0))}
        for tid in tids:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            os.setpriority(os.PRIO_PROCESS, tid, 15)
            os.sched_setaffinity(tid, one)
        procs.unslow([os.getpid(), p.pid])        # what Group.call does before each call
        for tid in tids:
            assert os.sched_getscheduler(tid) == os.SCHED_OTHER, tid
            assert os.getpriority(os.PRIO_PROCESS, tid) == 0, tid
            assert os.sched_getaffinity(tid) == os.sched_getaffinity(os.getpid()), tid
    finally:
        p.kill()
        p.wait()


def test_ranks_are_the_out_of_memory_killers_first_choice():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        procs.oom_first(p.pid)
        with open(f"/proc/{p.pid}/oom_score_adj") as f:
            assert f.read().strip() == "1000"
    finally:
        p.kill()
        p.wait()


def test_a_group_that_cannot_start_closes_what_it_made(tiny_data, tmp_path, monkeypatch):
    """Any failure while the ranks start is a GroupFailed, after the group's processes, cgroup and folders are gone."""
    import spec
    monkeypatch.setenv("DATA", tiny_data["DATA"])     # the judge's buffers hold the weights
    from harness.judge.session import Session
    run = Session(spec.TINY, cpu=True)
    sol = type("S", (), {"name": "x", "path": str(tmp_path), "content_hash": "0"})()
    made = []
    real_open = open

    def failing_open(path, *a, **k):
        if str(path).endswith(".log"):
            made.append(path)
            raise OSError("the log cannot be made")
        return real_open(path, *a, **k)
    monkeypatch.setattr("builtins.open", failing_open)
    try:
        buffers = run.buffers_for(0, 1, 1)
        before = procs.descendants()
        with pytest.raises(GroupFailed) as e:
            Group(sol, 1, spec.TINY, True, buffers, run, {1}, run.lock)
        assert e.value.status == "harness error" and "the log cannot be made" in e.value.message
        assert made and procs.descendants() <= before
        assert os.listdir(run.scratch) == []
        cgroups = [d for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids")
                   if os.path.isdir(root) for d in os.listdir(root) if d.startswith(f"wan-{os.getpid()}-")]
        assert cgroups == []
    finally:
        monkeypatch.undo()
        run.close()


def test_a_non_finite_reference_is_the_data_sets_fault_not_a_pass():
    """NaN compares false with everything: a damaged reference would pass any video; the judge says the data is
    damaged instead."""
    ref = torch.zeros(1, 3, 2, 4, 4)
    ref[0, 0, 1, 2, 2] = float("nan")
    figs = checks.figures(torch.zeros(1, 3, 2, 4, 4, dtype=torch.bfloat16), ref, "cpu")
    assert figs["reference_nonfinite"] == 1 and figs["max_abs"] == 0
    status, reason = checks.judge(figs, {"max_abs": 0.1, "rms": 0.1})
    assert status == "harness error" and "data set is damaged" in reason
    good = checks.figures(torch.zeros(1, 3, 2, 4, 4, dtype=torch.bfloat16), torch.zeros(1, 3, 2, 4, 4), "cpu")
    assert checks.judge(good, {"max_abs": 0.1, "rms": 0.1}) == ("passed", None)


@pytest.mark.slow
def test_cpu_ranks_are_locked_down_beyond_landlock(tiny_data, tmp_path):
    """The probe (tests/probes/locked_down.py) passes at worlds 1 and 4 under isolation and fails without it: no
    capabilities, the seccomp filter, an IPC namespace of its own."""
    import json
    import shutil
    probe = tmp_path / "locked_down"
    probe.mkdir()
    shutil.copyfile(os.path.join(ROOT, "tests", "probes", "locked_down.py"), probe / "solution.py")
    (probe / "host_ipc").write_text(str(os.stat("/proc/self/ns/ipc").st_ino))
    (probe / "host_net").write_text(str(os.stat("/proc/self/ns/net").st_ino))
    (probe / "users").write_text(str(int(users.Users().why_not is None)))
    import socket
    service = socket.socket(socket.AF_UNIX)       # a root service beside the run: its socket 0600, as /run's are
    path = str(tmp_path / "service.sock")
    service.bind(path)
    os.chmod(path, 0o600)
    service.listen(8)
    (probe / "service").write_text(path)
    for isolated in (True, False):
        out = tmp_path / f"r{isolated}.json"
        subprocess.run([sys.executable, "bench.py", str(probe), "--tiny", "--workloads", "f1x1,f5x4", "--json",
                        str(out)] + ([] if isolated else ["--no-isolation"]), cwd=ROOT, env=tiny_data,
                       capture_output=True, text=True, timeout=600)
        recs = json.loads(out.read_text())["workloads"]
        for w, rec in recs.items():
            if isolated:
                assert rec["passed"], (w, rec["reason"])
            else:
                assert rec["status"] == "runtime error" and "not locked down: capabilities" in rec["reason"], rec


@pytest.mark.slow
@pytest.mark.skipif(users.Users().why_not is not None, reason="the judge cannot make users here")
def test_a_groups_per_user_counts_are_its_own(tiny_data, tmp_path):
    """tests/cheats/spends_user_counts.py holds every pending signal its user may queue while its group lives; the
    probe beside it in the same run (tests/probes/needs_user_counts.py) still queues one under a user of its own,
    and cannot where both groups run as the judge's user (WAN_ASSUME_NO_USERS)."""
    for own in (True, False):
        out = tmp_path / f"r{own}.json"
        env = dict(tiny_data) if own else dict(tiny_data, WAN_ASSUME_NO_USERS="1")
        p = subprocess.run([sys.executable, "bench.py", os.path.join(ROOT, "tests", "cheats", "spends_user_counts.py"),
                            os.path.join(ROOT, "tests", "probes", "needs_user_counts.py"), "--tiny", "--workloads",
                            "f1x1", "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=600)
        report = json.loads(out.read_text())
        assert ("a user per group" in report["environment"]["isolation"]) == own, p.stdout[-2000:]
        rec = report["solutions"]["needs_user_counts"]["workloads"]["f1x1"]
        if own:
            assert rec["passed"], (rec["status"], rec["reason"])
        else:
            assert rec["status"] == "runtime error" and "pending signals refused" in rec["reason"], rec


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip")
def test_network_state_stays_in_its_groups_namespace(tiny_data, tmp_path):
    """A mark left in the TCP metrics cache by the world-1 group is not there for the world-4 group under isolation
    (each its own network namespace); without isolation the later group finds it (the cheat then fails its call)."""
    import json
    cheat = os.path.join(ROOT, "tests", "cheats", "remembers_in_tcp_metrics.py")
    for isolated in (True, False):
        out = tmp_path / f"r{isolated}.json"
        subprocess.run([sys.executable, "bench.py", cheat, "--tiny", "--workloads", "f1x1,f5x4", "--json", str(out)]
                       + ([] if isolated else ["--no-isolation"]), cwd=ROOT, env=tiny_data, capture_output=True,
                       text=True, timeout=600)
        recs = json.loads(out.read_text())["workloads"]
        if isolated:
            assert all(rec["passed"] for rec in recs.values()), {w: rec["reason"] for w, rec in recs.items()}
        else:
            assert any("found the mark of an earlier group" in (rec["reason"] or "") for rec in recs.values()), recs


@pytest.mark.slow
def test_an_honest_torch_compile_is_not_tampering(tiny_data, tmp_path):
    """tests/probes/compiles.py passes: torch._dynamo's wrapper of torch.manual_seed is torch's, not the solution's."""
    import json
    out = tmp_path / "r.json"
    subprocess.run([sys.executable, "bench.py", os.path.join(ROOT, "tests", "probes", "compiles.py"), "--tiny",
                    "--workloads", "f1x1", "--json", str(out)], cwd=ROOT, env=tiny_data, capture_output=True,
                   text=True, timeout=600)
    rec = json.loads(out.read_text())["workloads"]["f1x1"]
    assert rec["passed"], rec["reason"]


def test_a_process_whose_first_thread_ended_is_read_through_a_live_one():
    """/proc/PID of a process whose first thread ended shows no descriptors; procs.live_view names a live thread's
    folder, where they are (the judge's counts of files and sockets read there)."""
    p = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER])
    try:
        deadline = time.monotonic() + 30
        while _state(p.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        view = procs.live_view(p.pid)
        assert view is not None and view.startswith(f"/proc/{p.pid}/task/"), view
        assert os.listdir(f"{view}/fd") and not os.listdir(f"/proc/{p.pid}/fd")
    finally:
        p.kill()
        p.wait()
    assert procs.live_view(p.pid) is None


GHOST_DISK = """import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)
assert libc.fallocate(fd, 1, 0, 64 << 20) == 0            # FALLOC_FL_KEEP_SIZE
threading.Thread(target=time.sleep, args=(60,)).start()
libc.syscall(60 if __import__("platform").machine() == "x86_64" else 93, 0)   # exit, this thread only
"""


def test_the_disk_count_sees_files_held_past_an_ended_first_thread(tmp_path):
    """A file in no folder held by a process whose first thread ended is still counted (harness/isolation/disk.py reads
    through a live thread)."""
    from harness.isolation import disk
    p = subprocess.Popen([sys.executable, "-c", GHOST_DISK, str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        while _state(p.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        why = disk.over([str(tmp_path)], cap=32 << 20, holders=[p.pid])
        assert why and "(files in no folder too)" in why, why
    finally:
        p.kill()
        p.wait()


def test_cgroups_of_judges_that_are_gone_are_swept():
    """A judge killed before its end leaves its empty cgroups; the next run removes them, never a live judge's."""
    from harness.isolation import cgroup
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    dead = cgroup.Cgroup.make(f"wan-{p.pid}-1")
    if dead is None:
        pytest.skip("no cgroup can be made here")
    live = cgroup.Cgroup.make(f"wan-{os.getpid()}-sweep")
    try:
        removed = cgroup.sweep()
        assert f"wan-{p.pid}-1" in removed and not os.path.exists(dead.path)
        assert dead.memory is None or not os.path.exists(dead.memory)
        assert os.path.exists(live.path) and f"wan-{os.getpid()}-sweep" not in removed
    finally:
        for j in (dead, live):
            j.remove()


FORKS = """import os, sys, time
sys.stdin.readline()
n = 0
try:
    for _ in range(50):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print("refused", e.errno, flush=True)
print(n, flush=True)
time.sleep(60)
"""


def test_a_groups_tasks_are_capped(monkeypatch):
    """A group's cgroup caps its tasks (cgroup.MAX_TASKS, here 20): the 50 forks of a fork storm are refused past it."""
    import errno
    from harness.isolation import cgroup
    monkeypatch.setattr(cgroup, "MAX_TASKS", 20)
    j = cgroup.Cgroup.make(f"wan-{os.getpid()}-tasks")
    if j is None or not j.tasks_capped:
        pytest.skip("no pids controller for a cgroup here")
    p = subprocess.Popen([sys.executable, "-c", FORKS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        j.add(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().split() == ["refused", str(errno.EAGAIN)]
        assert int(p.stdout.readline()) < 20
    finally:
        j.kill()
        p.wait(timeout=30)
        j.remove()


SPREAD = """import os, sys, time
sys.stdin.readline()
for _ in range(3):
    if os.fork() == 0:
        os.close(1)
        block = bytearray(100 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(60)
        os._exit(0)
print("forked", flush=True)
time.sleep(60)
"""


def test_a_groups_memory_is_capped_across_its_processes(monkeypatch):
    """Three processes of 100 MiB each under a cap of 256 MiB: none is large, together they are past the cap, and the
    kernel ends one of the group's processes (harness/isolation/cgroup.py: the cgroup counts them together)."""
    from harness.isolation import cgroup
    monkeypatch.setenv("WAN_GROUP_MEMORY", str(256 << 20))
    j = cgroup.Cgroup.make(f"wan-{os.getpid()}-memory")
    if j is None or j.memory_cap is None:
        pytest.skip("no memory cgroup can be made here")
    p = subprocess.Popen([sys.executable, "-c", SPREAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert j.memory_cap == 256 << 20 and j.oom() == (0, False)
        j.add(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline() == "forked\n"
        deadline = time.monotonic() + 20       # the kill is counted before its process has left
        while (j.oom()[0] == 0 or len(j.members()) == 4) and time.monotonic() < deadline:
            time.sleep(0.05)
        peak = os.path.join(j.memory, "memory.max_usage_in_bytes") if j.memory else os.path.join(j.path, "memory.peak")
        with open(peak) as f:
            assert int(f.read()) <= 256 << 20
        assert j.oom()[0] >= 1 and j.oom()[1] and len(j.members()) < 4, (j.oom(), j.members())
    finally:
        j.kill()
        p.wait(timeout=30)
        j.remove()
    assert not os.path.exists(j.path) and not (j.memory and os.path.exists(j.memory))


def test_a_kill_under_the_groups_cap_is_not_its_caps(monkeypatch, tmp_path):
    """The out-of-memory killer also ends a group's processes when memory runs short above it (the host, an enclosing
    cgroup: here a cgroup v1 parent of 200 MiB around a group capped at 1 GiB): counted, but not at the group's cap,
    so the judge does not blame the group's solution for it (Group._memory)."""
    from harness.isolation import cgroup
    parent = os.path.join(cgroup.MEMORY_V1, f"wan-{os.getpid()}-host")
    try:
        os.mkdir(parent)
        with open(os.path.join(parent, "memory.limit_in_bytes"), "w") as f:
            f.write(str(200 << 20))
    except OSError:
        pytest.skip("no cgroup v1 memory hierarchy to nest a group in here")
    monkeypatch.setattr(cgroup, "MEMORY_V1", parent)
    monkeypatch.setenv("WAN_GROUP_MEMORY", str(1 << 30))
    j = cgroup.Cgroup.make(f"wan-{os.getpid()}-nested")
    p = None
    try:
        if j is None or j.memory is None:
            pytest.skip("the group's memory cap is not cgroup v1's here")
        p = subprocess.Popen([sys.executable, "-c", SPREAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        j.add(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        p.stdout.readline()
        deadline = time.monotonic() + 20
        while j.oom()[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert j.oom() == (j.oom()[0], False) and j.oom()[0] >= 1, j.oom()
    finally:
        if j is not None:
            j.kill()
            if p is not None:
                p.wait(timeout=30)
            j.remove()
        os.rmdir(parent)


def test_the_clock_runs_while_the_judge_reads_the_done_lines(tiny_data, monkeypatch):
    """The clock stops when the judge has read and checked every `done`, just before it copies `out`: time the
    ranks make the judge spend on their lines (a long line, a starved judge) is theirs. Here the judge's parse of a
    `done` is made 0.4 s slow, and the call's time holds it."""
    import loader
    import spec
    from harness.judge.session import Session
    monkeypatch.setenv("DATA", tiny_data["DATA"])
    real = protocol.parse

    def slow(line, rank):
        if line.startswith(b"done "):
            time.sleep(0.4)
        return real(line, rank)
    run = Session(spec.TINY, cpu=True)
    group = None
    try:
        sol = loader.describe(os.path.join(ROOT, "solutions", "reference"))
        group = Group(sol, 1, spec.TINY, True, run.buffers_for(0, 1, 1), run, {1}, run.lock)
        z = spec.make_inputs("f1x1", "cpu", spec.TINY)[0]
        fast = group.call(z, 60)[0]
        monkeypatch.setattr(protocol, "parse", slow)
        slowed = group.call(z, 60)[0]
        assert slowed >= fast + 0.35, (fast, slowed)
    finally:
        monkeypatch.undo()
        if group is not None:
            group.close()
        run.close()


@pytest.mark.slow       # 35 s: a group's start and 4,200 sockets
def test_a_group_over_its_caps_when_frozen_is_killed_at_once(tiny_data, monkeypatch):
    """tests/cheats/holds_sockets_after_its_call.py opens sockets past disk.SOCKETS_CAP after its call; the judge's
    freeze (which parks a group between its calls) counts them: the group's processes die at once, so another's call
    never runs short, and its next call fails for it."""
    import loader
    import spec
    from harness.judge.session import Session
    monkeypatch.setenv("DATA", tiny_data["DATA"])
    run = Session(spec.TINY, cpu=True)
    group = None
    try:
        sol = loader.describe(os.path.join(ROOT, "tests", "cheats", "holds_sockets_after_its_call.py"))
        group = Group(sol, 1, spec.TINY, True, run.buffers_for(0, 1, 1), run, {1}, run.lock)
        z = spec.make_inputs("f1x1", "cpu", spec.TINY)[0]
        group.call(z, 60)
        rank = group.procs[0]
        for _ in range(100):            # the thread's sockets, after the call
            if len(os.listdir(f"/proc/{rank.pid}/fd")) > 4_200:
                break
            time.sleep(0.05)
        group.freeze()
        assert group.unfrozen and "held more than 4096 sockets" in group.unfrozen and \
            "between its calls" in group.unfrozen, group.unfrozen
        assert rank.poll() is not None
        group.freeze(False)
        with pytest.raises(GroupFailed) as e:
            group.call(z, 60)
        assert e.value.status == "tampering" and "held more than 4096 sockets" in e.value.message
    finally:
        monkeypatch.undo()
        if group is not None:
            group.close()
        run.close()


CLONES = """import ctypes, os, sys, threading
from harness.isolation import seccomp
seccomp.drop_capabilities()
seccomp.deny(metadata=False)
libc = ctypes.CDLL(None, use_errno=True)
args = (ctypes.c_uint64 * 11)()            # struct clone_args, zeroed: a plain fork
r = libc.syscall(435, ctypes.byref(args), ctypes.sizeof(args))
if r == 0:
    os._exit(0)
errno = ctypes.get_errno() if r < 0 else 0
done = []
t = threading.Thread(target=done.append, args=(1,))
t.start()
t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
print(errno, done, os.waitpid(pid, 0)[1] >> 8)
"""


def test_clone3_is_refused_and_threads_and_forks_still_work():
    """clone3's CLONE_INTO_CGROUP would move a rank's child out of its group's cgroup (root may, without
    capabilities): the filter answers clone3 with ENOSYS, and threads and forks (the C library's fallback) work."""
    p = subprocess.run([sys.executable, "-c", CLONES], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["38", "[1]", "7"], p.stdout


def test_what_a_rank_says_of_itself_is_typed_before_the_judge_uses_it():
    """A rank's `ready` and `report` are the solution's to write: a string where a number goes, a number no float
    holds, an unknown field or status, a clock that ran backwards is tampering, never a crash of the judge's report."""
    ok = {"rank": 0, "prepare_s": 1.5, "isolation": {"isolation": "landlock", "abi": 7, "skipped": []},
          "seccomp": "x86_64", "ipc_namespace": True, "device": "cpu", "torch": "2", "triton": None}
    assert protocol.ready(0, ok) == ok
    for bad in ({"prepare_s": "1"}, {"prepare_s": 10 ** 4000}, {"prepare_s": float("nan")}, {"anything": 1},
                {"isolation": {"abi": 10 ** 400}}):
        with pytest.raises(GroupFailed, match="malformed ready"):
            protocol.ready(0, bad)
    good = {"t0": 1, "t1": 2, "peak": 3, "problems": [["tampering", "x"]]}
    assert protocol.report(0, good) == good
    for bad in ({"peak": 10 ** 4000}, {"t0": -1}, {"t1": 2.0}, {"t1": 0}, {"problems": [["harness error", "x"]]},
                {"problems": [["passed", "x"]]}):
        with pytest.raises(GroupFailed, match="malformed report"):
            protocol.report(0, dict(good, **bad))


@pytest.mark.parametrize("depth", [700, 200000])
def test_a_deeply_nested_line_is_malformed_not_a_crash(depth):
    """json parses 700 levels, a recursive walk of them may not (the judge makes every string plain, prints, writes
    JSON); 200,000 levels json refuses itself: both are a malformed line, the rank's tampering."""
    line = b"report " + b'{"a": ' * depth + b"1" + b"}" * depth
    with pytest.raises(GroupFailed, match="sent a malformed line") as e:
        protocol.parse(line, 0)
    assert e.value.status == "tampering"
    nested = {"t0": 1, "t1": 2, "peak": None, "problems": [], "x": [[[[[[["deep enough"]]]]]]]}
    assert protocol.parse(b"report " + json.dumps(nested).encode(), 0)[1] == nested


@pytest.mark.slow
def test_a_judge_told_to_stop_leaves_no_folder_or_rank(tiny_data, tmp_path):
    """SIGTERM (a time limit's kill) ends bench through its finally blocks: the run's folder (the ranks' scratch,
    owned by their users) and the ranks are gone within seconds, a rank busy in its call included."""
    sol = tmp_path / "sleeps.py"
    sol.write_text("import time\n\n\ndef run(z, weights, rank, world, pg, out):\n    time.sleep(300)\n")
    env = dict(tiny_data, TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "bench.py", str(sol), "--tiny", "--workloads", "f1x1"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(600):            # the rank started: its scratch is there
            runs = [d for d in os.listdir(tmp_path) if d.startswith("wan-run-")]
            if runs and os.listdir(tmp_path / runs[0] / "scratch"):
                break
            time.sleep(0.1)
        time.sleep(2)
        ranks = procs.descendants_of({p.pid})
        assert runs and ranks
        p.terminate()
        p.wait(timeout=30)
        assert p.returncode == 143
        assert not [d for d in os.listdir(tmp_path) if d.startswith("wan-run-")]
        assert not [pid for pid in ranks if os.path.exists(f"/proc/{pid}")]
    finally:
        p.kill()
        p.wait()


@pytest.mark.slow       # 15 s: a group's start
def test_without_a_cgroup_an_orphan_left_by_prepare_fails_its_group(tiny_data, monkeypatch):
    """tests/cheats/orphans_quietly.py leaves an orphan with an empty environment: without a cgroup the park after
    prepare finds it below the judge, kills it and fails the group (it would otherwise be let go on with every
    group's thaw, through their timed calls)."""
    import loader
    import spec
    from harness.isolation import cgroup
    from harness.judge.session import Session
    monkeypatch.setenv("DATA", tiny_data["DATA"])
    monkeypatch.setattr(cgroup.Cgroup, "make", classmethod(lambda cls, name: None))
    run = Session(spec.TINY, cpu=True)
    try:
        sol = loader.describe(os.path.join(ROOT, "tests", "cheats", "orphans_quietly.py"))
        with pytest.raises(GroupFailed) as e:
            Group(sol, 1, spec.TINY, True, run.buffers_for(0, 1, 1), run, {1}, run.lock)
        assert e.value.status == "tampering" and "processes left running after prepare" in e.value.message
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert "time.sleep(120)" not in ps
    finally:
        run.close()
