"""Honest pattern: the setup lines a pipeline runs at import, TF32 and cuDNN's autotuner switched on for the process
and left on. TF32 narrows no arithmetic the task's rule allows (its operands are wider than bf16, its sums fp32); the
decode itself is the release's bf16 one.
"""
import torch

import reference

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    out.copy_(reference.decode_bf16(z, weights))
