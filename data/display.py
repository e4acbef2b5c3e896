"""The data maker's console: notes, one progress display for the whole set while it decodes, and the tables at the end.

The progress display's first line is the whole set: its work is the decode tasks' FLOPs (data/tasks.py's cost: each
band's convs over the spans it computes, a bf16 FLOP weighted by its cost in fp32 FLOPs), done as the workers report
latent frames, and its remaining time is rich's estimate from the rate of that work over the last minute. Under it a
line per worker: its task and latent frames.
"""
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

import spec


class Display:
    def __init__(self, console=None, bars=True):
        self.console = console or Console()
        self.bars, self.progress = bars, None
        self.tasks, self.done, self.rows, self.running, self.completed = {}, {}, {}, {}, set()

    def note(self, text):
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def start(self, tasks, title="the data set"):
        """Show the whole set's progress: `tasks` are its decodes."""
        self.tasks = {t.id: t for t in tasks}
        self.done = {t.id: 0.0 for t in tasks}
        self.total = sum(t.cost[-1] for t in tasks) or 1.0
        if not self.bars:
            return
        self.progress = Progress(TextColumn("{task.description} {task.fields[detail]}"), BarColumn(bar_width=12),
                                 TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=self.console, speed_estimate_period=60.0)
        self.whole = self.progress.add_task(f"{title}:", total=self.total, detail=f"0/{len(tasks)} decodes")
        self.progress.start()

    def show(self, msg):
        """Show one of tasks.execute's messages ("start", "progress", "done"); others are the caller's."""
        kind = msg[0]
        if kind == "start":
            self.begin(msg[1], msg[2])
        elif kind == "progress":
            self.advance(msg[1], msg[2])
        elif kind == "done":
            self.finished(msg[1], msg[2])

    def begin(self, worker, task):
        self.running[task.id] = worker
        if self.progress is None:
            return
        if worker not in self.rows:
            self.rows[worker] = self.progress.add_task("", total=None, detail="")
        frames = task.latent_frames if task.kind != "finish" else None
        self.progress.reset(self.rows[worker], total=frames, description=f"  {worker} {task.label()}",
                            detail=f"0/{frames}" if frames else "")

    def advance(self, task_id, frames):
        task = self.tasks[task_id]
        self.done[task_id] = task.cost[frames]
        if self.progress is not None:
            self.progress.update(self.whole, completed=sum(self.done.values()))
            self.progress.update(self.rows[self.running[task_id]], completed=frames,
                                 detail=f"{frames}/{task.latent_frames}")

    def finished(self, worker, task):
        self.running.pop(task.id, None)
        if self.progress is None:
            return
        if task.id in self.tasks:
            self.done[task.id] = task.cost[-1]
            self.completed.add(task.id)
            self.progress.update(self.whole, completed=sum(self.done.values()),
                                 detail=f"{len(self.completed)}/{len(self.tasks)} decodes")
        self.progress.update(self.rows[worker], description=f"  {worker} idle", detail="")

    def stop(self):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def summary(self, calibration, clips):
        table = Table(title="the release's bf16 decode against the fp32 reference", box=box.SIMPLE_HEAD,
                      padding=(0, 1), pad_edge=False, collapse_padding=True)
        for col in ("clip", "T", "frames", "PSNR dB", "max|d|", "rms d", "std", "clamp %", "fp32 s", "bf16 s"):
            table.add_column(col, justify="left" if col == "clip" else "right", no_wrap=True)
        for c in clips:
            e = calibration.get(c)
            if e is not None:
                table.add_row(c, str(e["latent_frames"]), str(spec.frames(e["latent_frames"])),
                              f"{e['bf16_psnr_db']:.2f}", f"{e['bf16_max_abs']:.4f}", f"{e['bf16_rms']:.2e}",
                              f"{e['video_std']:.3f}", f"{100 * e['clamped_fraction']:.3f}",
                              f"{e['fp32_decode_s']:.2f}", f"{e['bf16_decode_s']:.2f}")
        self.console.print(table)

    def task_table(self, records, geometry, wall):
        """One row per decode task: records [(task, worker, run info)]; `wall`: the decodes' wall time."""
        table = Table(title="decode tasks", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                      collapse_padding=True)
        for col in ("task", "worker", "T", "TFLOP", "s", "TFLOP/s"):
            table.add_column(col, justify="left" if col in ("task", "worker") else "right", no_wrap=True)
        fp32 = {"flop": 0.0, "counted": 0.0, "s": 0.0}
        for task, worker, info in sorted(records, key=lambda r: r[0].id):
            flop = task.cost[-1] if task.kind == "fp32" else spec.decode_flops(task.latent_frames, geometry)
            seconds = info["times"][-1]
            table.add_row(task.label(), worker, str(task.latent_frames), f"{flop / 1e12:.4g}", f"{seconds:.2f}",
                          f"{flop / seconds / 1e12:.3g}" if seconds > 0 else "-")
            if task.kind == "fp32":
                fp32["counted"] += flop
                fp32["s"] += seconds
                if task.band.lo == 0:
                    fp32["flop"] += spec.decode_flops(task.latent_frames, geometry)
        self.console.print(table)
        if fp32["s"] > 0:
            rate = fp32["counted"] / fp32["s"] / 1e12
            self.note(f"fp32: {fp32['flop'] / 1e12:.5g} TFLOP of decodes, {fp32['counted'] / 1e12:.5g} computed with "
                      f"the bands' halos, in {fp32['s']:.1f} device-s: {rate:.3g} TFLOP/s per worker. Decodes' wall "
                      f"time {wall:.1f} s")
