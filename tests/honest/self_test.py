"""Honest pattern: a script's self-test at the bottom, `if __name__ == "__main__":`, that loads the weights and a
clip from the data set, times a decode and saves the video. The harness imports the module, so the block never runs;
the audit leaves it out.
"""
import torch

import reference


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    out.copy_(reference.decode_bf16(z, weights))


if __name__ == "__main__":
    import time

    import spec
    geometry = spec.TINY if not torch.cuda.is_available() else spec.FULL
    device = "cuda" if torch.cuda.is_available() else "cpu"
    weights = spec.load_weights(device, geometry)
    z, *_ = spec.make_inputs("f5x1", device, geometry)
    video = torch.empty(spec.output_shape("f5x1", geometry), dtype=torch.bfloat16, device=device)
    started = time.perf_counter()
    run(z, weights, 0, 1, None, video)
    print(f"f5x1 in {time.perf_counter() - started:.3f} s")
    torch.save(video.cpu(), "f5x1_video.pt")
