"""A precision census of what prepare() returns, taken in the rank right after it (a second line, like guards.py:
it can only fail a solution). The task allows bf16 weights and nothing narrower; a weight kept as int8 or fp8, or as
bf16 values rounded to a coarse grid (quantised and dequantised), has rows made almost wholly of at most 256
values, where a bf16 weight's 256 most frequent values make up well under 90% of a row of 512 or more.
A grid stored in another order of its elements or through a transform (a Winograd U of grid weights) is not seen:
there the audit is the defence.

Each tensor is judged as it is stored: it must be a plain dense real tensor (a subclass's methods are the solution's
code), and either a view of the judge's weights as they came (compared after every call), a stand-in (spec.stand_in:
one stored value), or a tensor that spans its storage exactly, so that nothing is kept where the census does not
look. Every row is judged; a tensor that the census cannot read fails."""
import spec

NARROW_DTYPES = ("int8", "uint8", "float8", "int4", "uint4", "qint", "quint")
MIN_ROW = 512         # a row (a slice along an axis, or of the innermost axis) of at least this many elements ...
TOP = 256             # ... is judged by the share of it that its TOP most frequent values make up (a grid: all) ...
ON_GRID = 0.9         # ... on a grid at this share or more (bf16 weights: at most about 0.8, at 512 uniform values)
MAX_ROWS_ON_GRID = 0.05   # a tensor fails when more of its rows than this are (a dead channel may be one)
CHUNK = 1 << 22       # elements judged at a time


def narrow(tensors, lent=None):
    """['tensor i why', ...] of the tensors that are narrower than bf16, or that the census cannot judge. lent:
    (address, bytes) of the judge's weights, whose views (every element inside them) pass."""
    out = []
    for i, t in enumerate(tensors):
        try:
            why = _judge(t, lent)
        except BaseException as e:       # what the census cannot read, it cannot pass (a SystemExit too)
            why = f"cannot be judged ({type(e).__name__}: {str(e)[:120]})"
        if why:
            out.append(f"tensor {i} {why}")
    return out


def _judge(t, lent):
    import torch
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return f"is a {type(t).__name__}, not a plain tensor"
    if t.layout != torch.strided or t.is_nested or t.device.type == "meta" or t.is_complex():
        return f"is not a dense real tensor with data ({t.layout}, {t.dtype}, {t.device.type})"
    name = str(t.dtype).replace("torch.", "")
    if name.startswith(NARROW_DTYPES) and t.numel() >= TOP:
        return f"is {name} {list(t.shape)}"
    if t.numel() == 0:
        return None
    stored = t.untyped_storage().nbytes() // t.element_size()
    if spec.is_stand_in(t):
        return None if stored == 1 else f"is a stand-in over a storage of {stored} elements (a stand-in stores one)"
    if lent is not None and _within(t, *lent):
        return None
    if t.storage_offset() != 0 or t.numel() != stored or not _dense(t):
        return f"{list(t.shape)} does not span its storage of {stored} elements exactly (a view: clone it)"
    if not t.is_floating_point() or t.dim() < 2:
        return None
    # The slices along each axis of two or more (the output channels where they come first, wherever they are put)
    # and the rows of the innermost axis. Not the whole tensor: a norm's gains near 1, where bf16 is coarse, hold
    # few values, and gains of shape (C, 1, 1, 1) are judged neither way.
    views = [(f"slices along axis {d}", t.movedim(d, 0).reshape(t.shape[d], -1)) for d in range(t.dim())
             if t.shape[d] > 1]
    for label, rows in views + [("rows", t.reshape(-1, t.shape[-1]))]:
        if rows.shape[1] >= MIN_ROW:
            on = sum(int((coverage(rows[r:r + max(1, CHUNK // rows.shape[1])]) >= ON_GRID).sum())
                     for r in range(0, rows.shape[0], max(1, CHUNK // rows.shape[1])))
            if on > MAX_ROWS_ON_GRID * rows.shape[0]:
                return (f"{list(t.shape)}: {on} of its {rows.shape[0]} {label} ({rows.shape[1]} elements each) are "
                        f"{100 * ON_GRID:.0f}% or more made of {TOP} values (an 8-bit grid)")
    return None


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
    """Per row, the share of its elements that its TOP most frequent values make up."""
    import torch
    s = rows.detach().float().sort(dim=1).values
    new = torch.ones_like(s, dtype=torch.bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    value = new.long().cumsum(1) - 1                  # each element's value, numbered within its row
    counts = torch.zeros_like(value).scatter_add_(1, value, torch.ones_like(value))
    return counts.topk(min(TOP, s.shape[1]), dim=1).values.sum(1).float() / s.shape[1]
