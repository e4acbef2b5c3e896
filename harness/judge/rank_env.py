"""What a rank starts with: its environment, the platform's (never the judge's own settings), the judge's import paths
(what a user installed where the judge imports it from), and its group's rendezvous (MASTER_ADDR:MASTER_PORT).

The port is found without trusting that 127.0.0.1 has one: a solution may have put every ephemeral port of it in
TIME_WAIT (bind, connect to itself, close the client side). Rank 0's store listens on every address at the port, with
SO_REUSEADDR (torch's TCPStore), so ports in TIME_WAIT do not stop it once the judge has found one; the others
connect to MASTER_ADDR."""
import os
import random
import site
import socket

import spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENV_SAFETY = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
              # torch's NCCL heartbeat monitor aborts a process whose store holds a dump signal, which another
              # group's rank can write where the store listens on the host's network (GPUs at worlds 2 and 4); the
              # judge's own deadlines end a stuck call.
              "TORCH_NCCL_ENABLE_MONITORING": "0", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0",
              # torch.compile compiles in the rank's own process: inductor's pool of compile workers would be
              # processes left running after prepare or a call, which fail the group.
              "TORCHINDUCTOR_COMPILE_THREADS": "1"}
# The environment a rank inherits (not the judge's data folder, seeds, flags).
ENV_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH")
ENV_PREFIXES = ("LC_", "NCCL_", "TRITON_", "TORCH_", "PYTORCH_", "CUBLAS", "CUDNN_", "OMP_", "MKL_", "OPENBLAS_",
                "NVIDIA_")

OTHER_ADDRESSES = 8         # 127.x.y.z tried after 127.0.0.1: on Linux the whole 127/8 is the loopback


def candidates(rng=random):
    """(address to bind, MASTER_ADDR, SO_REUSEADDR) in the order tried."""
    out = [("127.0.0.1", "127.0.0.1", False), ("", "127.0.0.1", True)]
    for _ in range(OTHER_ADDRESSES):
        addr = f"127.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        out.append((addr, addr, True))
    return out


def free_port(taken=()):
    """(MASTER_ADDR, port) that a listener can bind now, the port not in `taken` (the live groups' ports, which name
    their processes); None when no candidate has one."""
    for bind, master, reuse in candidates():
        try:
            with socket.socket() as s:
                if reuse:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((bind, 0))
                port = s.getsockname()[1]
        except OSError:
            continue
        if port not in taken:
            return master, port
    return None


def platform_env():
    """The judge's environment without its own settings: what a process of a solution starts with."""
    return {k: v for k, v in os.environ.items() if k in ENV_KEEP or k.startswith(ENV_PREFIXES)}


def import_paths():
    """The folders the judge imports packages from beyond its interpreter's own site-packages, which a rank's
    interpreter finds by itself: its PYTHONPATH's entries (`pip install --target DIR`, a checkout of a package) and
    its user site-packages (`pip install --user`: found under HOME, which a rank's is not). The repository and the
    data are never among them (a solution imports `spec` and `reference` from the judge's copy)."""
    found = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    out = []
    for p in found:
        real = os.path.realpath(p)
        if not os.path.isdir(real) or real in out:
            continue
        if any(os.path.commonpath([real, x]) in (real, x) for x in (ROOT, os.path.realpath(spec.data_dir(spec.FULL)))):
            continue
        out.append(real)
    return out


def rank_env(rank, world, port, scratch, cpu, data_dir, build_dir, pkg, addr="127.0.0.1", gpus=None,
             own_network=False):
    """A rank's environment; gpus: its group's CUDA_VISIBLE_DEVICES (the judge's GPUs 0 .. world-1, by UUID);
    own_network: the group has a network namespace of its own, whose only interface is the loopback (gloo would
    otherwise bind the host name's address, which is not there)."""
    env = platform_env()
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    if own_network:
        env.update(GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo")
    # USER and LOGNAME: a rank's user of its own has no account, and getpass.getuser() (torch's cache folders) asks
    # the environment first.
    env.update(ENV_SAFETY, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
               MASTER_ADDR=addr, MASTER_PORT=str(port), HOME=scratch, TMPDIR=scratch, USER="rank", LOGNAME="rank",
               TRITON_CACHE_DIR=os.path.join(scratch, "triton"), CUDA_CACHE_PATH=os.path.join(scratch, "nv"),
               PYTHONPATH=os.pathsep.join([pkg, *import_paths()]), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", DATA=data_dir,
               WAN_BUILD_DIR=build_dir)
    if cpu:
        # One thread a rank: OpenMP's spinning threads slow down by 10-50x when ranks share cores.
        env["OMP_NUM_THREADS"] = "1"
    return env
