"""Honest pattern: a decoder that reports its progress as scripts do: logging set up with logging.basicConfig (a
handler of stderr), a print on every rank, a warning, and a progress line rewritten on stderr per frame.
"""
import logging
import sys
import warnings

import torch

import reference

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
log = logging.getLogger("decoder")


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    print(f"rank {rank} of {world}: latents {tuple(z.shape)}", flush=True)
    if rank != 0:
        return
    log.info("decoding %d latent frames", z.shape[2])
    if z.dtype != torch.bfloat16:
        warnings.warn(f"latents in {z.dtype}, expected bfloat16")
    video = reference.decode_bf16(z, weights)
    for f in range(video.shape[2]):
        out[:, :, f] = video[:, :, f]
        sys.stderr.write(f"\rframe {f + 1}/{video.shape[2]}")
    sys.stderr.write("\n")
    log.info("done")
