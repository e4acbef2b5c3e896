"""Honest pattern: a ThreadPoolExecutor made at import and kept for the process, as a pipeline keeps its workers.
While the main thread decodes the next latent frame, a worker unpatchifies and clamps the frames just decoded into
out; run() waits for every write before it returns. Between calls the pool's workers wait on its empty queue.
"""
from concurrent.futures import ThreadPoolExecutor, wait

import torch

import reference

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="unpatchify")


def _write(out, y, first):
    with torch.inference_mode():
        out[:, :, first:first + y.shape[2]] = reference.unpatchify(y).clamp_(-1.0, 1.0)


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    W, g = reference.named_weights(weights, z)
    x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
    caches, done, writes = {}, 0, []
    for i in range(z.shape[2]):
        y = reference.decoder(x[:, :, i:i + 1], W, caches, i == 0, g)
        writes.append(_POOL.submit(_write, out, y, done))
        done += y.shape[2]
    for w in wait(writes).done:
        w.result()
