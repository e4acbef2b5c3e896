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
