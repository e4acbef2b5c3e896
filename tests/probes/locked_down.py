"""A probe, not a solution to time: the reference decode, failing unless its rank is locked down beyond Landlock (no
capabilities, the seccomp filter, an IPC namespace of its own: harness/syscalls.py, harness/ipc.py). The test that
runs it copies it into a folder as solution.py, beside host_ipc: the judge's IPC namespace."""
import os
import resource

import reference


def _check():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    problems = []
    if int(status["CapEff"].strip(), 16):
        problems.append(f"capabilities {status['CapEff'].strip()}")
    if status.get("Seccomp", "").strip() != "2":
        problems.append(f"seccomp mode {status.get('Seccomp', '?').strip()}")
    host = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_ipc")).read().strip()
    if str(os.stat("/proc/self/ns/ipc").st_ino) == host:
        problems.append("the judge's IPC namespace")
    try:
        resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)
        problems.append("the judge's limits reachable")
    except PermissionError:
        pass
    try:
        os.setxattr(__file__, "user.probe", b"1")
        problems.append("setxattr allowed")
    except OSError as e:
        if e.errno != 1:
            problems.append(f"setxattr failed with errno {e.errno}, not EPERM")
    if problems:
        raise RuntimeError("not locked down: " + "; ".join(problems))


def prepare(weights, rank, world, pg):
    _check()
    return list(weights)


def run(z, weights, rank, world, pg, out):
    _check()
    reference.run(z, weights, rank, world, pg, out)
