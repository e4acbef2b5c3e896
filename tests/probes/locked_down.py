"""A probe, not a solution to time: the reference decode, failing unless its rank is locked down beyond Landlock (a
user of its own holding CAP_DAC_READ_SEARCH alone, or no capabilities where the judge cannot make users; the seccomp
filter; on the CPU and at world 1 IPC and network namespaces of their own: harness/isolation/users.py,
harness/isolation/seccomp.py, harness/isolation/ipc.py) and reaches no GPU outside its group's (CUDA's count, a child
with CUDA_VISIBLE_DEVICES undone, the device nodes), nor, under a user of its own, a root service's unix socket
(Landlock does not cover connect(); the socket file's mode does). The test that runs it copies it into a folder as
solution.py, beside host_ipc and host_net (the judge's namespaces), users ("1" where the judge can make users) and,
where the test runs one, service (the path of a root service's socket)."""
import getpass
import os
import resource
import subprocess
import sys

import torch

import reference

CHILD = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"


def _gpus(world, child):
    """What this rank, and with `child` a process it starts, can reach of the machine's GPUs: problems found."""
    problems = []
    if torch.cuda.device_count() != world:
        problems.append(f"CUDA shows {torch.cuda.device_count()} GPUs at world {world}")
    opened = []
    for minor in range(256):        # the rank may not list /dev: each GPU's node by name
        try:
            os.close(os.open(f"/dev/nvidia{minor}", os.O_RDWR))
            opened.append(minor)
        except OSError:
            pass
    if len(opened) > world:
        problems.append(f"opened the nodes of GPUs {opened} at world {world}")
    if child:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        seen = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
        count = int(seen.stdout.split()[-1]) if seen.returncode == 0 and seen.stdout.split() else 0
        if count > world:
            problems.append(f"a child without CUDA_VISIBLE_DEVICES uses {count} GPUs at world {world}")
    return problems


def _check(world, gpu, child=False):
    whole = not gpu or world == 1          # the whole lock: on the CPU, and on GPUs at world 1
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    problems = []
    own = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "users")).read().strip() == "1"
    caps = int(status["CapEff"].strip(), 16)
    if caps != (1 << 2 if own else 0):     # CAP_DAC_READ_SEARCH alone under a user of its own
        problems.append(f"capabilities {status['CapEff'].strip()}")
    if own and (0 in os.getresuid() or 0 in os.getresgid() or 0 in os.getgroups()):
        problems.append(f"ids {os.getresuid()}, {os.getresgid()}, groups {os.getgroups()}: the judge's user")
    if not os.access(os.environ["TMPDIR"], os.W_OK | os.X_OK):     # access() ignores capabilities: gcc's test
        problems.append("its scratch unreachable by access()")
    try:
        getpass.getuser()
    except Exception as e:          # torch's cache folders are named after the user
        problems.append(f"getpass.getuser() failed: {e}")
    if own:
        try:
            os.setpriority(os.PRIO_PROCESS, os.getppid(), 0)     # another user's: refused, whatever its niceness
            problems.append("the judge's priority reachable")
        except PermissionError:
            pass
    if status.get("Seccomp", "").strip() != "2":
        problems.append(f"seccomp mode {status.get('Seccomp', '?').strip()}")
    host = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_ipc")).read().strip()
    if whole and str(os.stat("/proc/self/ns/ipc").st_ino) == host:
        problems.append("the judge's IPC namespace")
    host_net = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_net")).read().strip()
    if whole and str(os.stat("/proc/self/ns/net").st_ino) == host_net:
        problems.append("the judge's network namespace")
    try:
        resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)
        problems.append("the judge's limits reachable")
    except PermissionError:
        pass
    try:
        os.setxattr(__file__, "user.probe", b"1")
        if whole:
            problems.append("setxattr allowed")
    except OSError as e:
        if e.errno != 1:
            problems.append(f"setxattr failed with errno {e.errno}, not EPERM")
    service = os.path.join(os.path.dirname(os.path.abspath(__file__)), "service")
    if own and os.path.exists(service):     # a root service's socket (mode 0600) beside the run: not its user's
        import socket
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(open(service).read().strip())
                problems.append("connected to a root service's socket")
            except PermissionError:
                pass
    if gpu:
        problems += _gpus(world, child)
    if problems:
        raise RuntimeError("not locked down: " + "; ".join(problems))


def prepare(weights, rank, world, pg):
    _check(world, weights[0].is_cuda, child=True)
    return list(weights)


def run(z, weights, rank, world, pg, out):
    _check(world, z.is_cuda)
    reference.run(z, weights, rank, world, pg, out)
