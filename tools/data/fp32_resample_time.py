"""The fp32 decode (reference.decode_fp32) with and without reference.band_exact, alternately in one process: 5
latent frames of the full geometry (seed 0's synthetic weights and latents), one untimed call of each first, then
two timed calls of each. Without band_exact the resample's conv2d is cuDNN's 2d conv and the norms F.normalize.

    python tools/data/fp32_resample_time.py
"""
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import torch  # noqa: E402

import reference  # noqa: E402
import spec  # noqa: E402
from data import synth  # noqa: E402


def main():
    g, dev = spec.FULL, torch.device("cuda")
    weights = [t.to(torch.bfloat16).float().to(dev) for t in synth.weights(g, 0)]
    z = synth.latents(g, 0, "time", 5).to(dev)
    out = torch.empty(1, 3, spec.frames(5), *g.video_hw, device=dev)
    exact = reference.band_exact

    def timed(tag):
        reference.band_exact = exact if tag == "conv3d" else contextlib.nullcontext
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        reference.decode_fp32(z, weights, out=out)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    timed("conv3d"), timed("conv2d")
    res = {"conv3d": [], "conv2d": []}
    for _ in range(2):
        for tag in res:
            res[tag].append(timed(tag))
    reference.band_exact = exact
    for tag, v in res.items():
        print(f"decode_fp32 5 latent frames, resample as {tag}: " + ", ".join(f"{x:.3f} s" for x in v))


if __name__ == "__main__":
    main()
