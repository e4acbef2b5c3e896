"""Cheat (an error the release check's widened allowance lets through): on the long clips the video is the release
bf16 decode plus 3.3 times its own error against the fp32 decode, each pixel's share clipped at twice that error's
rms. Its rms(d) against the fp32 decode is about 4.1 times the release's error, past the task's rule (3 times);
against the release decode it is about 3.1 times, inside the widened allowance (3 + 1 times), and its largest
difference stays far below the maximum allowed. A decode in lower precision than the task allows errs this way, along
the release's own rounding error; only an fp32 check sees it (the gate's secret tile). The short clips are the release
decode's: their fresh draws are held to fp32 in full."""
import reference


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    release = reference.decode_bf16(z, weights).float()
    if z.shape[2] <= 5:
        out.copy_(release)
        return
    err = release - reference.decode_fp32(z, weights)
    cap = 2 * float(err.pow(2).mean().sqrt())
    out.copy_((release + 3.3 * err.clamp(-cap, cap)).clamp(-1, 1))
