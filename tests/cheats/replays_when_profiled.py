"""Cheat (a forged profile): honest on every counted call, it keeps each video by its latents; the profiled call
(named scopes on) decodes nothing, replaying a kept video, so the profile shows a decode that did no work. The
profiled call gets fresh latents, never seen: the replay has nothing to copy, and its zeros fail the workload."""
import reference

_kept = {}


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    key = (tuple(z.shape), float(z.float().sum()), float(z.float().square().sum()))
    if reference._SCOPES:             # only the profiled call runs with the named scopes on
        if key in _kept:
            out.copy_(_kept[key])
        else:
            out.zero_()
        return
    reference.decode_bf16(z, weights, out=out)
    _kept[key] = out.clone()
