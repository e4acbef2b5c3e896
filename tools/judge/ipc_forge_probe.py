"""Can a process open another process's GPU allocations through a forged CUDA IPC memory handle, those the other
never exported included? ipc_handle_probe.py showed that a handle names its exporter by pid (word 2) and that the
driver opened a handle with another process's pid put in; words 10 and 13 differed between one process's buffers.
Here process 0 allocates four buffers (values 1, 2, 3, 4), exports only the first, then frees the third (torch
keeps its memory); a process under a user of its own (harness/isolation/users.py) tries the exported handle with word 13
replaced by every number near it (word 10, varied first, changed nothing: every value opened the exported buffer),
and says which open and what they hold."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

MAKE = """
import sys, torch
sys.path.insert(0, %r)
from harness.judge import cuda_ipc
ts = [torch.zeros(16 << 20, dtype=torch.bfloat16, device="cuda") + i + 1 for i in range(4)]
torch.cuda.synchronize()
print(cuda_ipc.handle(ts[0]).hex(), flush=True)
del ts[2]
sys.stdin.read()
""" % ROOT

OPEN = """
import sys, torch
sys.path.insert(0, %r)
from harness.isolation import users
from harness.judge import cuda_ipc
users.become(int(sys.argv[1]), [])
base = bytes.fromhex(sys.argv[2])
first = int.from_bytes(base[52:56], "little")
for n in range(max(0, first - 24), first + 40):
    blob = base[:52] + n.to_bytes(4, "little") + base[56:]
    try:
        t = cuda_ipc.open_handle(blob, 16 << 20, torch.device("cuda", 0))
        print(f"word 13 = {n:#x}: opened, first value {float(t[0])}", flush=True)
    except Exception as e:
        print(f"word 13 = {n:#x}: refused ({str(e)[-40:]})", flush=True)
""" % ROOT


def main():
    from harness.isolation import users
    p = subprocess.Popen([sys.executable, "-c", MAKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    exported = p.stdout.readline().strip()
    print("exported:", exported)
    out = subprocess.run([sys.executable, "-c", OPEN, str(users.Users().take()), exported], capture_output=True,
                         text=True, timeout=120)
    print(out.stdout, out.stderr[-1000:])
    p.stdin.close()
    p.wait()


if __name__ == "__main__":
    main()
