"""A precision census of what prepare() returns, taken in the rank right after it (a second line, like guards.py:
it can only fail a solution). The task allows bf16 weights and nothing narrower; a weight kept as int8 or fp8, or as
bf16 values rounded to a coarse grid (quantised and dequantised), has output channels holding far fewer distinct
values than bf16 gives them.

Each tensor is judged as it is stored. It must be a plain dense tensor (a subclass's methods are the solution's
code); a view that repeats stored elements fails, except a stand-in (spec.stand_in: one value, no weight); and a
tensor that the census cannot read fails."""
import statistics

import spec

NARROW_DTYPES = ("int8", "uint8", "float8", "int4", "uint4", "qint", "quint")
MIN_ROW = 512         # a row (output channel, or innermost dimension) of at least this many elements is judged ...
MAX_DISTINCT = 256    # ... and holds at most this many distinct values when it is on an 8-bit grid
SAMPLE_ROWS = 64


def _distinct_per_row(rows):
    import torch
    if rows.shape[0] > SAMPLE_ROWS:
        rows = rows[torch.linspace(0, rows.shape[0] - 1, SAMPLE_ROWS).long().to(rows.device)]
    s = rows.float().sort(dim=1).values
    return ((s[:, 1:] != s[:, :-1]).sum(1) + 1).tolist()


def narrow(tensors):
    """['tensor i why', ...] of the tensors that are narrower than bf16, or that the census cannot judge."""
    out = []
    for i, t in enumerate(tensors):
        try:
            why = _judge(t)
        except Exception as e:            # what the census cannot read, it cannot pass
            why = f"cannot be judged ({type(e).__name__}: {str(e)[:120]})"
        if why:
            out.append(f"tensor {i} {why}")
    return out


def _judge(t):
    import torch
    if type(t) not in (torch.Tensor, torch.nn.Parameter):   # a subclass's methods are the solution's code
        return f"is a {type(t).__name__}, not a plain tensor"
    if t.layout != torch.strided or t.is_nested or t.device.type == "meta":
        return f"is not a dense tensor with data ({t.layout}, {t.device.type})"
    name = str(t.dtype).replace("torch.", "")
    if name.startswith(NARROW_DTYPES) and t.numel() >= MAX_DISTINCT:
        return f"is {name} {list(t.shape)}"
    if spec.is_stand_in(t):
        return None
    stored = t.untyped_storage().nbytes() // t.element_size()
    if t.numel() > stored:                # a view that repeats its elements holds fewer values than it shows
        return f"{list(t.shape)} repeats the {stored} elements its storage holds"
    if not t.is_floating_point() or t.dim() < 2:
        return None
    for label, rows in (("output channel", t.reshape(t.shape[0], -1)), ("row", t.reshape(-1, t.shape[-1]))):
        if rows.shape[1] >= MIN_ROW:
            distinct = statistics.median(_distinct_per_row(rows.detach()))
            if distinct <= MAX_DISTINCT:
                return (f"{list(t.shape)}: a median {label} of {rows.shape[1]} elements holds {distinct:.0f} "
                        f"distinct values (an 8-bit grid holds at most {MAX_DISTINCT})")
    return None
