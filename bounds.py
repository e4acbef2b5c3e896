"""The roofline: the fastest any solution could decode a workload on a given GPU.

Lower bound of one call = max(compute time, memory time), with the decode's FLOPs divided over the world's GPUs at
the dense bf16 peak and the bytes that must move (video written, weights read; spec.bounds) at the HBM bandwidth.
bench.py's roofline column and its plausibility floor use `bound` from here: one implementation.
"""
import spec

# Dense (no sparsity) bf16 tensor-core rate and HBM bandwidth, from the vendors' datasheets (SXM parts).
GPUS = {
    "H100": {"bf16_tflops": 989.4, "hbm_tbps": 3.35, "source": "NVIDIA H100 Tensor Core GPU datasheet (SXM5)"},
    "H200": {"bf16_tflops": 989.4, "hbm_tbps": 4.8, "source": "NVIDIA H200 Tensor Core GPU datasheet (SXM)"},
    "B200": {"bf16_tflops": 2250.0, "hbm_tbps": 8.0, "source": "NVIDIA DGX B200 datasheet, per GPU"},
    "GB200": {"bf16_tflops": 2500.0, "hbm_tbps": 8.0, "source": "NVIDIA GB200 NVL72 datasheet, per GPU"},
    "B300": {"bf16_tflops": 2250.0, "hbm_tbps": 8.0, "source": "NVIDIA Blackwell Ultra (HGX B300) datasheet, per GPU"},
}


def gpu_key(device_name):
    """The GPUS key for a device name such as 'NVIDIA H200', or None."""
    name = (device_name or "").upper()
    for key in sorted(GPUS, key=len, reverse=True):
        if key in name:
            return key
    return None


def bound(workload, gpu="H200", geometry=spec.FULL, peaks=None):
    """{"flops", "bytes", "gpus", "flops_per_gpu", "intensity", "compute_s", "memory_s", "bound_s", "binds"}."""
    b = spec.bounds(workload, geometry)
    p = peaks or GPUS[gpu]
    per_gpu = b["flops"] / b["gpus"]
    compute = per_gpu / (p["bf16_tflops"] * 1e12)
    memory = b["bytes"] / (p["hbm_tbps"] * 1e12)
    return {**b, "flops_per_gpu": per_gpu, "intensity": per_gpu / b["bytes"], "compute_s": compute,
            "memory_s": memory, "bound_s": max(compute, memory), "binds": "compute" if compute >= memory else "memory"}
