"""The latents a call gets and what the judge compares its video with.

Timed calls get fresh latents: new draws of the data maker's latent statistics (data/synth.py) from a seed drawn
when the run starts, kept in the judge and never written anywhere, so a solution can neither predict them nor have
seen them in its process. Each is a source clip's worth of frames cut to the workload's length, as the stored
clips are, so the two cannot be told apart by their statistics. Every fresh call is checked in full (`full`): a call
checked in part (a warm-up's first frames, say) could be wrong in the rest and still pass. The task's fp32 rule is
held on the whole video's fp32 decode, or (the gate on GPUs) on a secret tile's (`TileCheck`) beside a whole-video
check against the release bf16 decode."""
import dataclasses
import random
import secrets

import spec
from harness.judge.breakdown import NONE

# The short clips (f1, f5, f17) are checked against fp32 everywhere: they are the first frames of the source that
# f121 cuts too, so a stored one is told from a draw by its latents (a prefix of f121's, which come first), and where
# a draw's check were the release decode's, widened, a solution could be exact only on the stored calls.
SHORT_LATENT_FRAMES = max(spec.CLIPS[c]["latent_frames"] for c in spec.SHORT_CLIPS)
# The secret tile's side in latent rows and columns (16 pixels each): 128 x 128 pixels of the full video, whose exact
# fp32 decode (halo included, data/bands.py) costs 7.4% of the whole decode's FLOPs.
TILE = 8
# How a long draw is held to the task's fp32 rule: "video", the fp32 decode of the whole video; "tile", the whole
# video against the release bf16 decode (the allowance widened by its error) and a secret tile against the tile's fp32
# decode; "release", the release decode alone (a partial check).
CHECKS = ("video", "tile", "release")


@dataclasses.dataclass
class TileCheck:
    """The secret tile of a draw: where it is (data/bands.Tile), its fp32 decode and its allowance."""
    tile: object
    ref: object
    allowance: dict

    def judge(self, video, device):
        """(figures, status, reason) of this tile of `video` against its fp32 decode."""
        from harness.judge import checks
        figs = checks.figures(self.tile.of(video), self.ref, device)
        status, reason = checks.judge(figs, self.allowance)
        return figs, status, None if reason is None else f"on the secret fp32 tile ({self.tile.label()}): {reason}"


class Fresh:
    def __init__(self, geometry, device, seed=None, breakdown=None):
        self.geometry, self.device = geometry, device
        self.breakdown = breakdown or NONE      # the judge's decodes count as its "references"
        self.seed = secrets.randbits(62) if seed is None else seed
        self.weights = None
        self.kept = {}
        self.given = set()

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
        with self.breakdown.part("references"):
            return self._need(max_frames)

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
          decode, its allowance the task's rule on the release decode's error there where that is above the stored
          clip's (as _allowance does for a short draw: a tile's error varies more than a whole video's).
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
        own = checks.figures(tile.of(ref), exact, self.device)
        drawn = spec.allowance_from(own["max_abs"], own["rms"])
        widened["tile"] = TileCheck(tile, exact, {k: max(allow[k], drawn[k]) for k in allow})
        return ref, widened
