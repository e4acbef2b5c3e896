"""What a CUDA IPC memory handle holds: could a rank of one group name another group's buffer without being given
its handle? Two processes each allocate three buffers (as the judge lends them: each alone in its allocation) and
print their handles; a third process, under a user of its own (harness/isolation/users.py), opens one of the first's
handles as given, then the second's with the first's pid in place of its own."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

MAKE = """
import sys, time, torch
sys.path.insert(0, %r)
from harness.judge import cuda_ipc
ts = [torch.zeros(16 << 20, dtype=torch.bfloat16, device="cuda") + i for i in range(3)]
torch.cuda.synchronize()
print(" ".join(cuda_ipc.handle(t).hex() for t in ts), flush=True)
sys.stdin.read()
""" % ROOT

OPEN = """
import sys, torch
sys.path.insert(0, %r)
from harness.isolation import users
from harness.judge import cuda_ipc
users.become(int(sys.argv[1]), [])
for blob in sys.argv[2:]:
    try:
        t = cuda_ipc.open_handle(bytes.fromhex(blob), 16 << 20, torch.device("cuda", 0))
        print("opened, first value", float(t[0]), flush=True)
    except Exception as e:
        print("refused:", str(e)[:120], flush=True)
""" % ROOT


def main():
    from harness.isolation import users
    procs = [subprocess.Popen([sys.executable, "-c", MAKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    handles = [p.stdout.readline().split() for p in procs]
    for i, hs in enumerate(handles):
        print(f"process {i} (pid {procs[i].pid}):")
        for h in hs:
            print("  " + " ".join(h[j:j + 8] for j in range(0, 128, 8)))
    a, b = handles
    pid_hex = [p.pid.to_bytes(4, "little").hex() for p in procs]
    guesses = []
    for k in range(3):
        words_a = [a[k][j:j + 8] for j in range(0, 128, 8)]
        words_b = [b[k][j:j + 8] for j in range(0, 128, 8)]
        print(f"buffer {k}: words that differ between the processes: "
              f"{[j for j in range(16) if words_a[j] != words_b[j]]}; the exporter's pid in them: "
              f"{pid_hex[0] in a[k]}, {pid_hex[1] in b[k]}")
        guesses.append(b[k].replace(pid_hex[1], pid_hex[0]))     # process 1's handle with process 0's pid
    uid = users.Users().take()
    out = subprocess.run([sys.executable, "-c", OPEN, str(uid), a[1]] + guesses, capture_output=True, text=True,
                         timeout=120)
    print("a rank of another user opening process 0's handle 1 as given, then process 1's handles 0-2 with process "
          "0's pid in place of its own (values 0, 1, 2 would be process 0's buffers):")
    print(out.stdout, out.stderr[-1000:])
    for p in procs:
        p.stdin.close()
        p.wait()


if __name__ == "__main__":
    main()
