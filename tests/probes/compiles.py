"""A probe, not a solution to time: an honest decode that runs a helper through torch.compile (the "eager" backend,
no code generated). torch.compile's first use imports torch._dynamo, which wraps torch.manual_seed in its own
disable wrapper: the rank's guards must not take that for the solution's tampering."""
import torch

import reference


def _same(x):
    return x * 1.0


def run(z, weights, rank, world, pg, out):
    reference.run(torch.compile(_same, backend="eager")(z), weights, rank, world, pg, out)
