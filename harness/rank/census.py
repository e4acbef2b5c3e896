"""A precision census of what prepare() returns, taken in the rank right after it (a second line, like guards.py:
it can only fail a solution). The task allows bf16 weights and nothing narrower; a weight kept as int8 or fp8, or as
bf16 values rounded to a coarse grid (quantised and dequantised), has rows made almost wholly of at most 256
values, where a bf16 weight's 256 most frequent values make up well under 90% of a row of 512 or more.

Each tensor is judged as it is stored: it must be a plain dense real tensor (a subclass's methods are the solution's
code), and either a view of the judge's weights as they came (compared after every call), a stand-in (spec.stand_in:
one stored value), or a tensor that spans its storage exactly, so that nothing is kept where the census does not
look. Its rows are the slices along each axis, the rows of its innermost axis and runs of MIN_ROW elements in the
order they are stored (so a weight flattened or reshaped is still judged by its channels); every row is judged.
What the census cannot tell from a grid, it counts: integer tensors, tensors too small to hold a row, and tensors
on a grid (norm gains near 1, where bf16 holds about 40 values within 10%, are such a grid) may hold `allowance` bytes
in all: four times the given weights' vectors and tensors too small to hold a row (room for fp32 copies of them),
442 KiB for the full geometry, less than the smallest 3x3x3 weight of its 352 x 624 level in int4 (864 KiB). A grid stored in another order of its elements
(its channels interleaved) or through a transform (a Winograd U of grid weights) is not seen: there the audit is
the defence. A tensor that the census cannot read fails."""
import math

import spec

NARROW_DTYPES = ("int8", "uint8", "float8", "int4", "uint4", "qint", "quint")
MIN_ROW = 512         # a row (a slice along an axis, a row of the innermost axis, a run as stored) of at least ...
TOP = 256             # ... this many elements is judged by the share of it that its TOP most frequent values make up
ON_GRID = 0.9         # ... on a grid at this share or more (bf16 weights: at most about 0.8, at 512 uniform values)
MAX_ROWS_ON_GRID = 0.05   # a tensor is on a grid when more of its rows than this are (a dead channel may be one)
CHUNK = 1 << 22       # elements judged at a time


def allowance(shapes, element_size=2):
    """The bytes that integer, too small and grid tensors may hold in all, for given weights of these shapes: four
    times their vectors' (at most one axis longer than 1) and small tensors' (fewer than MIN_ROW elements)."""
    small = [s for s in shapes if math.prod(s) < MIN_ROW or sum(n > 1 for n in s) <= 1]
    return 4 * element_size * sum(math.prod(s) for s in small)


UNJUDGED_BYTES = allowance([s for _, s in spec.weight_list(spec.FULL)])    # narrow()'s default


def narrow(tensors, lent=None, unjudged=None):
    """['tensor i why', ...] of the tensors that are narrower than bf16 or that the census cannot judge, and where
    the tensors it cannot tell from a grid hold more than `unjudged` bytes (allowance(); UNJUDGED_BYTES when None),
    a line saying so before them. lent: (address, bytes) of the judge's weights, whose views (every element inside
    them) pass."""
    limit = UNJUDGED_BYTES if unjudged is None else unjudged
    out, counted = [], []
    for i, t in enumerate(tensors):
        try:
            why, unjudged = _judge(t, lent)
        except BaseException as e:       # what the census cannot read, it cannot pass (a SystemExit too)
            why, unjudged = f"cannot be judged ({type(e).__name__}: {str(e)[:120]})", None
        if why:
            out.append(f"tensor {i} {why}")
        elif unjudged:
            counted.append((t.numel() * t.element_size(), i, unjudged))
    total = sum(n for n, _, _ in counted)
    if total > limit:
        counted.sort(reverse=True)
        out += [f"{total} bytes in {len(counted)} tensors are integer, too small to judge or on an 8-bit grid, more "
                f"than the {limit} allowed"] + [f"tensor {i} {why}" for _, i, why in counted]
    return out


def _judge(t, lent):
    """(why it fails, None) or (None, why its bytes count as unjudged) or (None, None)."""
    import torch
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return f"is a {type(t).__name__}, not a plain tensor", None
    if t.layout != torch.strided or t.is_nested or t.device.type == "meta" or t.is_complex():
        return f"is not a dense real tensor with data ({t.layout}, {t.dtype}, {t.device.type})", None
    name = str(t.dtype).replace("torch.", "")
    if name.startswith(NARROW_DTYPES) and t.numel() >= TOP:
        return f"is {name} {list(t.shape)}", None
    if t.numel() == 0:
        return None, None
    stored = t.untyped_storage().nbytes() // t.element_size()
    if spec.is_stand_in(t):
        return (None if stored == 1 else f"is a stand-in over a storage of {stored} elements (a stand-in stores "
                                         f"one)"), None
    if lent is not None and _within(t, *lent):
        return None, None
    if t.storage_offset() != 0 or t.numel() != stored or not _dense(t):
        return f"{list(t.shape)} does not span its storage of {stored} elements exactly (a view: clone it)", None
    if not t.is_floating_point():
        return None, f"is {name} {list(t.shape)}"
    if t.numel() < MIN_ROW:
        return None, f"{list(t.shape)} is too small to judge"
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    runs = t.permute(order).reshape(-1)[:t.numel() // MIN_ROW * MIN_ROW].view(-1, MIN_ROW)
    views = [(f"slices along axis {d}", t.movedim(d, 0).reshape(t.shape[d], -1)) for d in range(t.dim())
             if t.shape[d] > 1]
    for label, rows in views + [("rows", t.reshape(-1, t.shape[-1])), ("runs as stored", runs)]:
        if rows.shape[1] >= MIN_ROW:
            on, judged = 0, 0
            step = max(1, CHUNK // rows.shape[1])
            for r in range(0, rows.shape[0], step):
                share, values = coverage(rows[r:r + step])
                on += int(((share >= ON_GRID) & (values > 1)).sum())
                judged += int((values > 1).sum())       # a constant row (zero padding) holds no grid
            if on > MAX_ROWS_ON_GRID * judged:
                return None, (f"{list(t.shape)}: {on} of its {judged} {label} ({rows.shape[1]} elements each) are "
                              f"{100 * ON_GRID:.0f}% or more made of {TOP} values (an 8-bit grid)")
    return None, None


def _within(t, start, nbytes):
    """Every element of t lies in the bytes [start, start + nbytes) (whatever storage t claims to have)."""
    first = t.data_ptr()                  # strides are never negative in torch
    last = first + sum((size - 1) * stride for stride, size in zip(t.stride(), t.shape)) * t.element_size()
    return start <= first and last + t.element_size() <= start + nbytes


def _dense(t):
    """Its elements fill a block of memory once each, in some order of the dimensions."""
    expected = 1
    for stride, size in sorted((st, n) for st, n in zip(t.stride(), t.shape) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def coverage(rows):
    """Per row, the share of its elements that its TOP most frequent values make up, and its number of values."""
    import torch
    s = rows.detach().float().sort(dim=1).values
    new = torch.ones_like(s, dtype=torch.bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    value = new.long().cumsum(1) - 1                  # each element's value, numbered within its row
    counts = torch.zeros_like(value).scatter_add_(1, value, torch.ones_like(value))
    share = counts.topk(min(TOP, s.shape[1]), dim=1).values.sum(1).float() / s.shape[1]
    return share, new.sum(1)
