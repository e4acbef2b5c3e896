"""Does a group's memory cgroup (harness/isolation/cgroup.py) count what CUDA holds in host memory? A child in a jail
capped at CAP GiB makes its CUDA context, then pins host memory (torch's pinned allocator: cudaHostAlloc) and pageable
memory, and reports the cgroup's usage after each step; then it pins more than the cap. Run as root on a GPU machine."""
import os
import subprocess
import sys

CAP = 8 << 30
CHILD = r"""
import sys, torch
def usage():
    return int(open(sys.argv[1]).read()) / 2**30
print(f"start {usage():.2f} GiB", flush=True)
torch.empty(1, device="cuda")
print(f"CUDA context {usage():.2f} GiB", flush=True)
a = torch.ones(1 << 29, dtype=torch.int16, pin_memory=True)          # 1 GiB pinned
print(f"+1 GiB pinned {usage():.2f} GiB", flush=True)
b = torch.ones(1 << 29, dtype=torch.int16)                           # 1 GiB pageable
print(f"+1 GiB pageable {usage():.2f} GiB", flush=True)
c = torch.ones(6 << 29, dtype=torch.int16, pin_memory=True)          # 6 GiB more pinned: past the 8 GiB cap
print(f"+6 GiB pinned {usage():.2f} GiB (not ended)", flush=True)
"""


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    os.environ["WAN_GROUP_MEMORY"] = str(CAP)
    from harness.isolation import cgroup
    j = cgroup.Cgroup.make(f"wan-{os.getpid()}-probe-memory")
    print("jail", j and j.path, "memory group", j and j.memory, "cap GiB", j and j.memory_cap and j.memory_cap / 2**30)
    if j is None or j.memory_cap is None:
        return
    usage = os.path.join(j.memory, "memory.usage_in_bytes") if j.memory else os.path.join(j.path, "memory.current")
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-c", f"import os; os.read({r}, 1); exec({CHILD!r})", usage],
                         pass_fds=(r,))
    j.add(p.pid)
    os.write(w, b"x")
    code = p.wait(timeout=300)
    print("child exit", code, "oom kills", j.oom_kills())
    j.kill()
    j.remove()


if __name__ == "__main__":
    main()
