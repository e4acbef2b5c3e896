"""harness/isolation/ipc.py: the System V objects made after a snapshot are found and removed (through the whole
pipeline: tests/trust/test_trust.py's keeps_state_in_sysv)."""
import subprocess
import sys


def test_the_judge_removes_the_system_v_objects_made_after_a_snapshot():
    from harness.isolation import ipc
    before = ipc.snapshot()
    made = subprocess.run([sys.executable, "-c", "import ctypes; l = ctypes.CDLL(None); "
                           "print(l.shmget(0, 4096, 0o1600), l.semget(0, 1, 0o1600), l.msgget(0, 0o1600))"],
                          capture_output=True, text=True, timeout=60).stdout.split()
    assert all(int(i) >= 0 for i in made)
    assert {i for _, i in ipc.snapshot() - before} == {int(i) for i in made}
    removed = ipc.remove_new(before)
    assert sorted(k for k, _ in removed) == ["msg", "sem", "shm"] and ipc.snapshot() <= before
