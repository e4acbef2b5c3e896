"""What the data maker's tasks do (data/tasks.py): a band of a source's fp32 decode (TF32 off; data/bands.py) or its
release bf16 decode, written into the source's scratch video files; then, once a source's decodes are all done, its
refs and calibration entries ("finish").

Every shorter clip of a source is a prefix of its decode (the decoder is causal). For each clip the fp32 video
rounded to fp16 is written as ref_<clip>.pt, and the release's bf16 decode is compared with that stored reference (in
fp32, over frame chunks) for calibration.json. A decode's time for a clip is its elapsed time when latent frame T of
that clip was done, summed over the fp32 decode's bands (the GPU time one GPU would have spent on them).

Messages a task sends: ("progress", task id, latent frames done), ("ref", clip, {"size", "sha256"}), ("calibration",
source, {clip: entry}).
"""
import math
import os
import time

import torch

import reference
import spec
from data import bands, checkpoint, store

CHUNK_FRAMES = 16


def load_weights32(weights_from, geometry):
    """The fp32 weights that the references decode with: ("bf16", file) -> the shipped bf16 weights upcast
    (synthetic data); ("checkpoint", file) -> the checkpoint's own fp32 values."""
    kind, path = weights_from
    if kind == "checkpoint":
        return checkpoint.load(path, geometry)
    weights = torch.load(path, map_location="cpu", weights_only=True)
    spec.check_weights(weights, geometry, where=path, dtype=torch.bfloat16)
    return [w.float() for w in weights]


def video_shape(latent_frames, geometry):
    return (1, 3, spec.frames(latent_frames), *geometry.video_hw)


def compare(ref, video, ends):
    """{end: figures} of `video` (the bf16 decode) against `ref` rounded to fp16 (the stored reference) over frames
    [0, end)."""
    n = abs_sum = sq_sum = ref_sum = ref_sq = 0.0
    max_abs, clamped, start, out = 0.0, 0, 0, {}
    for end in sorted(set(ends)):
        for s in range(start, end, CHUNK_FRAMES):
            r = ref[:, :, s:min(s + CHUNK_FRAMES, end)].to(torch.float16).float()
            d = video[:, :, s:min(s + CHUNK_FRAMES, end)].float() - r
            n += d.numel()
            abs_sum += d.abs().sum(dtype=torch.float64).item()
            sq_sum += d.square().sum(dtype=torch.float64).item()
            max_abs = max(max_abs, d.abs().max().item())
            ref_sum += r.sum(dtype=torch.float64).item()
            ref_sq += r.square().sum(dtype=torch.float64).item()
            clamped += (r.abs() >= 1).sum().item()
        start = end
        mse = sq_sum / n
        out[end] = {"bf16_max_abs": max_abs, "bf16_mean_abs": abs_sum / n, "bf16_rms": math.sqrt(mse),
                    "bf16_psnr_db": 10 * math.log10(4 / mse) if mse > 0 else math.inf,
                    "video_std": math.sqrt(max(ref_sq / n - (ref_sum / n) ** 2, 0.0)), "clamped_fraction": clamped / n}
    return out


def run(task, device, context, state, send):
    """Run one task on `device` (a worker's; `state` keeps the worker's weights from task to task). context:
    {"weights_from": load_weights32's argument, "geometry"}. Returns {"times": elapsed s after each latent frame,
    "peak": the device's peak bytes or None} for a decode."""
    g = context["geometry"]
    if task.kind == "finish":
        finish(task, g, send)
        return {}
    if "weights32" not in state:
        state["weights32"] = [w.to(device) for w in load_weights32(context["weights_from"], g)]
        state["weights16"] = [w.to(torch.bfloat16) for w in state["weights32"]]
    t = task.latent_frames
    z = torch.load(task.latents, map_location="cpu", weights_only=True, mmap=True)["latents"]
    z = z[:, :, :t].to(device=device, dtype=torch.float32).contiguous()
    cuda = device.type == "cuda"
    times, start = [0.0] * (t + 1), time.perf_counter()

    def progress(i, total):
        if cuda:
            torch.cuda.synchronize(device)
        times[i] = time.perf_counter() - start
        send(("progress", task.id, i))

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    if task.kind == "fp32":
        video = store.mapped(task.video, video_shape(t, g), torch.float32)
        bands.decode(z, state["weights32"], task.band, task.band.of(video), progress)
    else:
        video = store.mapped(task.video, video_shape(t, g), torch.bfloat16)
        reference.decode_bf16(z, state["weights16"], out=video, progress=progress)
    return {"times": times, "peak": torch.cuda.max_memory_allocated(device) if cuda else None}


def finish(task, geometry, send):
    """A source's refs and calibration entries from its decodes' scratch files, which it then removes. task.extra:
    {"root", "clips": {clip: T}, "fp32", "bf16": the scratch files, "fp32_runs": the fp32 bands' run() results,
    "bf16_run"}."""
    x, source = task.extra, task.source
    shape = video_shape(task.latent_frames, geometry)
    ref = store.mapped(x["fp32"], shape, torch.float32)
    video = store.mapped(x["bf16"], shape, torch.bfloat16)
    figures = compare(ref, video, [spec.frames(n) for n in x["clips"].values()])
    for clip, n in x["clips"].items():
        path = os.path.join(x["root"], f"ref_{clip}.pt")
        video16 = ref[:, :, :spec.frames(n)].to(torch.float16)
        store.save_torch({"video": video16, "source": source, "latent_frames": n}, path)
        send(("ref", clip, store.describe(path)))
    del ref, video
    for path in (x["fp32"], x["bf16"]):
        os.unlink(path)
    runs, bf16 = x["fp32_runs"], x["bf16_run"]
    peaks = [r["peak"] for r in runs if r["peak"] is not None]
    send(("calibration", source, {clip: {
        "source": source, "latent_frames": n, **figures[spec.frames(n)],
        "fp32_decode_s": sum(r["times"][n] for r in runs), "bf16_decode_s": bf16["times"][n], "fp32_bands": len(runs),
        "source_fp32_peak_bytes": max(peaks) if peaks else None, "source_bf16_peak_bytes": bf16["peak"]}
        for clip, n in x["clips"].items()}))
