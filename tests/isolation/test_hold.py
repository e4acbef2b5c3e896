"""The judge's side of the GPU hold (harness/isolation/cuda_lock.py) against stand-in helpers: what each answer of the
driver means, and a helper that never answers (a lock of a process that stopped itself) costs the deadline, not the
run."""
import os
import sys
import time

from harness.isolation import procs
from harness.isolation.cuda_lock import NOT_READY, CudaLock

HELPER = """
import sys, time
print({first!r}, flush=True)
for line in sys.stdin:
    verb, pid, *ms = line.split()
    answer = {answers!r}.get(verb)
    if answer is None:
        time.sleep(3600)
    print(answer, flush=True)
"""


def _hold(first="ready", **answers):
    return CudaLock([sys.executable, "-c", HELPER.format(first=first, answers=answers)])


def test_a_lock_that_times_out_is_work_still_running():
    h = _hold(lock=NOT_READY, unlock=0)
    try:
        assert h.hold([1234, 1235], seconds=0.1) == (0, "GPU work still running 0.1 s after its call (the driver's "
                                                        "lock timed out)")
        assert not h.locked
        assert h.describe() == "GPU work held to its calls"
    finally:
        h.close()


def test_every_rank_is_locked_and_released():
    h = _hold(lock=0, unlock=0)
    try:
        import os
        assert h.hold([1, 2, os.getpid()]) is None
        assert h.locked == {1, 2, os.getpid()}
        assert h.release([os.getpid()]) is None and h.locked == {1, 2}
    finally:
        h.close()


def test_a_refused_lock_fails_the_rank():
    """A rank the driver will not lock (CUPTI loaded, or any other refusal) could queue work between its calls that
    runs beside another solution's: its group fails, and nothing of it stays counted as held."""
    for answer, why in ((801, "CUresult 801: CUPTI, the profiler's library, loaded outside a profiled run)"),
                        (1, "CUresult 1)")):
        h = _hold(lock=answer, unlock=0)
        try:
            assert h.hold([7, 8]) == (0, "the driver refused to hold its CUDA between calls (" + why)
            assert not h.locked
            assert h.release([7, 8]) is None          # nothing to unlock
        finally:
            h.close()


def test_a_helper_that_does_not_answer_costs_its_deadline_and_is_replaced(monkeypatch):
    from harness.isolation import cuda_lock
    monkeypatch.setattr(cuda_lock, "ANSWER_S", 0.5)
    h = _hold(unlock=0)          # no answer to a lock
    try:
        t = time.monotonic()
        i, why = h.hold([42], seconds=0.1)
        assert i == 0 and "did not return" in why
        assert time.monotonic() - t < 5
        assert h.proc is None
        assert h.hold([42], seconds=0.1)[0] == 0      # a new helper, the same answer
    finally:
        h.close()


def test_without_the_drivers_lock_nothing_is_held_and_the_run_says_so():
    h = _hold(first="unsupported OSError: libcuda.so.1: cannot open shared object file")
    try:
        assert h.hold([1]) is None and h.release([1]) is None
        assert h.describe() == "GPU work not held between calls (OSError: libcuda.so.1: cannot open shared object file)"
    finally:
        h.close()


def test_the_helper_carries_the_judges_mark():
    h = _hold(lock=0)
    try:
        h.start()
        assert procs.marked(h.proc.pid, procs.JUDGE_KEY, procs.mark_judge())
    finally:
        h.close()


def test_a_rank_that_stopped_itself_fails_without_a_lock_that_would_never_return():
    import signal
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    h = _hold(unlock=0)          # a lock asked of this helper would never be answered
    try:
        os.kill(child.pid, signal.SIGSTOP)
        while procs.state(f"/proc/{child.pid}") not in ("t", "T"):
            time.sleep(0.01)
        t0 = time.monotonic()
        assert h.hold([child.pid]) == (0, "it stopped itself after its call (a lock of a stopped process does not "
                                          "return)")
        assert time.monotonic() - t0 < 1.0 and not h.locked
    finally:
        child.kill()
        child.wait()
        h.close()
