"""`python -m data.make --check`: the fp32 decode split into bands against the whole decode, on this machine.

Decodes synthetic latents of CHECK_FRAMES latent frames (seed 0's weights and latents; nothing of the data set is read
or written) twice through the data maker's own tasks and workers: whole, and in max(2, workers) bands spread over the
workers. It passes when max|d| is within bands.tolerance and the fp16 roundings of the two (what the refs store) are
identical in at least MIN_FP16_IDENTICAL of the elements. On GPUs: the full geometry over every visible GPU; without
one, or with --tiny: the tiny geometry over two simulated workers on the CPU (one thread each).
"""
import itertools
import tempfile

import torch
from rich import box
from rich.table import Table

from data import bands, decode, refs, store, synth, tasks
from data.display import Display

CHECK_FRAMES = 3          # the first latent frame, the time convs' first run, and a frame with every cache full
MIN_FP16_IDENTICAL = 0.9999


def compare(whole, split):
    """{"max_abs", "tolerance", "fp16_identical" (a fraction), "fp16_differ" (a count)} of two decodes."""
    differ = (whole.to(torch.float16) != split.to(torch.float16)).sum().item()
    return {"max_abs": (whole - split).abs().max().item(), "tolerance": bands.tolerance(whole),
            "fp16_identical": 1 - differ / whole.numel(), "fp16_differ": differ}


def passed(figures):
    return figures["max_abs"] <= figures["tolerance"] and figures["fp16_identical"] >= MIN_FP16_IDENTICAL


def run(geometry, devices, out=None, frames=CHECK_FRAMES, seed=0, axis=bands.COLUMNS):
    """Decode whole and split on `devices`; print and return compare()'s figures with "bands" and "devices"."""
    out = out or Display()
    g, n = geometry, max(2, len(devices))
    extent = g.latent_hw[axis - 3]
    with tempfile.TemporaryDirectory(prefix="data-check-") as tmp:
        weights, latents = f"{tmp}/weights.pt", f"{tmp}/latents.pt"
        store.save_torch([w.to(torch.bfloat16) for w in synth.weights(g, seed)], weights)
        store.save_torch({"latents": synth.latents(g, seed, "check", frames)}, latents)
        ids, files, todo = itertools.count(), {}, []
        for name, count in (("whole", 1), ("split", n)):
            files[name] = refs.scratch_files(tmp, name, frames, g, kinds=("fp32",))["fp32"]
            todo += refs.decode_tasks(ids, name, frames, bands.split(extent, count, axis), latents,
                                      {"fp32": files[name]}, g)

        where = ", ".join(map(str, devices)) if devices[0].type == "cuda" else f"{len(devices)} simulated CPU workers"
        out.note(f"checking the band split: {frames} latent frames of the {g.name} geometry, whole and in {n} bands, "
                 f"on {where}")
        out.start(todo, "the check")
        try:
            tasks.execute(todo, devices, {"weights_from": ("bf16", weights), "geometry": g}, out.show)
        finally:
            out.stop()
        shape = decode.video_shape(frames, g)
        figures = compare(*(store.mapped(files[k], shape, torch.float32) for k in ("whole", "split")))
    figures.update(bands=n, devices=len(devices))
    table = Table(title="the fp32 decode in bands against the whole decode", box=box.SIMPLE_HEAD, padding=(0, 1),
                  pad_edge=False, collapse_padding=True)
    for col in ("geometry", "T", "bands", "max|d|", "bound", "fp16 identical", "verdict"):
        table.add_column(col, justify="left" if col in ("geometry", "verdict") else "right", no_wrap=True)
    table.add_row(g.name, str(frames), str(n), f"{figures['max_abs']:.2e}", f"{figures['tolerance']:.2e}",
                  f"{100 * figures['fp16_identical']:.4f}% ({figures['fp16_differ']} differ)",
                  "ok" if passed(figures) else "FAILED")
    out.console.print(table)
    if not passed(figures):
        out.note(f"FAILED: the bands must be within the bound and their fp16 roundings identical in at least "
                 f"{100 * MIN_FP16_IDENTICAL:g}% of the elements")
    return figures
