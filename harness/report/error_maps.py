"""Where a video is wrong: the error maps of a call, computed in the judge from its own copy of `out` and the
reference (never from anything a rank reports).

measure() reads the one comparison (checks.compared, chunk by chunk on the comparison's device) and keeps small
arrays only: per frame max|d|; per frame and row, and per frame and column, the sum of d^2 and the count of
non-finite elements; then the worst frame's |d| (the largest over the colours) and that frame of the reference and
of the video. describe() says in words where the errors are: the worst frame (frame 0 is the causal first frame, the
first latent frame decoded alone; each later latent frame gives four), the rows (named after the seams of the band
split, spec.video_seams, a rank's band, or an image edge) and the columns. draw() makes one PNG (matplotlib, the plot
extra). Atlas keeps the worst map of each workload (or check) of a run until it is drawn: into the report's DIR/maps,
or without a report into the run's own error-maps/<UTC time>-<pid>/ under the working directory."""
import dataclasses
import datetime
import math
import os
import re
import textwrap

import numpy as np

import spec
from harness.report import plot

# Where errors concentrate: the shortest run of rows (columns) that holds EXCESS of the error above the floor (the
# median row's: what every row has, such as the bf16 noise of an honest decode). The errors are spread when what is
# above the floor is under SPREAD of all the error and no row rises PEAK floors above it, or when that run is wider
# than WIDE of the rows (then a rank's band holding BAND of it is named). The run takes in its neighbours above TAIL
# of its peak.
EXCESS, SPREAD, PEAK, WIDE, BAND, TAIL = 0.9, 0.25, 4.0, 0.25, 0.8, 0.02
REACH = 2                          # rows on either side of a seam that count as on it (several seams at once)
BAD = (1.0, 0.0, 1.0)              # non-finite pixels in the pictures: magenta


@dataclasses.dataclass
class ErrorMap:
    """One call's comparison in small CPU arrays (numpy); `summary` is describe()'s, for the JSON and the console."""
    allow: dict            # {"max_abs", "rms"}
    world: int
    seams: list            # video rows where the bands of ranks 1 .. world - 1 begin
    scale: int             # video rows per latent row
    per_row: int           # elements of one row of one frame (colours x columns)
    frame_max: np.ndarray  # [F] max|d| of the finite elements
    row_sq: np.ndarray     # [F, H] sum of d^2 (finite elements)
    row_bad: np.ndarray    # [F, H] non-finite elements
    col_sq: np.ndarray     # [F, W]
    col_bad: np.ndarray    # [F, W]
    worst: int             # the worst frame
    worst_d: np.ndarray    # [H, W] |d| there, the largest over the colours (NaN where an element is not finite)
    worst_ref: np.ndarray  # [H, W, 3] uint8
    worst_out: np.ndarray  # [H, W, 3] uint8
    summary: dict = None

    def frame_rms(self):
        n = self.per_row * self.row_sq.shape[1] - self.row_bad.sum(1)
        return np.sqrt(self.row_sq.sum(1) / np.maximum(n, 1))

    def score(self):
        """How far over the allowance: infinite with non-finite elements."""
        if self.row_bad.sum():
            return math.inf
        n = self.row_sq.size * self.per_row
        return max(float(self.frame_max.max()) / self.allow["max_abs"],
                   math.sqrt(float(self.row_sq.sum()) / n) / self.allow["rms"])


def measure(out, ref, device, allow, world, geometry):
    """The ErrorMap of a video [1, 3, F, H, W] against its reference (frames past the reference's are left out)."""
    import torch

    from harness.judge import checks     # here: the judge imports report/, not the reverse
    frames, height, width = min(out.shape[2], ref.shape[2]), out.shape[3], out.shape[4]
    frame_max = torch.zeros(frames)
    # Squares in float64: a bf16 video can hold values near 3.4e38, whose squares overflow float32 (an inf row).
    row_sq, row_bad = torch.zeros(frames, height, dtype=torch.float64), torch.zeros(frames, height)
    col_sq, col_bad = torch.zeros(frames, width, dtype=torch.float64), torch.zeros(frames, width)
    for f, _, finite, d in checks.compared(out, ref, device):
        if d is None:
            break
        n = d.shape[2]
        bad, sq = ~finite[:, :, :n], d.double() ** 2
        frame_max[f:f + n] = d.abs().amax(dim=(0, 1, 3, 4)).cpu()
        row_sq[f:f + n], row_bad[f:f + n] = sq.sum(dim=(0, 1, 4)).cpu(), bad.sum(dim=(0, 1, 4)).float().cpu()
        col_sq[f:f + n], col_bad[f:f + n] = sq.sum(dim=(0, 1, 3)).cpu(), bad.sum(dim=(0, 1, 3)).float().cpu()
    m = ErrorMap(allow=dict(allow), world=world, seams=spec.video_seams(world, geometry),
                 scale=geometry.video_hw[0] // geometry.latent_hw[0], per_row=out.shape[1] * width,
                 frame_max=frame_max.numpy(), row_sq=row_sq.numpy(),
                 row_bad=row_bad.numpy(), col_sq=col_sq.numpy(), col_bad=col_bad.numpy(), worst=0, worst_d=None,
                 worst_ref=None, worst_out=None)
    bad = m.row_bad.sum(1)
    # float64: a frame's max|d| near the largest bf16 over a small allowance overflows float32
    over = np.maximum(m.frame_max.astype(np.float64) / allow["max_abs"], m.frame_rms() / allow["rms"])
    m.worst = k = int(bad.argmax()) if bad.any() else int(over.argmax())
    o, r = out[0, :, k].to(device).float(), ref[0, :, k].to(device).float()       # (3, H, W)
    finite = torch.isfinite(o)
    m.worst_d = torch.where(finite, (o - r).abs(), torch.full_like(o, math.nan)).amax(0).cpu().numpy()

    def rgb(x):
        return ((x.nan_to_num(0).clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()
    m.worst_ref, m.worst_out = rgb(r), rgb(o)
    m.worst_out[~finite.all(0).cpu().numpy()] = [int(255 * c) for c in BAD]
    m.summary = describe(m)
    return m


def shortest_run(x, target):
    """(first, last) of the shortest run of consecutive entries of x (>= 0) whose sum reaches target."""
    best, lo, total = (0, len(x) - 1), 0, 0.0
    for hi, v in enumerate(x):
        total += v
        while lo < hi and total - x[lo] >= target:
            total -= x[lo]
            lo += 1
        if total >= target and hi - lo < best[1] - best[0]:
            best = (lo, hi)
    return best


def concentration(mass, seams=(), bands=()):
    """[[first, last], ...]: where the errors of a row (column) profile concentrate, [] where they are spread. One
    narrow run; else, given the band `seams` (video rows), the rows within REACH of them where those hold the
    excess; else, given `bands` ([(first, end)] of each rank), a rank's whole band where it holds most of it."""
    mass = np.asarray(mass, dtype=np.float64)
    total = mass.sum()
    if not total > 0:
        return []
    floor = np.median(mass)
    excess = np.clip(mass - floor, 0, None)
    if excess.sum() < SPREAD * total and excess.max() < PEAK * floor:
        return []

    def grown(a, b):                # a run's tails: its neighbours above TAIL of its peak
        edge = excess[a:b + 1].max() * TAIL
        while a > 0 and excess[a - 1] >= edge:
            a -= 1
        while b < len(mass) - 1 and excess[b + 1] >= edge:
            b += 1
        return a, b
    a, b = grown(*shortest_run(excess, EXCESS * excess.sum()))
    if b - a + 1 <= max(1, WIDE * len(mass)):
        return [[a, b]]
    near = [(max(0, s - REACH), min(len(mass), s + REACH)) for s in seams]
    if near and sum(excess[a:b].sum() for a, b in near) >= EXCESS * excess.sum():
        runs = []
        for a, b in near:
            hot = np.flatnonzero(excess[a:b] >= excess.max() * TAIL)
            if len(hot):
                runs.append([a + int(hot[0]), a + int(hot[-1])])
        return runs
    for first, end in bands:
        if excess[first:end].sum() >= BAND * excess.sum() and end - first < len(mass):
            return [[first, end - 1]]
    return []


def span(a, b, noun):
    return f"{noun} {a}" if a == b else f"{noun}s {a}-{b}"


def seam_of(a, b, seams):
    """The seam index r (between ranks r and r + 1) that rows a..b touch, or None."""
    return next((r for r, s in enumerate(seams) if a <= s and b >= s - 1), None)


def rows_words(runs, m, height):
    """'rows 351-353 = the seam between ranks 0 and 1', 'rows 352-703 = rank 1's band', ... or 'every row'."""
    if not runs:
        return "every row"
    if len(runs) > 1:
        text = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)
        pairs = ", ".join(f"{r} and {r + 1}" for r in (seam_of(a, b, m.seams) for a, b in runs) if r is not None)
        return f"rows {text} = the seams between ranks {pairs}"
    (a, b), = runs
    text = span(a, b, "row")
    edges = [0, *m.seams, height]
    for r in range(m.world):
        if m.world > 1 and (a, b) == (edges[r], edges[r + 1] - 1):
            return f"{text} = rank {r}'s band"
    r = seam_of(a, b, m.seams)
    if r is not None:
        return f"{text} = the seam between ranks {r} and {r + 1}"
    for r, s in enumerate(m.seams):
        gap = s - 1 - b if b < s - 1 else a - s
        if gap <= m.scale:
            return f"{text}, {gap} rows from the seam between ranks {r} and {r + 1} (row {s})"
    if a == 0 or b == height - 1:
        return f"{text} = the {'top' if a == 0 else 'bottom'} edge"
    if m.world > 1:
        r = next(r for r in range(m.world) if edges[r] <= a < edges[r + 1])
        return f"{text} (in rank {r}'s band)"
    return text


def columns_words(runs, width):
    if not runs:
        return "every column"
    (a, b), = runs
    text = span(a, b, "column")
    if a == 0 or b == width - 1:
        return f"{text} = the {'left' if a == 0 else 'right'} edge"
    return text


def frame_words(k, frames):
    """'frame 0 (the causal first frame)', 'frame 6 (frame 1 of 4 of latent frame 2)', ..."""
    if k == 0:
        return "frame 0 (the causal first frame)"
    last = ", the last frame" if k == frames - 1 else ""
    return f"frame {k} (frame {(k - 1) % 4 + 1} of 4 of latent frame {(k - 1) // 4 + 1}{last})"


def runs_words(indices, most=6):
    """'0, 5-8, 12' of sorted indices (the first `most` runs)."""
    runs = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:most])
    return text + (", ..." if len(runs) > most else ""), runs


def describe(m):
    """The words and figures of where an ErrorMap's errors are (the JSON's `error_map`)."""
    frames, height, width = m.row_sq.shape[0], m.row_sq.shape[1], m.col_sq.shape[1]
    nonfinite = int(m.row_bad.sum())
    subject = "non-finite elements" if nonfinite else "errors"
    bands = list(zip([0, *m.seams], [*m.seams, height])) if m.world > 1 else ()
    rows = concentration((m.row_bad if nonfinite else m.row_sq).sum(0), m.seams, bands)
    cols = concentration((m.col_bad if nonfinite else m.col_sq).sum(0))
    rms = m.frame_rms()
    over = np.flatnonzero((m.frame_max > m.allow["max_abs"]) | (rms > m.allow["rms"]) | (m.row_bad.sum(1) > 0))
    listed, over_runs = runs_words(over.tolist())
    k = m.worst
    when = (("the frame over the allowance" if len(over) else "the frame within the allowance") if frames == 1 else
            "no frame over the allowance" if not len(over) else
            "every frame over the allowance" if len(over) == frames else
            f"{len(over)} of {frames} frames over the allowance ({listed})")
    if not nonfinite and not m.frame_max.any():
        where = "no difference from the reference"
    elif not rows and not cols:
        where = f"{subject} spread over every row and column"
    else:
        where = f"{subject} concentrate on {rows_words(rows, m, height)}, {columns_words(cols, width)}"
    worst = f"worst {frame_words(k, frames)}: max|d| {m.frame_max[k]:.3g}, rms {rms[k]:.3g}" + \
        (f", {int(m.row_bad[k].sum())} not finite" if nonfinite else "")
    return {"words": "; ".join([f"{nonfinite} elements not finite"] * bool(nonfinite) + [where, worst, when]),
            "worst_frame": k, "worst_frame_words": frame_words(k, frames), "worst_max_abs": float(m.frame_max[k]),
            "worst_rms": float(rms[k]), "frames_compared": frames, "frames_over": len(over),
            "frames_over_runs": over_runs, "rows": rows,
            "rows_words": rows_words(rows, m, height), "columns": cols,
            "columns_words": columns_words(cols, width), "nonfinite": nonfinite, "seams": m.seams,
            "allowance": m.allow}


def pooled(x, most=360, columns=True):
    """x [H, W] reduced by its largest values (NaN wins) to at most `most` rows (k x k blocks, or k x 1 without
    `columns`): a one-row error stays visible in a picture smaller than the frame."""
    k = max(1, math.ceil(x.shape[0] / most))
    kc = k if columns else 1
    h, w = x.shape[0] // k * k, x.shape[1] // kc * kc
    return x[:h, :w].reshape(h // k, k, w // kc, kc).max(axis=(1, 3)), k


def mark_seams(ax, seams, width):
    """The band seams as cyan ticks on both sides of a picture (a line across would hide an error on the seam)."""
    ax.autoscale(False)
    for x, marker in ((-0.5, ">"), (width - 0.5, "<")):
        ax.plot([x] * len(seams), [r - 0.5 for r in seams], marker, color="cyan", ms=7, clip_on=False)


def top(x):
    """The largest finite value of x, 1.0 where it has none (a colour scale's end must be finite)."""
    x = np.asarray(x, dtype=np.float64)
    finite = x[np.isfinite(x)]
    return float(finite.max()) if finite.size else 1.0


def draw(m, path, title):
    """One PNG of an ErrorMap: per-frame max|d| and rms against the allowance, a rows x frames heat map of rms, and
    the worst frame's reference, video and |d| (band seams ticked in cyan, where the errors concentrate boxed)."""
    plt = plot.pyplot("error maps")
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator
    s = m.summary
    frames, height, width = m.row_sq.shape[0], m.row_sq.shape[1], m.col_sq.shape[1]
    fig = plt.figure(figsize=(15, 8.4))
    grid = fig.add_gridspec(2, 6, height_ratios=(1, 1.15), left=0.06, right=0.97, bottom=0.04, top=0.87, hspace=0.25,
                            wspace=0.5)
    ax = fig.add_subplot(grid[0, :3])
    x, rms = np.arange(frames), m.frame_rms()
    style = "o-" if frames < 40 else "-"
    ax.plot(x, np.where(m.frame_max > 0, m.frame_max, np.nan), style, ms=3, label="max|d|")
    ax.plot(x, np.where(rms > 0, rms, np.nan), style, ms=3, label="rms(d)")
    ax.axhline(m.allow["max_abs"], color="C0", ls=":", label=f"max|d| allowance {m.allow['max_abs']:.3g}")
    ax.axhline(m.allow["rms"], color="C1", ls=":", label=f"rms allowance {m.allow['rms']:.3g}")
    bad = np.flatnonzero(m.row_bad.sum(1))
    if len(bad):
        ax.plot(bad, np.full(len(bad), max(m.allow["max_abs"], top(m.frame_max))), "x", color=BAD,
                label="not finite")
    ax.axvline(m.worst, color="gray", lw=0.8)
    ax.set(yscale="log", xlabel="frame (0: the causal first frame)", ylabel="|d| against the reference",
           title="per frame, against the allowance")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="best")
    floor = m.allow["rms"] / 10
    ax = fig.add_subplot(grid[0, 3:])
    row_rms = np.sqrt(m.row_sq / np.maximum(m.per_row - m.row_bad, 1)).T          # [H, F]
    row_rms[m.row_bad.T > 0] = np.nan
    row_rms, k = pooled(row_rms, most=240, columns=False)
    cmap = plt.get_cmap("inferno").with_extremes(bad=BAD)
    im = ax.imshow(np.clip(row_rms, floor, None), aspect="auto", interpolation="nearest", cmap=cmap,
                   norm=LogNorm(floor, max(floor * 10, top(row_rms))),
                   extent=(-0.5, frames - 0.5, row_rms.shape[0] * k - 0.5, -0.5))
    fig.colorbar(im, ax=ax, label="rms(d) of the row")
    mark_seams(ax, m.seams, frames)
    ax.set(xlabel="frame", ylabel="row" + (f" (the largest of {k} rows)" if k > 1 else ""),
           title="rms per row and frame" + (" (seams: cyan)" if m.seams else ""))
    for i, (img, name) in enumerate([(m.worst_ref, "the reference"), (m.worst_out, "the solution's video")]):
        ax = fig.add_subplot(grid[1, 2 * i:2 * i + 2])
        ax.imshow(img, interpolation="antialiased")
        ax.set(title=f"frame {m.worst}: {name}", xticks=[], yticks=[])
    ax = fig.add_subplot(grid[1, 4:])
    d, k = pooled(m.worst_d)
    im = ax.imshow(np.clip(d, floor, None), cmap=cmap, interpolation="nearest",
                   norm=LogNorm(floor, max(top(d), 10 * floor)),
                   extent=(-0.5, d.shape[1] * k - 0.5, d.shape[0] * k - 0.5, -0.5))
    fig.colorbar(im, ax=ax, label="|d|, the largest over the colours", shrink=0.7)
    mark_seams(ax, m.seams, d.shape[1] * k)
    for (r0, r1) in (s["rows"] or [[0, height - 1]]) if s["rows"] or s["columns"] else []:
        (c0, c1), = s["columns"] or [[0, width - 1]]   # where the errors concentrate, boxed with a margin
        pad = 3 * k
        ax.add_patch(Rectangle((c0 - pad, r0 - pad), c1 - c0 + 2 * pad, r1 - r0 + 2 * pad, fill=False, ec="lime",
                               lw=1, ls="--"))
    ax.set(title=f"frame {m.worst}: |d|", xticks=[], yticks=[],
           xlabel=f"the largest of {k} x {k} pixels" if k > 1 else None)
    fig.suptitle("\n".join([title, *textwrap.wrap(s["words"], 170)]), fontsize=9)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run_folder(root="error-maps"):
    """A run's own folder for its pictures, under the working directory: error-maps/<UTC time>-<pid>."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return os.path.join(root, f"{stamp}-{os.getpid()}")


class Atlas:
    """A run's error maps: which calls get one (those whose figures fail; every call with `every`), the worst kept
    per key until drawn into `report`/maps, or without a report into run_folder(). The folder is made when its first
    picture is drawn. A picture that cannot be drawn (no matplotlib, a folder it cannot write to) leaves its words
    and is counted for said()."""

    def __init__(self, geometry, every=False, report=None):
        self.geometry, self.every, self.kept = geometry, every, {}
        self.folder = os.path.join(report, "maps") if report else run_folder()
        self.drawn, self.undrawn, self.why = [], 0, None

    def wanted(self, status):
        return self.every or status != "passed"

    def take(self, key, out, ref, device, allow, world):
        """Measure one call; keep its map if it is the worst of `key` so far; its words for the call's record."""
        m = measure(out, ref, device, allow, world, self.geometry)
        if key not in self.kept or m.score() >= self.kept[key].score():
            self.kept[key] = m
        return m.summary

    def draw(self, key, title):
        """The worst map of `key`: its summary with `picture` (the PNG's path, or None where it was not drawn), then
        forgotten; None where no call of `key` was mapped."""
        m = self.kept.pop(key, None)
        if m is None:
            return None
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(map(str, key if isinstance(key, tuple) else (key,))))
        picture = None
        why = None if plot.available() else f"drawing {plot.MISSING}"
        if why is None:
            try:
                os.makedirs(self.folder, exist_ok=True)
                picture = draw(m, os.path.join(self.folder, f"{stem}.png"), title)
                self.drawn.append(picture)
            except Exception as e:     # a folder it cannot write to; figures matplotlib refuses: never the run's end
                why = f"{type(e).__name__}: {e}"
        if why:
            self.undrawn, self.why = self.undrawn + 1, why
        return dict(m.summary, picture=picture)

    def said(self):
        """The console's line on the run's pictures (where they are; how many were not drawn and why), or None."""
        parts = [f"{len(self.drawn)} drawn in {self.folder}{os.sep}"] * bool(self.drawn) + \
            [f"{self.undrawn} not drawn: {self.why}"] * bool(self.undrawn)
        return "error maps: " + "; ".join(parts) if parts else None
