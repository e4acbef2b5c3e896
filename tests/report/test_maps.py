"""Error maps (harness/report/error_maps.py) on the CPU: they put the error where a broken fixture put it (a wrong seam
row at world 2 and 4, a shifted frame), say so in words, and call an honest decode's error spread; the pictures go into
a folder of the run's own, made only when one is drawn, and their words stay where matplotlib is missing."""
import math
import os
import re

import pytest
import torch

import loader
import reference
import spec
from harness.judge import checks
from harness.report import error_maps, plot
from helpers import random_weights

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKEN = os.path.join(ROOT, "tests", "broken")


@pytest.fixture(scope="module")
def decode():
    """(z, weights, the fp32 decode as fp16, the allowance) of f5's shape on the tiny geometry: the allowance from
    the release bf16 decode's own error, as the data maker calibrates it. One thread: tiny decodes are overhead."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    w = random_weights(seed=3)
    z = torch.randn(1, 8, 2, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    ref = reference.decode_fp32(z, w).to(torch.float16)
    d = (reference.decode_bf16(z, w).float() - ref.float())
    yield z, w, ref, spec.allowance_from(float(d.abs().max()), float(d.pow(2).mean().sqrt()))
    torch.set_num_threads(threads)


def solution_video(path, z, w, world):
    """Rank 0's video from a solution file run in this process (the fixtures below decode on rank 0 alone)."""
    out = torch.full((1, 3, spec.frames(z.shape[2]), *spec.TINY.video_hw), float("nan"), dtype=torch.bfloat16)
    loader.load(path).module.run(z, [t.to(torch.bfloat16) for t in w], 0, world, None, out)
    return out


@pytest.mark.parametrize("world, words", [
    (2, "rows 32 = the seam between ranks 0 and 1"),
    (4, "rows 16, 32, 48 = the seams between ranks 0 and 1, 1 and 2, 2 and 3"),
])
def test_a_wrong_seam_row_is_named(decode, world, words):
    z, w, ref, allow = decode
    out = solution_video(os.path.join(BROKEN, "wrong_seam.py"), z, w, world)
    assert checks.judge(checks.figures(out, ref, "cpu"), allow)[0] == "incorrect"
    m = error_maps.measure(out, ref, "cpu", allow, world, spec.TINY).summary
    seams = spec.video_seams(world, spec.TINY)
    assert m["rows"] == [[s, s] for s in seams] and m["columns"] == [] and m["seams"] == seams, m
    assert m["rows_words"] == words.replace("rows 32", "row 32"), m["rows_words"]
    assert m["words"].startswith(f"errors concentrate on {m['rows_words']}, every column"), m["words"]
    assert m["frames_over"] == spec.frames(2)                     # every frame has the seam


def test_a_shifted_frame_is_named(decode):
    z, w, ref, allow = decode
    out = solution_video(os.path.join(BROKEN, "shifted_frame.py"), z, w, 1)
    m = error_maps.measure(out, ref, "cpu", allow, 1, spec.TINY).summary
    assert m["worst_frame"] == 1 and m["frames_over_runs"] == [[1, 1]], m
    assert "worst frame 1 (frame 1 of 4 of latent frame 1)" in m["words"] and "1 of 5 frames over" in m["words"]
    assert m["rows"] == [] and m["columns"] == [], m                # the whole frame is wrong


def test_an_honest_decode_is_spread_and_within_the_allowance(decode):
    z, w, ref, allow = decode
    m = error_maps.measure(solution_video(os.path.join(ROOT, "solutions", "reference"), z, w, 2), ref, "cpu", allow, 2,
                     spec.TINY).summary
    assert m["rows"] == [] and m["columns"] == [] and m["frames_over"] == 0, m
    assert "errors spread over every row and column" in m["words"] and "no frame over the allowance" in m["words"]


def test_non_finite_elements_are_located_first(decode):
    """Unwritten elements (the NaN poison) outrank any size of error: their frame is the worst, their rows named."""
    z, w, ref, allow = decode
    out = reference.decode_bf16(z, w)
    out[:, :, 0] += 0.5                                       # a large error on frame 0
    out[:, :, 3, -8:, 10:20] = float("nan")                   # unwritten: frame 3's bottom rows
    m = error_maps.measure(out, ref, "cpu", allow, 1, spec.TINY).summary
    assert m["nonfinite"] == 3 * 8 * 10 and m["worst_frame"] == 3, m
    assert m["rows"] == [[56, 63]] and m["columns"] == [[10, 19]], m
    assert m["words"].startswith("240 elements not finite; non-finite elements concentrate on rows 56-63 = the bottom "
                                 "edge, columns 10-19"), m["words"]


def test_the_pictures_go_into_a_folder_of_the_run(decode, tmp_path, monkeypatch):
    """Without a report: error-maps/<UTC time>-<pid>/ under the working directory, made with its first picture;
    without matplotlib a map keeps its words, and said() names what is missing."""
    z, w, ref, allow = decode
    monkeypatch.chdir(tmp_path)
    assert error_maps.Atlas(spec.TINY, report="r").folder == os.path.join("r", "maps")
    atlas = error_maps.Atlas(spec.TINY)
    assert re.fullmatch(r"error-maps/\d{8}-\d{6}-\d+", atlas.folder), atlas.folder
    out = reference.decode_bf16(z, w)
    out[:, :, 1] += 0.5
    for key in ("a", "b"):
        atlas.take(key, out, ref, "cpu", allow, 1)
    assert atlas.said() is None and not os.path.exists("error-maps")      # nothing drawn yet: no folder
    monkeypatch.setattr(plot, "available", lambda: False)                  # no matplotlib: the words, no picture
    m = atlas.draw("a", "a")
    assert m["picture"] is None and "worst frame 1" in m["words"] and not os.path.exists("error-maps")
    monkeypatch.setattr(plot, "available", lambda: True)
    picture = atlas.draw("b", "b")["picture"]
    assert picture == os.path.join(atlas.folder, "b.png") and os.path.isfile(picture)
    assert atlas.said() == f"error maps: 1 drawn in {atlas.folder}/; 1 not drawn: drawing {plot.MISSING}"


def test_frame_words_and_concentrations():
    assert error_maps.frame_words(0, 121) == "frame 0 (the causal first frame)"
    assert error_maps.frame_words(5, 121) == "frame 5 (frame 1 of 4 of latent frame 2)"
    assert error_maps.frame_words(120, 121) == "frame 120 (frame 4 of 4 of latent frame 30, the last frame)"
    flat = torch.full((704,), 1.0).numpy()
    assert error_maps.concentration(flat) == []
    seam = flat.copy()
    seam[351:354] = [20.0, 50.0, 20.0]
    assert error_maps.concentration(seam) == [[351, 353]]
    band = flat.copy()
    band[352:] += 3.0
    assert error_maps.concentration(band, [352], [(0, 352), (352, 704)]) == [[352, 703]]
    assert error_maps.concentration(band) == []                      # without the bands: half the rows, spread


def test_values_near_the_largest_bf16_are_measured_and_drawn(decode, tmp_path, monkeypatch):
    """A row of 3e38 (finite in bf16, its square not in float32) is measured finite and drawn; a picture that
    matplotlib refuses leaves its words and the reason, never an exception out of the run."""
    z, w, ref, allow = decode
    monkeypatch.chdir(tmp_path)
    out = reference.decode_bf16(z, w)
    out[:, :, :, 3] = 3e38
    atlas = error_maps.Atlas(spec.TINY)
    atlas.take("a", out, ref, "cpu", allow, 1)
    m = atlas.kept["a"]
    assert m.row_sq.max() > 1e76 and math.isfinite(m.frame_rms().max()) and m.summary["rows"] == [[3, 3]], m.summary
    if plot.available():
        assert os.path.isfile(atlas.draw("a", "a")["picture"])
    atlas.take("b", out, ref, "cpu", allow, 1)
    monkeypatch.setattr(error_maps, "draw", lambda *a: (_ for _ in ()).throw(ValueError("Invalid vmin or vmax")))
    assert atlas.draw("b", "b")["picture"] is None
    assert atlas.said().endswith("1 not drawn: ValueError: Invalid vmin or vmax"), atlas.said()
