"""reference.py against diffusers' AutoencoderKLWan: bit for bit in fp32 and in the release's bf16 decode."""
import pytest
import torch

import reference
import spec

diffusers = pytest.importorskip("diffusers")


def diffusers_model(geometry, seed=0):
    """diffusers' model at a geometry with random weights, and the same weights as run()'s list."""
    cfg = dict(base_dim=16, decoder_base_dim=geometry.base_dim, z_dim=geometry.latent_channels,
               dim_mult=[1, 2, 4, 4], num_res_blocks=2, temperal_downsample=[False, True, True], is_residual=True,
               in_channels=12, out_channels=12, patch_size=2)
    model = diffusers.AutoencoderKLWan(**cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    weights = []
    for name, p in model.named_parameters():
        if name.startswith(("encoder.", "quant_conv.")):
            continue
        if name.endswith("gamma"):
            value = 1 + 0.2 * torch.randn(p.shape, generator=gen)
        elif name.endswith("bias"):
            value = 0.05 * torch.randn(p.shape, generator=gen)
        else:
            value = torch.randn(p.shape, generator=gen) / p[0].numel() ** 0.5
        with torch.no_grad():
            p.copy_(value)
        weights.append(value)
    return model, weights


@pytest.mark.parametrize("t, hw, z_dim, base", [
    (1, (2, 3), 8, 8),     # T = 1: the first-chunk path alone (no time conv, DupUp trim)
    (2, (2, 3), 8, 8),     # the second chunk: time conv with zero frames in front
    (4, (3, 5), 8, 8),     # odd latent size, caches topped up from the previous chunk
    (5, (5, 3), 16, 4),    # other widths: 16 latent channels, base 4 (attention over 16 channels)
])
def test_fp32_bit_exact_against_diffusers(t, hw, z_dim, base):
    g = spec.Geometry("test", z_dim, hw, base)
    model, weights = diffusers_model(g)
    assert [n for n, _ in model.named_parameters() if not n.startswith(("encoder.", "quant_conv."))] == \
        [n for n, _ in spec.weight_list(g)]
    z = torch.randn(1, z_dim, t, *hw, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model._decode(z).sample
        got = reference.decode(z, weights)
    assert got.shape == (1, 3, 4 * t - 3, 16 * hw[0], 16 * hw[1])
    assert torch.equal(got, expected), f"max |diff| {(got - expected).abs().max().item()}"


def test_fp32_bit_exact_batch_of_two():
    g = spec.Geometry("test", 8, (2, 3), 8)
    model, weights = diffusers_model(g, seed=3)
    z = torch.randn(2, 8, 3, 2, 3, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert torch.equal(reference.decode(z, weights), model._decode(z).sample)


@pytest.mark.parametrize("t", [1, 3])
def test_release_bf16_decode_equals_diffusers(t):
    """The release's bf16 decode: diffusers' model in bf16 under bf16 autocast, latents rounded to bf16."""
    g = spec.Geometry("test", 8, (3, 4), 8)
    model, weights = diffusers_model(g, seed=5)
    z = torch.randn(1, 8, t, 3, 4, generator=torch.Generator().manual_seed(6))
    model = model.to(torch.bfloat16)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = model._decode(z.to(torch.bfloat16)).sample
        got = reference.decode_bf16(z, weights)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, expected)


def test_bf16_differs_from_fp32_but_not_by_much():
    """The calibration rests on the bf16 decode being a slightly wrong fp32 decode; check that premise."""
    g = spec.Geometry("test", 8, (3, 4), 8)
    _, weights = diffusers_model(g, seed=7)
    z = torch.randn(1, 8, 3, 3, 4, generator=torch.Generator().manual_seed(8))
    a, b = reference.decode_fp32(z, weights), reference.decode_bf16(z, weights).float()
    err = (a - b).abs().max().item()
    assert 1e-4 < err < 0.2


def test_decode_writes_into_out_and_checks_its_shape():
    g = spec.Geometry("test", 8, (2, 3), 8)
    _, weights = diffusers_model(g)
    z = torch.randn(1, 8, 2, 2, 3)
    out = torch.full((1, 3, 5, 32, 48), float("nan"))
    assert reference.decode(z, weights, out=out) is out
    assert torch.isfinite(out).all()
    with pytest.raises(ValueError, match=r"out is \[1, 3, 4, 32, 48\]"):
        reference.decode(z, weights, out=torch.empty(1, 3, 4, 32, 48))


def test_run_is_a_solution_computing_the_bf16_decode_on_rank_0():
    g = spec.Geometry("test", 8, (2, 3), 8)
    _, weights = diffusers_model(g)
    z = torch.randn(1, 8, 2, 2, 3).to(torch.bfloat16)
    w16 = [w.to(torch.bfloat16) for w in weights]
    out = torch.full((1, 3, 5, 32, 48), float("nan"), dtype=torch.bfloat16)
    reference.run(z, w16, 0, 1, None, out)
    assert torch.equal(out, reference.decode_bf16(z, w16))
    other = torch.empty(0, dtype=torch.bfloat16)
    reference.run(z, w16, 1, 2, None, other)   # other ranks: nothing to do, nothing written
    assert other.numel() == 0


def test_wrong_weights_are_named():
    g = spec.Geometry("test", 8, (2, 3), 8)
    _, weights = diffusers_model(g)
    weights[10] = weights[10][:, :, :1]
    with pytest.raises(ValueError, match="tensor 10 is .* expected decoder.mid_block.resnets.0.conv1.weight"):
        reference.decode(torch.randn(1, 8, 1, 2, 3), weights)
