"""The data maker on the tiny geometry (CPU): the files it writes are what spec's loaders read, the references are
the fp32 decode and its prefixes, the synthetic data is deterministic from --seed and not degenerate, a new data set
without --seed gets a secret seed of its own, the manifest makes reruns skip, repair and redo the right files, and
real checkpoints and latents import in both layouts.

Cost: the whole tiny data set is conftest's tiny_data (made once per session, shared with the other test files); the
tests that change data work on copies of one small set (f17, seed 0) or make sets of the f1 clip only (the cheapest).
The slow tier (-m slow) has what makes another whole data set."""
import json
import math
import os
import pathlib
import re

import pytest
import torch

import reference
import spec
from conftest import private_copy
from data import checkpoint, make, store, synth

G = spec.TINY


def run(*args):
    return make.main(["--tiny", *args])


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The tiny data set of f17 (so f1, f5 and f17) from seed 0: one source decoded to 5 latent frames."""
    root = tmp_path_factory.mktemp("small")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DATA", str(root))
        assert run("--clips", "f17", "--seed", "0") == 0
    return root


@pytest.fixture
def full(tiny_data):
    """The whole tiny data set (three sources decoded to 31, 61 and 121 latent frames): conftest's tiny_data, made by
    `python -m data.make --tiny` as the harness would, so from a secret seed. Shared: read it, never change it."""
    return pathlib.Path(tiny_data["DATA"])


@pytest.fixture(scope="module")
def full_seed0(tmp_path_factory):
    """The whole tiny data set from seed 0 (another whole data set: slow)."""
    root = tmp_path_factory.mktemp("full0")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DATA", str(root))
        assert run("--seed", "0") == 0
    return root


@pytest.fixture
def copy_of_small(small, tmp_path, monkeypatch):
    """A private copy of the f17 data set, as $DATA, for tests that change it."""
    return private_copy(small, tmp_path, monkeypatch)


def mtimes(folder):
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def weights32(geometry=G):
    return [w.float() for w in spec.load_weights("cpu", geometry)]


def recorded_seeds(folder):
    """The seeds that the synthetic recipes in a data folder's manifest name."""
    files = json.loads((folder / spec.MANIFEST_FILE).read_text())["files"]
    return {e["recipe"][part]["seed"] for e in files.values() for part in ("weights", "latents")
            if e["recipe"].get(part, {}).get("kind") == "synthetic"}


# --- formats ------------------------------------------------------------------------------------------------------

def test_every_spec_loader_accepts_the_files(full, monkeypatch):
    monkeypatch.setenv("DATA", str(full))
    weights = spec.load_weights("cpu", G)
    assert all(w.dtype == torch.bfloat16 and w.is_contiguous() for w in weights)
    names = json.loads((full / "tiny" / spec.NAMES_FILE).read_text())
    assert [(e["name"], tuple(e["shape"])) for e in names] == list(spec.weight_list(G))
    for source in spec.SOURCES:
        assert spec.load_latents(source, G).shape == (1, G.latent_channels, spec.SOURCE_FRAMES, *G.latent_hw)
    for w in spec.WORKLOADS:
        z, = spec.make_inputs(w, "cpu", G)
        assert z.dtype == torch.bfloat16 and z.shape[2] == spec.WORKLOADS[w].latent_frames
    for clip in spec.CLIPS:
        video = spec.load_reference(clip, G)
        assert video.shape == spec.output_shape(f"{clip}x1", G) and video.dtype == torch.float16
        entry = spec.calibration(clip, G)
        assert {"video_std", "clamped_fraction"} <= set(entry)
        assert spec.allowance(clip, G)["rms"] == spec.ERROR_FACTOR * entry["bf16_rms"]
        # a ref holds its own frames only, not the storage of the longest decode it was sliced from
        assert os.path.getsize(full / "tiny" / f"ref_{clip}.pt") < video.numel() * 2 + 4096


def test_manifest_describes_every_file(full):
    files = json.loads((full / "tiny" / spec.MANIFEST_FILE).read_text())["files"]
    expected = {spec.WEIGHTS_FILE, spec.NAMES_FILE, spec.CALIBRATION_FILE, *(f"latents_{s}.pt" for s in spec.SOURCES),
                *(f"ref_{c}.pt" for c in spec.CLIPS)}
    assert set(files) == expected
    for name, entry in files.items():
        assert entry["size"] == os.path.getsize(full / "tiny" / name)
        assert entry["sha256"] == store.sha256(full / "tiny" / name)
        assert entry["recipe"]["format"] == store.FORMAT and entry["recipe"]["geometry"] == "tiny"
    seed, = recorded_seeds(full / "tiny")  # one seed for everything, the one drawn when the set was new
    assert files["ref_f241.pt"]["recipe"]["weights"] == {"kind": "synthetic", "seed": seed}
    assert files["ref_f241.pt"]["recipe"]["latents"] == {"kind": "synthetic", "seed": seed}
    assert not [n for n in os.listdir(full / "tiny") if n.startswith(store.TMP_PREFIX)]


# --- references and calibration -----------------------------------------------------------------------------------

def test_refs_are_prefixes_of_one_decode(full, monkeypatch):
    """ref_f5 (sliced from the T = 31 decode) is bit-equal to an independent fp32 decode of 2 latent frames."""
    monkeypatch.setenv("DATA", str(full))
    z = spec.load_latents("row_000168", G)[:, :, :2].contiguous()
    alone = reference.decode_fp32(z, weights32()).to(torch.float16)
    assert torch.equal(spec.load_reference("f5", G), alone)
    f121 = spec.load_reference("f121", G)
    for clip in ("f1", "f5", "f17"):
        ref = spec.load_reference(clip, G)
        assert torch.equal(ref, f121[:, :, :ref.shape[2]])


def test_calibration_is_the_bf16_decode_against_the_stored_ref(full, monkeypatch):
    monkeypatch.setenv("DATA", str(full))
    cal = json.loads((full / "tiny" / spec.CALIBRATION_FILE).read_text())
    for clip, e in cal.items():
        assert set(spec.CALIBRATION_FIELDS) | {"video_std", "clamped_fraction"} <= set(e)
        assert 0 < e["bf16_mean_abs"] <= e["bf16_rms"] <= e["bf16_max_abs"] < 0.5
        assert math.isfinite(e["bf16_psnr_db"])
        assert e["bf16_psnr_db"] == pytest.approx(10 * math.log10(4 / e["bf16_rms"] ** 2))
        assert e["fp32_decode_s"] > 0 and e["bf16_decode_s"] > 0
    # the times are those of one decode per source, at each clip's last latent frame
    assert cal["f1"]["fp32_decode_s"] < cal["f5"]["fp32_decode_s"] < cal["f17"]["fp32_decode_s"] \
        < cal["f121"]["fp32_decode_s"]
    # recomputed independently for f17. The maker's bf16 decode ran in a worker thread beside others, where the CPU
    # convs' sums may be split differently: a bf16 ulp here and there (0.4% of the largest error, 1e-5 of the rms
    # was seen under load). A wrong statistic, clip or reference is off by far more.
    z, = spec.make_inputs("f17x1", "cpu", G)
    d = reference.decode_bf16(z, spec.load_weights("cpu", G)).float() - spec.load_reference("f17", G).float()
    assert cal["f17"]["bf16_max_abs"] == pytest.approx(d.abs().max().item(), rel=1e-2)
    assert cal["f17"]["bf16_rms"] == pytest.approx(d.square().mean().sqrt().item(), rel=1e-3)


@pytest.mark.parametrize("data", ["small", pytest.param("full_seed0", marks=pytest.mark.slow)])
def test_synthetic_output_is_not_degenerate(data, request):
    """Every clip's video from seed 0 varies (std well above 0.1) and is rarely at the clamp (< 1% of its pixels):
    f1, f5 and f17 in the default tier, all six in the slow one. (Other seeds' tiny videos spread: f1's std from
    about 0.08 to 0.3, up to about 1% clamped, so these bounds are for seed 0.)"""
    cal = json.loads((request.getfixturevalue(data) / "tiny" / spec.CALIBRATION_FILE).read_text())
    for clip, e in cal.items():
        assert e["video_std"] > (0.15 if clip != "f1" else 0.12), clip
        assert e["clamped_fraction"] < 0.01, clip


def test_output_depends_on_latents_and_weights(small, monkeypatch):
    """Other latents, or other weights, change the decode by about as much as the video varies."""
    monkeypatch.setenv("DATA", str(small))
    ref = spec.load_reference("f17", G).float()
    z = spec.load_latents("row_000168", G)[:, :, :5].contiguous()
    other_z = synth.latents(G, 1, "row_000168")[:, :, :5].contiguous()
    other_w = [w.to(torch.bfloat16).float() for w in synth.weights(G, 1)]
    for video in (reference.decode_fp32(other_z, weights32()), reference.decode_fp32(z, other_w)):
        assert (video - ref).square().mean().sqrt() > 0.5 * ref.std()


# --- synthetic data -----------------------------------------------------------------------------------------------

def test_synthetic_data_is_deterministic(small):
    w0, w1, w2 = synth.weights(G, 0), synth.weights(G, 0), synth.weights(G, 1)
    assert all(torch.equal(a, b) for a, b in zip(w0, w1))
    assert not any(torch.equal(a, b) for a, b in zip(w0, w2) if a.numel() > 1)
    assert torch.equal(synth.latents(G, 0, "row_000090"), synth.latents(G, 0, "row_000090"))
    assert not torch.equal(synth.latents(G, 0, "row_000090"), synth.latents(G, 0, "row_000129"))
    assert not torch.equal(synth.latents(G, 0, "row_000090"), synth.latents(G, 1, "row_000090"))
    # the shipped files are the generators' output (the weights rounded to bf16)
    shipped = torch.load(small / "tiny" / spec.WEIGHTS_FILE, weights_only=True)
    assert all(torch.equal(s, w.to(torch.bfloat16)) for s, w in zip(shipped, w0))
    z = torch.load(small / "tiny" / "latents_row_000168.pt", weights_only=True)["latents"]
    assert torch.equal(z, synth.latents(G, 0, "row_000168"))


def test_fresh_latents_depend_on_seed_and_key():
    """synth.latents(geometry, seed, key, frames), as the gate draws fresh latents: equal arguments give equal
    latents, another seed or key independent ones (not shifted or scaled copies)."""
    seed = 2 ** 61 + 12345
    a = synth.latents(G, seed, "ci/0", frames=2)
    assert a.shape == (1, G.latent_channels, 2, *G.latent_hw) and a.dtype == torch.float32
    assert torch.equal(a, synth.latents(G, seed, "ci/0", frames=2))
    centred = lambda z: z - z.mean((2, 3, 4), keepdim=True)  # noqa: E731
    for other in (synth.latents(G, seed, "ci/1", frames=2), synth.latents(G, seed + 1, "ci/0", frames=2),
                  synth.latents(G, seed + 2 ** 32, "ci/0", frames=2)):  # torch's CPU generator keeps 32 bits
        x, y = centred(a).flatten(), centred(other).flatten()
        assert abs(torch.dot(x, y) / (x.norm() * y.norm())) < 0.3
    streams = [synth.stream_seed(s, k) for s in (0, 1, seed) for k in ("weights", "latents/ci/0", "latents/ci/1")]
    assert len(set(streams)) == len(streams) and all(0 <= v < 2 ** 63 for v in streams)


def test_synthetic_weights_look_trained():
    for (name, shape), w in zip(spec.weight_list(spec.TINY), synth.weights(spec.TINY, 0)):
        assert tuple(w.shape) == shape and w.dtype == torch.float32
        if name.endswith(".gamma"):
            assert 0.9 < w.mean() < 1.1 and w.std() < 0.2
        elif name.endswith(".weight"):
            gain = synth.CONV_OUT_GAIN if name == "decoder.conv_out.weight" else 1.0
            assert w.std() == pytest.approx(gain / math.sqrt(math.prod(shape[1:])), rel=0.25), name


@pytest.mark.parametrize("geometry", [spec.TINY, spec.FULL], ids=["tiny", "full"])
def test_latents_are_a_smooth_field_with_the_vae_statistics(geometry):
    z = synth.latents(geometry, 0, "row_000168")
    c = geometry.latent_channels
    assert z.shape == (1, c, spec.SOURCE_FRAMES, *geometry.latent_hw) and z.dtype == torch.float32
    flat = z[0].reshape(c, -1)
    assert torch.allclose(flat.mean(1), torch.tensor(spec.LATENTS_MEAN[:c]), atol=1e-4)
    assert torch.allclose(flat.std(1), torch.tensor(spec.LATENTS_STD[:c]), rtol=1e-4)
    x = (z - z.mean((2, 3, 4), keepdim=True)) / z.std((2, 3, 4), keepdim=True)
    for dim in (2, 3, 4):  # lag-1 correlation along time, rows, columns: white noise would give about 0
        n = x.shape[dim] - 1
        lag1 = (x.narrow(dim, 0, n) * x.narrow(dim, 1, n)).mean().item()
        assert lag1 > 0.7, (dim, lag1)


# --- manifest: skip, repair, redo ---------------------------------------------------------------------------------

def test_rerun_skips_everything(copy_of_small, capsys):
    before = mtimes(copy_of_small)
    assert run("--clips", "f17") == 0
    out = capsys.readouterr().out
    for name in (spec.WEIGHTS_FILE, spec.NAMES_FILE, "latents_row_000168.pt", "ref_f1.pt", "ref_f5.pt", "ref_f17.pt"):
        assert f"skipped {name} (up to date)" in out
    assert "wrote" not in out and "making" not in out and "decoding" not in out
    assert mtimes(copy_of_small) == before


def test_a_new_data_set_gets_a_secret_seed(tmp_path, monkeypatch, capsys):
    """Without --seed a new data set (here of f1, the cheapest) draws a secret seed: not 0, another per data set,
    recorded in manifest.json only: not printed, not in a file name or another file. A rerun keeps it and remakes
    nothing; a new source's latents use it too; ensure() draws one for a new set as well."""
    seeds, latents = [], []
    for name in ("a", "b"):
        monkeypatch.setenv("DATA", str(tmp_path / name))
        assert run("--clips", "f1") == 0
        out = capsys.readouterr()
        folder = tmp_path / name / "tiny"
        seed, = recorded_seeds(folder)
        assert type(seed) is int and seed != 0
        assert "secret" in out.out and str(seed) not in out.out + out.err
        assert not any(str(seed) in n for n in os.listdir(folder))
        for text in (spec.CALIBRATION_FILE, spec.NAMES_FILE):
            assert str(seed) not in (folder / text).read_text()
        seeds.append(seed)
        latents.append(spec.load_latents("row_000168", G))
    assert seeds[0] != seeds[1] and not torch.equal(latents[0], latents[1])
    assert torch.equal(latents[1], synth.latents(G, seeds[1], "row_000168"))
    # a rerun without --seed (or with the recorded one) keeps the seed and remakes nothing
    before = mtimes(folder)
    for args in ((), ("--seed", str(seeds[1]))):
        assert run("--clips", "f1", *args) == 0
        out = capsys.readouterr().out
        assert "skipped latents_row_000168.pt (up to date)" in out and "skipped ref_f1.pt (up to date)" in out
        assert "making" not in out and "decoding" not in out and "secret" not in out
        assert mtimes(folder) == before and recorded_seeds(folder) == {seeds[1]}
    # another source's latents, when a clip needs them, come from the recorded seed
    maker = make._Maker(G, False, make.Display(bars=False))
    _, origins = maker.origins(None, None, None, ["row_000168", "row_000129"])
    assert {o["seed"] for o, _ in origins.values()} == {seeds[1]}
    capsys.readouterr()
    # the harness's ensure() on a new folder
    monkeypatch.setenv("DATA", str(tmp_path / "c"))
    make.ensure(["f1"], G, progress=False)
    seed, = recorded_seeds(tmp_path / "c" / "tiny")
    assert seed not in (0, *seeds) and str(seed) not in "".join(capsys.readouterr())


def test_seed_gives_the_same_data(tmp_path, monkeypatch):
    """--seed N makes the same data in any folder, and records N."""
    made = []
    for name in ("a", "b"):
        monkeypatch.setenv("DATA", str(tmp_path / name))
        assert run("--clips", "f1", "--seed", "7") == 0
        assert recorded_seeds(tmp_path / name / "tiny") == {7}
        made.append((spec.load_latents("row_000168", G), spec.load_weights("cpu", G), spec.load_reference("f1", G)))
    (za, wa, ra), (zb, wb, rb) = made
    assert torch.equal(za, zb) and torch.equal(ra, rb) and all(torch.equal(a, b) for a, b in zip(wa, wb))
    assert torch.equal(za, synth.latents(G, 7, "row_000168"))


def test_corrupt_ref_is_detected_and_remade(copy_of_small, capsys):
    path = copy_of_small / "ref_f5.pt"
    good = path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    path.write_bytes(bytes(bad))
    assert run("--clips", "f17") == 0
    out = capsys.readouterr().out
    assert "remaking ref_f5.pt: corrupt" in out and "wrote ref_f5.pt" in out
    assert path.read_bytes() == good  # the CPU decode is deterministic
    assert "skipped decoder_weights_bf16.pt" in out and "skipped latents_row_000168.pt" in out


def test_another_seed_remakes_what_depends_on_it(copy_of_small, capsys):
    old_weights = (copy_of_small / spec.WEIGHTS_FILE).read_bytes()
    old_f5 = (copy_of_small / "ref_f5.pt").read_bytes()
    assert run("--clips", "f5", "--seed", "1") == 0
    out = capsys.readouterr().out
    assert "remaking decoder_weights_bf16.pt: made from another recipe" in out
    assert "remaking latents_row_000168.pt: made from another recipe" in out
    assert "skipped weight_names.json" in out
    assert (copy_of_small / spec.WEIGHTS_FILE).read_bytes() != old_weights
    assert (copy_of_small / "ref_f5.pt").read_bytes() != old_f5
    # f17 was made from seed 0 and is not needed now: it goes, with its calibration entry
    assert "removed ref_f17.pt" in out and not (copy_of_small / "ref_f17.pt").exists()
    cal = json.loads((copy_of_small / spec.CALIBRATION_FILE).read_text())
    assert set(cal) == {"f1", "f5"}
    manifest = json.loads((copy_of_small / spec.MANIFEST_FILE).read_text())["files"]
    assert manifest["ref_f5.pt"]["recipe"]["weights"] == {"kind": "synthetic", "seed": 1}
    # a rerun without --seed keeps the folder's recipe (seed 1)
    assert run("--clips", "f5") == 0
    assert "remaking" not in capsys.readouterr().out


def test_unwritable_data_folder_is_a_clear_error(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DATA", str(blocker))
    assert run("--clips", "f1") == 1
    err = capsys.readouterr().err
    assert "DATA=" in err and str(blocker / "tiny") in err
    with pytest.raises(make.DataDirError, match="DATA="):
        make.ensure(["f1"], G, progress=False)


def test_an_interrupted_write_leaves_nothing(tmp_path):
    def write(f):
        f.write(b"half")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        store.write_atomic(tmp_path / "x.pt", write)
    assert os.listdir(tmp_path) == []


def test_ensure_makes_only_what_is_missing(copy_of_small, monkeypatch):
    (copy_of_small / "ref_f5.pt").unlink()
    before = mtimes(copy_of_small)
    make.ensure(["f5"], G, progress=False)
    after = mtimes(copy_of_small)
    assert (copy_of_small / "ref_f5.pt").exists()
    for name in (spec.WEIGHTS_FILE, spec.NAMES_FILE, "latents_row_000168.pt", "ref_f17.pt"):
        assert after[name] == before[name], name
    spec.load_reference("f5", G), spec.calibration("f17", G)

    def no_make(*args, **kwargs):
        raise AssertionError("ensure made data that was there")
    monkeypatch.setattr(make, "make", no_make)
    make.ensure(["f1", "f17"], G, progress=False)  # all there: the quick check only


def test_ensure_notices_refs_of_other_weights(copy_of_small):
    """A ref whose recipe does not match the weights in the folder is not 'present', though its size is right."""
    manifest = json.loads((copy_of_small / spec.MANIFEST_FILE).read_text())
    manifest["files"][spec.WEIGHTS_FILE]["recipe"]["weights"]["seed"] = 5
    (copy_of_small / spec.MANIFEST_FILE).write_text(json.dumps(manifest))
    assert not make._present(str(copy_of_small), G, make.expand(["f5"]))


def test_clips_expand_to_the_shorter_clips_of_their_source():
    assert make.expand(["f121"]) == ["f1", "f5", "f17", "f121"]
    assert make.expand(["f241"]) == ["f241"]
    assert make.expand(None) == list(spec.CLIPS)
    with pytest.raises(ValueError, match="f9"):
        make.expand(["f9"])


# --- real checkpoints and latents ---------------------------------------------------------------------------------

RESIDUAL = {"norm1.gamma": "residual.0.gamma", "conv1": "residual.2", "norm2.gamma": "residual.3.gamma",
            "conv2": "residual.6", "conv_shortcut": "shortcut"}


def wan_key(name):
    """The original Wan2.2 key of a diffusers name, written out here independently of data.checkpoint."""
    rules = [(r"^post_quant_conv\.", "conv2."), (r"^decoder\.conv_in\.", "decoder.conv1."),
             (r"^decoder\.mid_block\.resnets\.0\.", "decoder.middle.0."),
             (r"^decoder\.mid_block\.attentions\.0\.", "decoder.middle.1."),
             (r"^decoder\.mid_block\.resnets\.1\.", "decoder.middle.2."),
             (r"^decoder\.up_blocks\.(\d)\.resnets\.(\d)\.", r"decoder.upsamples.\1.upsamples.\2."),
             (r"^decoder\.up_blocks\.(\d)\.upsampler\.", r"decoder.upsamples.\1.upsamples.3."),
             (r"^decoder\.norm_out\.gamma$", "decoder.head.0.gamma"), (r"^decoder\.conv_out\.", "decoder.head.2.")]
    for pattern, repl in rules:
        if re.search(pattern, name):
            key = re.sub(pattern, repl, name)
            break
    if ".resnets." in name:
        for new, old in RESIDUAL.items():
            key = re.sub(rf"\.{re.escape(new)}(\.|$)", rf".{old}\1", key)
    return key


def test_original_key_names():
    assert checkpoint.original_key("decoder.up_blocks.2.resnets.0.conv_shortcut.weight") == \
        "decoder.upsamples.2.upsamples.0.shortcut.weight"
    assert checkpoint.original_key("decoder.mid_block.resnets.1.norm2.gamma") == "decoder.middle.2.residual.3.gamma"
    assert checkpoint.original_key("decoder.up_blocks.1.upsampler.time_conv.bias") == \
        "decoder.upsamples.1.upsamples.3.time_conv.bias"
    for name, _ in spec.weight_list(spec.FULL):
        assert checkpoint.original_key(name) == wan_key(name), name


def fake_checkpoint():
    """fp32 values that bf16 cannot hold exactly, so that rounding shows."""
    return {name: w for (name, _), w in zip(spec.weight_list(G), synth.weights(G, 7))}


def write_checkpoint(layout, folder, state):
    from safetensors.torch import save_file
    extra = {"encoder.conv1.weight": torch.ones(3, 3), "encoder.head.0.gamma": torch.ones(4, 1, 1, 1)}
    if layout == "safetensors":
        path = folder / "vae.safetensors"
        save_file({**state, **extra}, str(path))
    elif layout == "diffusers-folder":
        (folder / "vae").mkdir()
        save_file({**state, **extra}, str(folder / "vae" / "diffusion_pytorch_model.safetensors"))
        path = folder
    else:
        path = folder / "Wan2.2_VAE.pth"
        original = {wan_key(n): t for n, t in state.items()}
        torch.save({"state_dict": {**original, **extra, "conv1.weight": torch.ones(2, 2)}}, path)
    return path


@pytest.mark.parametrize("layout", ["safetensors", "diffusers-folder", "pth"])
def test_checkpoint_import(layout, tmp_path, monkeypatch):
    state = fake_checkpoint()
    path = write_checkpoint(layout, tmp_path, state)
    assert all(torch.equal(a, b) for a, b in zip(checkpoint.load(str(path), G), state.values()))
    if layout == "diffusers-folder":
        return
    monkeypatch.setenv("DATA", str(tmp_path / "data"))
    assert run("--clips", "f1", "--checkpoint", str(path)) == 0
    shipped = spec.load_weights("cpu", G)
    assert all(torch.equal(s, w.to(torch.bfloat16)) for s, w in zip(shipped, state.values()))
    # the reference decodes the checkpoint's own fp32 values, not the rounded ones
    z = spec.load_latents("row_000168", G)[:, :, :1].contiguous()
    expected = reference.decode_fp32(z, list(state.values())).to(torch.float16)
    assert torch.equal(spec.load_reference("f1", G), expected)
    recipe = json.loads((tmp_path / "data" / "tiny" / spec.MANIFEST_FILE).read_text())["files"]["ref_f1.pt"]["recipe"]
    assert recipe["weights"] == {"kind": "checkpoint", "sha256": store.sha256(path)}
    # without --checkpoint a rerun keeps the imported weights, and remakes a lost ref from the recorded checkpoint
    (tmp_path / "data" / "tiny" / "ref_f1.pt").unlink()
    assert run("--clips", "f1") == 0
    assert torch.equal(spec.load_reference("f1", G), expected)
    assert all(torch.equal(s, w) for s, w in zip(spec.load_weights("cpu", G), shipped))


@pytest.mark.parametrize("layout", ["safetensors", "pth"])
def test_checkpoint_errors_name_the_file_key_and_shape(layout, tmp_path):
    missing, misshapen = fake_checkpoint(), fake_checkpoint()
    missing.pop("decoder.conv_out.bias")
    misshapen["decoder.norm_out.gamma"] = torch.ones(3, 1, 1, 1)
    for state, key, shape in ((missing, "decoder.conv_out.bias", "[12]"),
                              (misshapen, "decoder.norm_out.gamma", f"[{G.dims[4]}, 1, 1, 1]")):
        folder = tmp_path / key
        folder.mkdir()
        path = write_checkpoint(layout, folder, state)
        key = wan_key(key) if layout == "pth" else key
        with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: {re.escape(key)}.*{re.escape(shape)}"):
            checkpoint.load(str(path), G)


def test_latents_import(small, tmp_path, monkeypatch, capsys):
    src = tmp_path / "mine"
    src.mkdir()
    z = synth.latents(G, 3, "row_000168")
    torch.save({"latents": z}, src / "latents_row_000168.pt")
    folder = private_copy(small, tmp_path, monkeypatch)
    assert run("--clips", "f5", "--latents", str(src)) == 0
    assert "remaking latents_row_000168.pt: made from another recipe" in capsys.readouterr().out
    assert torch.equal(spec.load_latents("row_000168", G), z)
    assert (folder / "latents_row_000168.pt").read_bytes() == (src / "latents_row_000168.pt").read_bytes()
    torch.save({"latents": z[:, :, :100]}, src / "latents_row_000168.pt")
    assert run("--clips", "f5", "--latents", str(src)) == 1
    err = capsys.readouterr().err
    assert str(src / "latents_row_000168.pt") in err and ">= 121" in err
