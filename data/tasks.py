"""The data maker's decodes as tasks on workers: one worker per visible GPU (a spawned process each), or simulated
workers on the CPU (threads of this process), running the same loop.

A task is one band of a source's fp32 decode ("fp32"; data/bands.py; a single band is the whole decode), a source's
release bf16 decode ("bf16"), or the finishing of a source once its decodes are done ("finish": the calibration and
its refs, on the host worker, a thread of this process, so that no GPU waits for files). A decode writes its video
straight into a scratch file of the whole video (memory-mapped; each band its own rows or columns), so no video
travels through a pipe.

plan() splits each source's fp32 decode into the number of bands (1 to the number of workers) that gives the
shortest estimated run: work counted in FLOPs (bands.flops, halos included; a bf16 FLOP as BF16_COST fp32 FLOPs),
tasks handed out in order (longest source first; its bands, then its bf16 decode) to whichever worker is free,
which is what execute() does. Sources thus finish in order, the shortest last, so the finishing after the last decode
is the smallest one. With one worker every decode is whole, the plain reference decode.
"""
import dataclasses
import itertools
import queue
import threading
import traceback

import torch

import spec
from data import bands as bands_module, decode

# A bf16 FLOP costs this many fp32 FLOPs: the reference's rates on the H200 (docs/perf-notes.md), 345 TFLOP/s in bf16
# (f121x1) and 27.8 TFLOP/s in fp32 with TF32 off (the data set's f481 decode). Only estimates use it.
BF16_COST = 27.8 / 345


@dataclasses.dataclass(frozen=True)
class Task:
    id: int
    kind: str                    # "fp32", "bf16" or "finish"
    source: str
    latent_frames: int
    band: bands_module.Band = None   # fp32: the band it decodes
    latents: str = ""            # decodes: the latents file (its first latent_frames frames)
    video: str = ""              # decodes: the scratch file of the whole video that it writes its band of
    cost: tuple = (0.0,)         # decodes: the work done after each latent frame (see BF16_COST)
    extra: dict = dataclasses.field(default_factory=dict)   # finish: what it reads (decode.finish)

    def label(self):
        part = {"fp32": "fp32", "bf16": "bf16", "finish": "refs"}[self.kind]
        band = self.band.label() if self.band is not None else ""
        return f"{self.source} {part}" + (f" {band}" if band else "")


def cost(kind, latent_frames, band, geometry):
    """A decode task's `cost`: its work after each of its latent frames."""
    if kind == "fp32":
        return (0.0, *(bands_module.flops(i, band, geometry) for i in range(1, latent_frames + 1)))
    return (0.0, *(BF16_COST * spec.decode_flops(i, geometry) for i in range(1, latent_frames + 1)))


def makespan(costs, workers):
    """The estimated run of tasks of these costs, handed out in order to whichever of `workers` is free first."""
    load = [0.0] * workers
    for c in costs:
        k = load.index(min(load))
        load[k] += c
    return max(load)


def plan(jobs, workers, geometry, axis=bands_module.COLUMNS, bands=None):
    """The jobs ({"source", "latent_frames"}) longest first, each with the bands of its fp32 decode: the split
    (1 to `workers` bands per source, or `bands` for every source) with the shortest makespan, then the least work."""
    jobs = sorted(jobs, key=lambda j: -j["latent_frames"])
    extent = geometry.latent_hw[axis - 3]
    choices = [[bands] for _ in jobs] if bands else [range(1, min(workers, extent) + 1) for _ in jobs]
    best = None
    for counts in itertools.product(*choices):
        costs = []
        for job, n in zip(jobs, counts):
            t = job["latent_frames"]
            costs += [bands_module.flops(t, b, geometry) for b in bands_module.split(extent, n, axis)]
            costs.append(BF16_COST * spec.decode_flops(t, geometry))
        key = (makespan(costs, workers), sum(costs))
        if best is None or key < best[0]:
            best = (key, counts)
    return [(job, bands_module.split(extent, n, axis)) for job, n in zip(jobs, best[1])]


def _serve(label, device, context, inbox, outbox):
    """A worker: runs the tasks from its inbox (None ends it), each one's messages and then ("done", label, task id,
    info) to the outbox; ("failed", label, traceback) if one raises."""
    try:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        state = {}
        while (task := inbox.get()) is not None:
            info = decode.run(task, device, context, state, outbox.put)
            outbox.put(("done", label, task.id, info))
    except BaseException:  # noqa: B036 (reported, and the worker ends)
        outbox.put(("failed", label, traceback.format_exc()))


class _Workers:
    """One worker per device (processes for GPUs, threads on the CPU) and the host worker (a thread)."""

    def __init__(self, devices, context):
        cuda = devices[0].type == "cuda"
        if cuda:
            import torch.multiprocessing as mp
            ctx = mp.get_context("spawn")
            self.outbox = ctx.Queue()
            make_queue, make_worker = ctx.Queue, ctx.Process
            self.labels = [str(d) for d in devices]
        else:
            self.outbox = queue.Queue()
            make_queue, make_worker = queue.Queue, threading.Thread
            self.labels = [f"cpu{i}" for i in range(len(devices))]
        self.inboxes = {label: make_queue() for label in self.labels}
        self.inboxes["host"] = queue.Queue()
        self.workers = {label: make_worker(target=_serve, args=(label, d, context, self.inboxes[label], self.outbox),
                                           daemon=True) for label, d in zip(self.labels, devices)}
        self.workers["host"] = threading.Thread(target=_serve, daemon=True, args=(
            "host", torch.device("cpu"), context, self.inboxes["host"], self.outbox))
        for w in self.workers.values():
            w.start()

    def check_alive(self):
        for label, w in self.workers.items():
            if not w.is_alive():
                code = getattr(w, "exitcode", None)
                raise RuntimeError(f"worker {label} ended unexpectedly" + (f" (exit code {code})" if code else ""))

    def close(self, failed):
        for label, w in self.workers.items():
            if failed and hasattr(w, "terminate"):
                w.terminate()
            elif w.is_alive():
                self.inboxes[label].put(None)
        for w in self.workers.values():
            w.join(timeout=60)


def execute(tasks, devices, context, handle):
    """Run the decode `tasks` (in order, each to whichever device's worker is free) and the finish tasks that handle()
    returns (on the host worker). handle(message) gets every message: ("start", worker, task), a task's own
    messages (("progress", task id, latent frames done), ...) and ("done", worker, task, info); it returns new tasks
    or None. context: what every worker needs (decode.run). Several CPU workers run one thread each."""
    waiting, finishing = list(tasks), []
    by_id = {t.id: t for t in tasks}
    threads = torch.get_num_threads()
    if devices[0].type == "cpu" and len(devices) > 1:
        torch.set_num_threads(1)
    pool, failed = _Workers(devices, context), True
    idle = set(pool.labels) | {"host"}
    try:
        while waiting or finishing or len(idle) <= len(pool.labels):
            for label in sorted(idle):
                todo = finishing if label == "host" else waiting
                if todo:
                    task = todo.pop(0)
                    idle.discard(label)
                    pool.inboxes[label].put(task)
                    handle(("start", label, task))
            try:
                msg = pool.outbox.get(timeout=1.0)
            except queue.Empty:
                pool.check_alive()
                continue
            if msg[0] == "failed":
                raise RuntimeError(f"worker {msg[1]} failed:\n{msg[2]}")
            if msg[0] == "done":
                idle.add(msg[1])
                msg = ("done", msg[1], by_id[msg[2]], msg[3])
            for t in handle(msg) or ():
                by_id[t.id] = t
                (finishing if t.kind == "finish" else waiting).append(t)
        failed = False
    finally:
        pool.close(failed)
        torch.set_num_threads(threads)
