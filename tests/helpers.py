"""Helpers shared by the tests (importable: pytest puts tests/ on sys.path)."""
import os

import torch

import spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def baseline():
    """solutions/baseline's module, loaded as the harness loads it."""
    import loader
    return loader.load(os.path.join(ROOT, "solutions", "baseline")).module


def random_weights(geometry=spec.TINY, seed=0, device="cpu"):
    """fp32 weights of a geometry that behave like a trained decoder's: fan-in-scaled convs, gains near 1, small
    biases; deterministic from the seed."""
    gen = torch.Generator(device=device).manual_seed(seed)
    out = []
    for name, shape in spec.weight_list(geometry):
        if name.endswith("gamma"):
            out.append(1 + 0.1 * torch.randn(shape, generator=gen, device=device))
        elif name.endswith("bias"):
            out.append(0.02 * torch.randn(shape, generator=gen, device=device))
        else:
            out.append(torch.randn(shape, generator=gen, device=device) / torch.Size(shape[1:]).numel() ** 0.5)
    return out
