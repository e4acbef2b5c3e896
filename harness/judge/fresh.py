"""The latents a call gets and what the judge compares its video with.

Timed calls get fresh latents: new draws of the data maker's latent statistics (data/synth.py) from a seed drawn
when the run starts, kept in the judge and never written anywhere, so a solution can neither predict them nor have
seen them in its process. Each is a source clip's worth of frames cut to the workload's length, as the stored
clips are, so the two cannot be told apart by their statistics. Every fresh call is checked in full (`full`): a call
checked in part (a warm-up's first frames, say) could be wrong in the rest and still pass. The task's fp32 rule is
held on the whole video's fp32 decode, or (the gate on GPUs) on a secret tile's (`TileCheck`) beside a whole-video
check against the release bf16 decode."""
import dataclasses
import math
import random
import secrets

import spec
from harness.judge.breakdown import NONE

# The short clips (f1, f5, f17) are checked against fp32 everywhere: they are the first frames of the source that
# f121 cuts too, so a stored one is told from a draw by its latents (a prefix of f121's, which come first), and where
# a draw's check were the release decode's, widened, a solution could be exact only on the stored calls.
SHORT_LATENT_FRAMES = max(spec.CLIPS[c]["latent_frames"] for c in spec.SHORT_CLIPS)
# The secret tile's side in latent rows and columns (16 pixels each): 128 x 128 pixels of the full video, whose exact
# fp32 decode (halo included, data/bands.py) costs at most 7.4% of the whole decode's FLOPs (4.5% at a corner).
TILE = 8
# How a long draw is held to the task's fp32 rule: "video", the fp32 decode of the whole video; "tile", the whole
# video against the release bf16 decode (the allowance widened by its error), and with a secret tile's fp32 decode
# max|d| there and rms(d) over the video, estimated (TileCheck); "release", the release decode alone (partial).
CHECKS = ("video", "tile", "release")


@dataclasses.dataclass
class TileCheck:
    """A draw's secret tile (a data/bands.Tile): its fp32 decode `exact`, the release decode's `release` of it (a
    view of the whole release video) and the allowance a video is held to there:
    - max|d| on the tile against the tile's fp32 decode;
    - rms(d) over the whole video against the fp32 decode, estimated (estimate()).
    `release_ms`: the release decode's mean square error over the whole video, as the estimate takes it: the stored
    clip's (drawn from the same statistics), or the tile's own where the tile is the whole video."""
    tile: object
    exact: object
    release: object
    allowance: dict
    release_ms: float

    def estimate(self, video, against_release_ms, device):
        """{"max_abs", "rms" (on the tile), "release_rms" (the release's on the tile), "correlation", "estimated_rms"}
        of `video`, whose mean square difference from the release decode over the whole video is
        `against_release_ms`.

        With d = video - fp32, r = video - release and e = release - fp32 (so d = r + e everywhere):
        mean(d^2) = mean(r^2) + 2 mean(r e) + mean(e^2) over the video. mean(r^2) is known everywhere; mean(e^2) is
        release_ms; mean(r e) is taken as c x release_ms, c = mean(r e) / mean(e^2) measured on the tile, the part
        of the video's difference from the release that follows the release's own error. An error the release does
        not share counts in full wherever it is (through r); only its correlation with the release's error is
        sampled. With the tile the whole video the estimate is exact."""
        import torch
        video = self.tile.of(video)
        step = max(1, (1 << 26) // max(1, video[0, 0, 0].numel() * 3))
        sums = dict.fromkeys(("dd", "re", "ee"), 0.0)
        max_abs, n = 0.0, 0
        for f in range(0, video.shape[2], step):
            o = video[:, :, f:f + step].to(device).float()
            x = self.exact[:, :, f:f + step].to(device).float()
            e = self.release[:, :, f:f + step].to(device).float() - x
            finite = torch.isfinite(o)
            d = torch.where(finite, o - x, torch.zeros_like(o))
            r = torch.where(finite, d - e, torch.zeros_like(o))
            sums["dd"] += float((d.double() ** 2).sum())
            sums["re"] += float((r.double() * e.double()).sum())
            sums["ee"] += float((e.double() ** 2).sum())
            max_abs, n = max(max_abs, float(d.abs().max())), n + d.numel()
        c = sums["re"] / sums["ee"] if sums["ee"] > 0 else 0.0
        estimated = max(0.0, against_release_ms + (2 * c + 1) * self.release_ms)
        return {"max_abs": max_abs, "rms": math.sqrt(sums["dd"] / n), "release_rms": math.sqrt(sums["ee"] / n),
                "correlation": c, "estimated_rms": math.sqrt(estimated)}

    def judge(self, video, against_release_rms, device):
        """(figures, status, reason) of `video`: its max|d| on the tile, its estimated rms(d) over the video."""
        figs = self.estimate(video, against_release_rms ** 2, device)
        where, reasons = self.tile.label(), []
        if figs["max_abs"] > self.allowance["max_abs"]:
            reasons.append(f"max|d| on the secret fp32 tile ({where}) {figs['max_abs']:.4g} > allowance "
                           f"{self.allowance['max_abs']:.4g}")
        if figs["estimated_rms"] > self.allowance["rms"]:
            reasons.append(f"rms(d) over the video, estimated with the secret fp32 tile ({where}), "
                           f"{figs['estimated_rms']:.4g} > allowance {self.allowance['rms']:.4g}")
        return figs, ("incorrect" if reasons else "passed"), "; ".join(reasons) or None


class Fresh:
    def __init__(self, geometry, device, seed=None, breakdown=None):
        self.geometry, self.device = geometry, device
        self.breakdown = breakdown or NONE      # the judge's decodes count as its "references"
        self.seed = secrets.randbits(62) if seed is None else seed
        self.weights = None
        self.kept = {}
        self.given = set()
        self.needs = {}

    def give(self, key):
        """Note that `key`'s latents go to a solution's call now: each draw goes to one call only, however the
        callers name their keys (latents seen once could be replayed from the decode of the first)."""
        if key in self.given:
            raise RuntimeError(f"the judge drew the fresh latents {key!r} twice: a harness error")
        self.given.add(key)

    def draw(self, key, latent_frames):
        """bf16 CPU latents [1, C, T, h, w] for `key` (the same key gives the same latents within this run)."""
        import torch
        from data import synth
        z = synth.latents(self.geometry, self.seed, key, frames=spec.SOURCE_FRAMES)[:, :, :latent_frames]
        return z.to(torch.bfloat16).contiguous()

    def checked(self, key, latent_frames):
        """(z, a reference video of all of it, the allowance) for `key` (see full(): fp32 on the CPU, the release
        bf16 decode on GPUs); kept until forget(), so solutions interleaved call by call share the draw and its
        decode."""
        if (key, latent_frames) not in self.kept:
            z = self.draw(key, latent_frames)
            self.kept[(key, latent_frames)] = (z, *self.full(z, "video" if self.device == "cpu" else "release"))
        return self.kept[(key, latent_frames)]

    def tile(self, key):
        """The secret tile of `key`'s draw (a data/bands.Tile): TILE x TILE latent rows and columns (the grid, where
        that is smaller) at a place drawn from the run's secret seed, uniform over the places where it fits."""
        from data import bands
        rng = random.Random(f"{self.seed}/{key}/tile")
        edges = []
        for axis, extent in zip((bands.ROWS, bands.COLUMNS), self.geometry.latent_hw):
            size = min(TILE, extent)
            lo = rng.randrange(extent - size + 1)
            edges.append(bands.Band(axis, lo, lo + size, extent))
        return bands.Tile(*edges)

    def forget(self):
        self.kept = {}

    def _weights(self):
        if self.weights is None:
            self.weights = spec.load_weights(self.device, self.geometry)
        return self.weights

    def _video(self, z):
        """The reference video of z, fp16 on the CPU: the decode writes each latent frame's video straight into it, so
        the judge's GPU memory for a decode is one frame's work, whatever the clip's length (need())."""
        import torch
        g = self.geometry
        return torch.empty((1, 3, spec.frames(z.shape[2]), *g.video_hw), dtype=torch.float16)

    def need(self, max_frames):
        if max_frames not in self.needs:        # measured once: bench asks again for each wave of solutions
            with self.breakdown.part("references"):
                self.needs[max_frames] = self._need(max_frames)
        return self.needs[max_frames]

    def _need(self, max_frames):
        """Bytes of GPU memory the judge's own work for one call takes beyond what it holds (its buffers, its
        weights), measured by doing that work now, before any group starts: a decode of fresh latents of two latent
        frames (the decoder's every path) in fp32 and bf16, read 1 of a video of `max_frames` latent frames, its
        comparison with read 2 and the figures over one chunk. 0 on the CPU."""
        import torch
        import reference
        from harness.judge import checks
        if self.device == "cpu":
            return 0
        self._weights()
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(self.device)
        base = torch.cuda.memory_reserved(self.device)
        z = self.draw("the judge's own measure", 2)        # given to no call
        with torch.no_grad():
            ref, _ = self._full(z)
            reference.decode_bf16(z.to(self.device), self._weights(), out=self._video(z))
            video = (1, 3, spec.frames(max_frames), *self.geometry.video_hw)
            read1 = torch.zeros(video, dtype=torch.bfloat16, device=self.device)
            read2 = read1.clone()
            torch.equal(read1.view(torch.int16), read2.view(torch.int16))
            del read2
            chunk = max(1, (1 << 27) // (3 * self.geometry.video_hw[0] * self.geometry.video_hw[1]))
            checks.figures(read1, torch.zeros((1, 3, min(chunk, video[2]), *video[3:]), dtype=torch.float16),
                           self.device)
            del read1
        torch.cuda.synchronize(self.device)
        need = torch.cuda.max_memory_reserved(self.device) - base
        torch.cuda.empty_cache()
        return need

    def _allowance(self, z, ref, clip):
        """The allowance of these latents: the task's rule (3x the release bf16 decode's error) on the release
        decode's error on them, where that is above the stored clip's (a draw's error varies, the tiny geometry's
        maximum most: the release decode itself must pass)."""
        import torch
        import reference
        from harness.judge import checks
        with torch.no_grad():
            own = checks.figures(reference.decode_bf16(z.to(self.device), self._weights()), ref, self.device)
        stored, drawn = spec.allowance(clip, self.geometry), spec.allowance_from(own["max_abs"], own["rms"])
        return {k: max(stored[k], drawn[k]) for k in stored}

    def full(self, z, check="video", key=None):
        with self.breakdown.part("references"):
            return self._full(z, check, key)

    def _full(self, z, check="video", key=None):
        """(a reference video of all of z, its allowance) by `check` (CHECKS):
        - "video": the fp32 decode, with _allowance() (short clips) or the stored clip's allowance;
        - "release" (more than SHORT_LATENT_FRAMES latent frames): the release bf16 decode with the stored clip's
          allowance plus that clip's bf16 error, which any video within the allowance of the fp32 decode meets (the
          triangle inequality; the stored clip's bf16 error stands for that of these latents, drawn from the same
          statistics);
        - "tile" (likewise): "release", and the allowance's "tile" a TileCheck of `key`'s secret tile: its fp32
          decode, against which a video's max|d| there and its rms(d) over the whole video, estimated, are held to
          the stored clip's allowance (the max raised to the task's rule on the release's largest error on the tile
          where that is above the stored clip's).
        Short clips (f1, f5, f17) are decoded in fp32 whatever `check` says: their stored latents can be told from a
        draw (SHORT_LATENT_FRAMES), and the maximum error of a short draw varies most, so the stored clip's would not
        stand for it."""
        import torch
        import reference
        from data import bands
        from harness.judge import checks
        if check not in CHECKS:
            raise ValueError(f"check is {check!r}, expected one of {CHECKS}")
        clip = next(c for c, e in spec.CLIPS.items() if e["latent_frames"] == z.shape[2])
        allow = spec.allowance(clip, self.geometry)
        short = z.shape[2] <= SHORT_LATENT_FRAMES
        with torch.no_grad():
            if check == "video" or short:
                ref = reference.decode_fp32(z.to(self.device), self._weights(), out=self._video(z))
                # A short clip's maximum varies most from draw to draw; a long one's is the stored clip's.
                return ref, self._allowance(z, ref, clip) if short else allow
            ref = reference.decode_bf16(z.to(self.device), self._weights(), out=self._video(z))
        cal = spec.calibration(clip, self.geometry)
        widened = {"max_abs": allow["max_abs"] + cal["bf16_max_abs"], "rms": allow["rms"] + cal["bf16_rms"]}
        if check == "release":
            return ref, widened
        tile = self.tile(key)
        exact = torch.empty((1, 3, spec.frames(z.shape[2]), 16 * (tile.rows.hi - tile.rows.lo),
                             16 * (tile.cols.hi - tile.cols.lo)), dtype=torch.float16)
        with torch.no_grad():
            bands.decode(z.to(self.device), self._weights(), tile, exact)
        # The release's error on the tile: its largest there raises the max allowance where it is above the stored
        # clip's; its rms stands for the whole video's only where the tile is the whole video.
        own = checks.figures(tile.of(ref), exact, self.device)
        drawn = spec.allowance_from(own["max_abs"], own["rms"])
        allowance = {"max_abs": max(allow["max_abs"], drawn["max_abs"]),
                     "rms": max(allow["rms"], drawn["rms"]) if tile.whole else allow["rms"]}
        release_ms = (own["rms"] if tile.whole else cal["bf16_rms"]) ** 2
        widened["tile"] = TileCheck(tile, exact, tile.of(ref), allowance, release_ms)
        return ref, widened
