"""harness/judge/fresh.py: the allowance of fresh latents admits the release decode of those latents; each draw goes to
one call."""
import pytest

import reference
import spec
from harness.judge import checks
from harness.judge.fresh import Fresh


def test_fresh_allowance_admits_the_release_decode_of_the_draw(tiny_data, monkeypatch):
    # A stored clip whose release error happened to be tiny: the draw's own release error must decide.
    monkeypatch.setenv("DATA", tiny_data["DATA"])
    monkeypatch.setattr(spec, "allowance", lambda clip, geometry=spec.FULL: {"max_abs": 1e-6, "rms": 1e-7})
    fresh = Fresh(spec.TINY, "cpu", seed=7)
    # On GPUs (the "release" and "tile" checks) a short clip is decoded in fp32 too: its own error decides there too.
    for t, make in ((1, lambda z: fresh.full(z)), (2, lambda z: fresh.full(z)),
                    (2, lambda z: fresh.full(z, "release")), (2, lambda z: fresh.full(z, "tile", "k"))):
        z = fresh.draw(f"k{t}", t)
        ref, allow = make(z)
        own = checks.figures(reference.decode_bf16(z, fresh._weights()), ref, "cpu")
        assert allow["max_abs"] == spec.allowance_from(own["max_abs"], own["rms"])["max_abs"] > 1e-6
        assert checks.judge(own, allow)[0] == "passed"


def test_a_draw_goes_to_one_call_only():
    """Fresh.give refuses a key it gave before (the gate's second looks once shared their keys: a repeat's look
    then replayed the stored call's look); other keys, and the same latents decoded again for checking, pass."""
    fresh = Fresh(spec.GEOMETRIES["tiny"], "cpu", seed=1)
    fresh.give("1/f5x1/second look/0")
    fresh.give("1/f5x1 repeat/second look/0")
    with pytest.raises(RuntimeError, match="drew the fresh latents '1/f5x1/second look/0' twice"):
        fresh.give("1/f5x1/second look/0")


def test_the_tiles_estimate_of_the_videos_rms_against_the_direct_one():
    """TileCheck.estimate against rms(video - fp32) computed directly over a whole synthetic video (the truth): an
    honest error of its own, an error the release shares in part, and an error far from the tile (which counts in
    full wherever it is) are estimated within 2%; an error only on the tile too. The release's whole-video error is
    given exactly, as the stored clip's stands for it."""
    import math
    import torch
    from data import bands
    from harness.judge.fresh import TileCheck
    g = torch.Generator().manual_seed(0)
    shape = (1, 3, 9, 320, 480)          # 20 x 30 latent rows and columns

    def noise(scale):
        return scale * torch.randn(shape, generator=g)
    exact = torch.rand(shape, generator=g) * 1.6 - 0.8
    e = noise(0.004)
    release = exact + e
    tile = bands.Tile(bands.Band(bands.ROWS, 6, 14, 20), bands.Band(bands.COLUMNS, 2, 10, 30))
    far = torch.zeros(shape)
    far[:, :, :, :, 320:] = 0.02        # columns 20-29 of the latent grid: the tile is at 2-9
    near = torch.zeros(shape)
    tile.of(near).fill_(0.02)
    videos = {"honest": exact + noise(0.004), "shares the release's error": exact + 0.6 * e + noise(0.003),
              "errs far from the tile": exact + noise(0.004) + far, "errs on the tile": exact + noise(0.004) + near}
    check = TileCheck(tile, tile.of(exact).clone(), tile.of(release), {"max_abs": 1.0, "rms": 1.0},
                      float((e.double() ** 2).mean()))
    for name, video in videos.items():
        truth = math.sqrt(float(((video - exact).double() ** 2).mean()))
        against_release = float(((video - release).double() ** 2).mean())
        got = check.estimate(video, against_release, "cpu")["estimated_rms"]
        assert got == pytest.approx(truth, rel=0.02), name
