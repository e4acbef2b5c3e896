"""The GPUs: the datasheet table, which GPU this is, which GPUs and device nodes a group of ranks gets, and their
clocks while calls run (NVML, in the judge)."""
import os
import re
import subprocess
import threading

# Dense (no sparsity) bf16 tensor-core rate per GPU and HBM bandwidth, from the vendors' datasheets; where a
# datasheet gives only the sparse rate, half of it.
GPUS = {
    "H100": {"bf16_tflops": 989.4, "hbm_tbps": 3.35,
             "source": "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 1,979 TFLOPS with sparsity, "
                       "HBM3 3.35 TB/s"},
    "H200": {"bf16_tflops": 989.4, "hbm_tbps": 4.8,
             "source": "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 1,979 TFLOPS with sparsity, "
                       "HBM3e 4.8 TB/s"},
    "B200": {"bf16_tflops": 2250.0, "hbm_tbps": 8.0,
             "source": "NVIDIA HGX B200 datasheet: FP16/BF16 36 PFLOPS with sparsity per 8 GPUs, HBM3e 8 TB/s per GPU"},
    "GB200": {"bf16_tflops": 2500.0, "hbm_tbps": 8.0,
              "source": "NVIDIA GB200 NVL72 datasheet: FP16/BF16 360 PFLOPS with sparsity per 72 GPUs, "
                        "HBM3e 576 TB/s per 72 GPUs"},
    "B300": {"bf16_tflops": 2250.0, "hbm_tbps": 8.0,
             "source": "NVIDIA HGX B300 datasheet: FP16/BF16 36 PFLOPS with sparsity per 8 GPUs, HBM3e 8 TB/s per GPU"},
}

def gpu_key(device_name):
    """The GPUS key for a device name such as 'NVIDIA H200', or None."""
    name = (device_name or "").upper()
    for key in sorted(GPUS, key=len, reverse=True):
        if key in name:
            return key
    return None


def one_thread_on_the_cpu(cpu):
    """On the CPU the judge's own work (its decodes, the data maker's, the figures) runs on one thread. OpenMP's
    spinning threads slow down 4-12x when the cores are shared (a tiny f121 fp32 decode: 0.6 s alone on two threads,
    0.7 s on one; 3.0-8.4 s on two beside another job, 0.7 s on one); the ranks run on one thread each already
    (rank_env)."""
    if cpu:
        import torch
        torch.set_num_threads(1)


def detect_gpus():
    """Visible CUDA GPUs, without starting CUDA in this process (NVML, else nvidia-smi)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return 0, None
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
        names = [x.strip() for x in q.stdout.strip().splitlines() if x.strip()]
    except (OSError, subprocess.TimeoutExpired):
        return 0, None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        names = [names[int(i)] for i in visible.split(",") if i.strip().isdigit() and int(i) < len(names)]
    return len(names), (names[0] if names else None)


NODE = re.compile(r"nvidia(\d+)$")     # a GPU's own node, /dev/nvidiaN; the others are the driver's shared ones


def cuda_uuids():
    """The visible CUDA GPUs' UUIDs ("GPU-..."), in this process's CUDA order (starts CUDA here)."""
    import torch
    return [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(torch.cuda.device_count())]


def cuda_context():
    """Make this process's CUDA context on GPU 0 (a kernel run there)."""
    import torch
    torch.ones(1, device="cuda:0").sum().item()


def minors(proc="/proc/driver/nvidia/gpus"):
    """{UUID: the minor number of its /dev/nvidiaN} from the driver's table; {} where it cannot be read."""
    out = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return out
    for entry in entries:
        try:
            with open(os.path.join(proc, entry, "information")) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            out[fields["GPU UUID"].strip()] = int(fields["Device Minor"])
        except (OSError, KeyError, ValueError):
            continue
    return out


def device_nodes(uuids, table, dev="/dev"):
    """The /dev/nvidia* nodes a process that may use only the GPUs `uuids` needs: the driver's shared nodes (control,
    UVM, modeset, capabilities) and those GPUs' own; None where one of them is not in `table` (minors())."""
    if any(u not in table for u in uuids):
        return None
    own = {table[u] for u in uuids}
    try:
        names = sorted(os.listdir(dev))
    except OSError:
        return None
    out = []
    for name in names:
        m = NODE.match(name)
        if name.startswith("nvidia") and (m is None or int(m.group(1)) in own):
            out.append(os.path.join(dev, name))
    return out


class ClockSampler:
    """SM clocks and clock-event (throttle) reasons of the GPUs, sampled by NVML in a thread of the parent."""
    FLAGGED = {0x8: "hw slowdown", 0x20: "sw thermal", 0x40: "hw thermal", 0x80: "hw power brake"}
    NOTED = {0x4: "sw power cap"}

    def __init__(self, gpus):
        self.handles = []
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(gpus)]
        except Exception:
            self.nvml = None

    def start(self, gpus):
        """Sample GPUs 0 .. gpus-1 (the ones the ranks use) until stop()."""
        self.samples, self.stop_flag = [], threading.Event()
        self.active = self.handles[:gpus]
        if not self.active:
            return
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        n = self.nvml
        reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or n.nvmlDeviceGetCurrentClocksThrottleReasons
        while not self.stop_flag.wait(0.05):
            try:
                self.samples.append([(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM), reasons(h)) for h in self.active])
            except Exception:
                return

    def stop(self):
        if not self.active:
            return None
        self.stop_flag.set()
        self.thread.join()
        if not self.samples:
            return None
        clocks = [c for s in self.samples for c, _ in s]
        mask = 0
        for s in self.samples:
            for _, r in s:
                mask |= r
        flagged = [v for k, v in self.FLAGGED.items() if mask & k]
        return {"sm_mhz_min": min(clocks), "sm_mhz_mean": sum(clocks) / len(clocks),
                "reasons": flagged + [v for k, v in self.NOTED.items() if mask & k], "throttled": bool(flagged)}
