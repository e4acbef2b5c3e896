"""Honest pattern: the setup lines a script runs at import, left on for the process: TF32 and cuDNN's autotuner
switched on, the float32 matmul precision lowered to use TF32, bf16 as the default dtype, this rank's GPU as the
default device, autograd off, warnings silenced. TF32 narrows no arithmetic the task's rule allows (its operands are wider than bf16, its sums fp32); the
decode itself is the release's bf16 one.
"""
import warnings

import torch

import reference

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")
torch.set_default_dtype(torch.bfloat16)
torch.set_default_device("cuda" if torch.cuda.is_available() else "cpu")
torch.set_grad_enabled(False)
warnings.filterwarnings("ignore")


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    out.copy_(reference.decode_bf16(z, weights))
