"""A bad checkpoint or latents file given to the data maker: one line naming the file and what was expected (no
traceback, none of torch's or safetensors' own text), exit code 1, and the existing data set left as it was, every
file's bytes and times. Each case on a private copy of one small data set (f1, seed 0: the cheapest)."""
import os

import pytest
import torch

import spec
from conftest import private_copy
from data import make, synth

G = spec.TINY
# Text of the readers' own errors, which the line must not carry.
READER_TEXT = ("Traceback", "Unpickl", "PytorchStreamReader", "weights_only", "miniz", "zipfile", "deserializ",
               "header", "central directory", "WeightsUnpickler")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("errors")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DATA", str(root))
        assert make.main(["--tiny", "--clips", "f1", "--seed", "0"]) == 0
    return root


@pytest.fixture
def data(small, tmp_path, monkeypatch):
    return private_copy(small, tmp_path, monkeypatch)


def snapshot(folder):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def rejected(data, capsys, args, path, expected):
    """The make with `args` fails with one line naming `path` and `expected`, and the data set is unchanged."""
    before = snapshot(data)
    capsys.readouterr()
    assert make.main(["--tiny", "--clips", "f1", *args]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("data.make: error: ") and str(path) in lines[0] and expected in lines[0], lines[0]
    assert not [t for t in READER_TEXT if t.lower() in err.lower()], err
    assert "making" not in out and "remaking" not in out and "wrote" not in out
    assert snapshot(data) == before
    return lines[0]


def state():
    return {name: w for (name, _), w in zip(spec.weight_list(G), synth.weights(G, 5))}


def truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def garbage(path):
    path.write_bytes(os.urandom(4096))


@pytest.mark.parametrize("damage", [truncated, garbage, lambda p: p.write_bytes(b"")],
                         ids=["truncated", "garbage", "empty"])
def test_bad_pth_checkpoint(damage, data, tmp_path, capsys):
    path = tmp_path / "Wan2.2_VAE.pth"
    torch.save({"state_dict": {f"k{i}": w for i, w in enumerate(state().values())}}, path)
    damage(path)
    line = rejected(data, capsys, ["--checkpoint", str(path)], path, "expected the original Wan2.2 VAE's state dict")
    assert "zip archive" in line or "empty file" in line


@pytest.mark.parametrize("damage", [truncated, garbage], ids=["truncated", "garbage"])
def test_bad_safetensors_checkpoint(damage, data, tmp_path, capsys):
    from safetensors.torch import save_file
    path = tmp_path / "vae.safetensors"
    save_file(state(), str(path))
    damage(path)
    rejected(data, capsys, ["--checkpoint", str(path)], path, "expected diffusers' AutoencoderKLWan weights")


def test_checkpoint_of_wrong_shapes(data, tmp_path, capsys):
    from safetensors.torch import save_file
    path = tmp_path / "vae.safetensors"
    weights = state()
    weights["decoder.conv_in.weight"] = torch.zeros(3, 3, 3, 3, 3)
    save_file(weights, str(path))
    rejected(data, capsys, ["--checkpoint", str(path)], path,
             f"decoder.conv_in.weight is torch.float32 [3, 3, 3, 3, 3], expected shape [{G.dims[0]}, 8, 3, 3, 3]")


def latents_file(folder, z=None):
    folder.mkdir()
    path = folder / "latents_row_000168.pt"
    torch.save({"latents": synth.latents(G, 3, "row_000168") if z is None else z}, path)
    return path


@pytest.mark.parametrize("damage", [truncated, garbage], ids=["truncated", "garbage"])
def test_bad_latents_file(damage, data, tmp_path, capsys):
    path = latents_file(tmp_path / "mine")
    damage(path)
    rejected(data, capsys, ["--latents", str(tmp_path / "mine")], path,
             "expected {'latents': fp32 [1, 8, >= 121, 4, 6]}")


@pytest.mark.parametrize("z, got", [(torch.zeros(1, 8, 121, 5, 6), "torch.float32 [1, 8, 121, 5, 6]"),
                                    (torch.zeros(1, 8, 121, 4, 6, dtype=torch.float16), "torch.float16"),
                                    (torch.zeros(8, 121, 4, 6), "[8, 121, 4, 6]")], ids=["rows", "dtype", "dims"])
def test_latents_of_wrong_shapes(z, got, data, tmp_path, capsys):
    path = latents_file(tmp_path / "mine", z)
    line = rejected(data, capsys, ["--latents", str(tmp_path / "mine")], path,
                    "expected {'latents': fp32 [1, 8, >= 121")
    assert got in line
