"""The references of a make: the sources' decodes as tasks on the workers (data/tasks.py), each source's scratch video
files in the data folder, and per source, once its decodes are done, its finishing (refs and calibration entries,
data/decode.py's finish), whose results the maker records as they come."""
import contextlib
import itertools
import os
import time

import torch

from data import decode, store, tasks


def devices(geometry, given=None):
    """The workers' devices: `given`, else every visible GPU for the full geometry, else the CPU (one worker)."""
    if given is not None:
        return [torch.device(d) for d in given]
    if geometry.name == "full" and torch.cuda.is_available():
        return [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return [torch.device("cpu")]


def decode_tasks(ids, source, latent_frames, split, latents, files, geometry):
    """The tasks of one source: its fp32 decode in the bands of `split` into files["fp32"], then its bf16 decode into
    files["bf16"] if there is one. ids: an iterator of task ids."""
    t, g = latent_frames, geometry
    out = [tasks.Task(next(ids), "fp32", source, t, band=b, latents=latents, video=files["fp32"],
                      cost=tasks.cost("fp32", t, b, g)) for b in split]
    if "bf16" in files:
        out.append(tasks.Task(next(ids), "bf16", source, t, latents=latents, video=files["bf16"],
                              cost=tasks.cost("bf16", t, None, g)))
    return out


def scratch_files(folder, name, latent_frames, geometry, kinds=("fp32", "bf16")):
    """{kind: path} of new scratch video files (fp32 and bf16) of a decode of latent_frames frames."""
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    return {k: store.scratch(os.path.join(folder, f"{store.TMP_PREFIX}{name}.{k}"),
                             decode.video_shape(latent_frames, geometry), dtypes[k]) for k in kinds}


def make(jobs, geometry, root, weights_from, devices, bands, out, on_ref, on_calibration):
    """Decode the jobs ({"source", "latent_frames", "clips"}) and write their refs: on_ref(clip, {"size", "sha256"})
    after each ref file, on_calibration({clip: entry}) after each source. out: the maker's Display."""
    g, ids = geometry, itertools.count()
    todo, sources, records = [], {}, []
    try:
        for job, split in tasks.plan(jobs, len(devices), g, bands=bands):
            s, t = job["source"], job["latent_frames"]
            files = scratch_files(root, s, t, g)
            mine = decode_tasks(ids, s, t, split, os.path.join(root, f"latents_{s}.pt"), files, g)
            sources[s] = {"job": job, "files": files, "left": {x.id for x in mine}, "runs": []}
            if len(split) > 1:
                out.note(f"{s}: the fp32 decode in {len(split)} bands ({', '.join(b.label() for b in split)})")
            todo += mine

        def handle(msg):
            out.show(msg)
            if msg[0] == "ref":
                on_ref(msg[1], msg[2])
            elif msg[0] == "calibration":
                on_calibration(msg[2])
            elif msg[0] == "done":
                _, worker, task, info = msg
                if task.kind != "finish":
                    records.append((task, worker, info))
                    return finishing(task, info)
            return None

        def finishing(task, info):
            """The source's finish task once this was its last decode."""
            src = sources[task.source]
            src["left"].discard(task.id)
            src["runs"].append((task, info))
            if src["left"]:
                return None
            runs = sorted(src["runs"], key=lambda r: r[0].id)
            extra = {"root": root, "clips": src["job"]["clips"], **src["files"],
                     "fp32_runs": [i for t, i in runs if t.kind == "fp32"],
                     "bf16_run": next(i for t, i in runs if t.kind == "bf16")}
            return [tasks.Task(next(ids), "finish", task.source, task.latent_frames, extra=extra)]

        start = time.perf_counter()
        out.start(todo)
        try:
            tasks.execute(todo, devices, {"weights_from": weights_from, "geometry": g}, handle)
        finally:
            out.stop()
        out.task_table(records, g, time.perf_counter() - start)
    finally:
        for src in sources.values():
            for path in src["files"].values():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
