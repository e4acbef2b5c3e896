"""A precision census of what prepare() returns, taken in the rank right after it (a second line, like guards.py:
it can only fail a solution). The task allows bf16 weights and nothing narrower; a weight kept as int8 or fp8, or as
bf16 values rounded to a coarse grid (quantised and dequantised), has output channels holding far fewer distinct
values than bf16 gives them."""
import statistics

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
    """['tensor i: why', ...] of the tensors that are narrower than bf16."""
    out = []
    for i, t in enumerate(tensors):
        name = str(t.dtype).replace("torch.", "")
        if name.startswith(NARROW_DTYPES) and t.numel() >= MAX_DISTINCT:
            out.append(f"tensor {i} is {name} {list(t.shape)}")
            continue
        # Judged by what it stores: a broadcast view of fewer values than a judged row (a stand-in) holds no weight.
        if not t.is_floating_point() or t.dim() < 2 or t.untyped_storage().nbytes() < MIN_ROW * t.element_size():
            continue
        for label, rows in (("output channel", t.reshape(t.shape[0], -1)), ("row", t.reshape(-1, t.shape[-1]))):
            if rows.shape[1] >= MIN_ROW:
                distinct = statistics.median(_distinct_per_row(rows.detach()))
                if distinct <= MAX_DISTINCT:
                    out.append(f"tensor {i} {list(t.shape)}: a median {label} of {rows.shape[1]} elements holds "
                               f"{distinct:.0f} distinct values (an 8-bit grid holds at most {MAX_DISTINCT})")
                    break
    return out
