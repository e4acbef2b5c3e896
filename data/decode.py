"""The reference decodes: per source clip, one fp32 decode (TF32 off) and one bf16 decode, to the longest clip that
is needed; every shorter clip of that source is a prefix of them (the decoder is causal).

For each clip the fp32 video rounded to fp16 is written as ref_<clip>.pt, and the release's bf16 decode is compared
with that stored reference (in fp32, over frame chunks, on the decode's device) for calibration.json. A decode's
time for a clip is its elapsed time when latent frame T of that clip was done.

On GPUs each visible GPU runs one worker process (spawned); sources go out longest first, each to the least loaded
GPU (with two GPUs: f481's source on one, the other two on the other). Workers write the refs themselves and send
progress, ref hashes and calibration entries to the parent through a queue. On the CPU the same work runs
in-process, one source after another. Messages: ("progress", source, kind, i, T), ("ref", clip, {"size", "sha256"}),
("calibration", source, {clip: entry}).
"""
import math
import os
import queue as queue_module
import time

import torch

import reference
import spec
from data import checkpoint, store

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


def compare(ref, video, ends):
    """{end: figures} of `video` (the bf16 decode) against `ref` (the stored fp16 reference) over frames [0, end)."""
    n = abs_sum = sq_sum = ref_sum = ref_sq = 0.0
    max_abs, clamped, start, out = 0.0, 0, 0, {}
    for end in sorted(set(ends)):
        for s in range(start, end, CHUNK_FRAMES):
            r = ref[:, :, s:min(s + CHUNK_FRAMES, end)].float()
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


def decode_source(job, z, weights32, weights16, root, send):
    """Both decodes of job["source"]'s first job["latent_frames"] latent frames (z: [1, C, >= T, h, w] on the
    device), then its clips' refs and calibration entries (job["clips"]: {clip: T})."""
    source, t, clips = job["source"], job["latent_frames"], job["clips"]
    z = z[:, :, :t].float().contiguous()
    shape = (1, 3, spec.frames(t), 16 * z.shape[3], 16 * z.shape[4])

    def timed(kind):
        times, start = [0.0] * (t + 1), time.perf_counter()

        def progress(i, total):
            if z.device.type == "cuda":
                torch.cuda.synchronize(z.device)
            times[i] = time.perf_counter() - start
            send(("progress", source, kind, i, total))
        return times, progress

    cuda = z.device.type == "cuda"

    def peak():
        return torch.cuda.max_memory_allocated(z.device) if cuda else None

    if cuda:
        torch.cuda.reset_peak_memory_stats(z.device)
    video = torch.empty(shape, dtype=torch.float32, device=z.device)
    times32, progress = timed("fp32")
    reference.decode_fp32(z, weights32, out=video, progress=progress)
    peak32 = peak()   # everything: both weight sets, z, the fp32 video and the decode's own memory
    ref = video.to(torch.float16)
    del video
    if cuda:
        torch.cuda.reset_peak_memory_stats(z.device)
    video = torch.empty(shape, dtype=torch.bfloat16, device=z.device)
    times16, progress = timed("bf16")
    reference.decode_bf16(z, weights16, out=video, progress=progress)
    peak16 = peak()
    figures = compare(ref, video, [spec.frames(n) for n in clips.values()])
    del video
    ref = ref.cpu()
    for clip, n in clips.items():
        path = os.path.join(root, f"ref_{clip}.pt")
        store.save_torch({"video": ref[:, :, :spec.frames(n)].contiguous(), "source": source, "latent_frames": n}, path)
        send(("ref", clip, store.describe(path)))
    send(("calibration", source, {clip: {"source": source, "latent_frames": n, **figures[spec.frames(n)],
                                         "fp32_decode_s": times32[n], "bf16_decode_s": times16[n],
                                         "source_fp32_peak_bytes": peak32, "source_bf16_peak_bytes": peak16}
                                  for clip, n in clips.items()}))


def assign(jobs, n):
    """Jobs over n workers, longest first, each to the least loaded worker (work ~ latent frames)."""
    plan, load = [[] for _ in range(n)], [0] * n
    for job in sorted(jobs, key=lambda j: -j["latent_frames"]):
        k = load.index(min(load))
        plan[k].append(job)
        load[k] += job["latent_frames"]
    return plan


def _run_jobs(jobs, device, weights_from, geometry, root, send):
    weights32 = [w.to(device) for w in load_weights32(weights_from, geometry)]
    weights16 = [w.to(torch.bfloat16) for w in weights32]
    for job in jobs:
        path = os.path.join(root, f"latents_{job['source']}.pt")
        z = torch.load(path, map_location="cpu", weights_only=True, mmap=True)["latents"]
        decode_source(job, z[:, :, :job["latent_frames"]].to(device), weights32, weights16, root, send)


def _worker(rank, plan, weights_from, geometry, root, queue):
    torch.cuda.set_device(rank)
    _run_jobs(plan[rank], torch.device("cuda", rank), weights_from, geometry, root, queue.put)


def run(jobs, weights_from, geometry, root, handle, device):
    """Every job's decodes on `device` ("cpu": in this process; "cuda": one worker per visible GPU), passing each
    message to handle()."""
    if device == "cpu":
        _run_jobs(sorted(jobs, key=lambda j: -j["latent_frames"]), torch.device("cpu"), weights_from, geometry, root,
                  handle)
        return
    import torch.multiprocessing as mp
    plan = [p for p in assign(jobs, torch.cuda.device_count()) if p]
    queue = mp.get_context("spawn").Queue()
    workers = mp.spawn(_worker, args=(plan, weights_from, geometry, root, queue), nprocs=len(plan), join=False)
    done = False
    while not done:
        try:
            handle(queue.get(timeout=0.2))
            continue
        except queue_module.Empty:
            pass
        done = workers.join(timeout=0)  # raises with the worker's traceback when one failed
    while True:
        try:
            handle(queue.get_nowait())
        except queue_module.Empty:
            break
