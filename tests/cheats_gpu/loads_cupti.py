"""Cheat (GPU work outside its calls): loads CUPTI, which the driver's process lock refuses, then leaves seconds of
matmuls queued after each call, to run beside the next solution's call while this one is frozen."""
import threading
import time

import torch
from torch.profiler import ProfilerActivity, profile

import reference

_prof = profile(activities=[ProfilerActivity.CUDA])
_prof.start()           # CUPTI loaded and subscribed in this process from here on


def _queue():
    time.sleep(0.2)               # past the rank's synchronise and its `done`
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(300):          # about 4 s on an H200, not waited for
        a = a @ a / 8192


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
    threading.Thread(target=_queue, daemon=True).start()
