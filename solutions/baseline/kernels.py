"""The baseline's memory-bound work as Triton kernels, each beside a plain PyTorch twin of the same arithmetic.

Activations are channels-last (B, C, t, H, W) tensors: every position's channels are contiguous, so one program
handles a tile of positions x all channels. Arithmetic is fp32 inside every kernel, rounded once on the store.

- `rows`: (x + bias + res) -> optionally stored back into x (a residual sum kept for later), then RMS norm over the
  channels (x / max(|x|, 1e-12) * sqrt(C) * gamma, F.normalize's definition), then SiLU; the result goes to `out`,
  which may be a strided window of a conv's input buffer (after its cached frames, between its halo rows).
- `shuffle`: the four phase convolutions of a resample (see solution.phase_weights) put back on the 2x grid, plus
  the resample's bias, plus the up block's parameter-free DupUp shortcut, written into the up block's output frames.
- `head`: conv_out's bias, unpatchify and the clamp to [-1, 1], written straight into the video.

Triton runs where the tensors are on a GPU, or anywhere under TRITON_INTERPRET=1 (the CPU tests); otherwise, and
for the tests' comparison, the twins run.
"""
import os

import torch

import reference

try:
    import triton
    import triton.language as tl
except ImportError:    # the CPU-only install: the twins run
    triton = None

EPS = 1e-12   # F.normalize's
# The interpreter runs the kernels on CPU tensors (the tests); it only picks which of two equal computations runs.
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"   # audit: allow environment -- Triton's interpreter switch


def use_triton(x):
    return triton is not None and (x.is_cuda or INTERPRET)


def _strides(t):
    """(b, t, y, x) strides of a (B, C, t, H, W) tensor whose channels are contiguous."""
    if t.stride(1) != 1:
        raise ValueError(f"expected channels-last strides (channel stride 1), got {t.stride()}")
    return t.stride(0), t.stride(2), t.stride(3), t.stride(4)


# rows: bias, residual, RMS norm, SiLU ---------------------------------------------------------------------------

if triton is not None:
    @triton.jit
    def _rows_kernel(x, xb, xf, xy, xx, bias, res, rb, rf, ry, rx, gamma, out, ob, of, oy, ox,
                     T, H, W, C, scale,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, WRITE_SUM: tl.constexpr, NORM: tl.constexpr,
                     SILU: tl.constexpr, BW: tl.constexpr, BC: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        b = pid // (T * H)
        f = (pid // H) % T
        y = pid % H
        cols = tl.program_id(1) * BW + tl.arange(0, BW)
        cs = tl.arange(0, BC)
        cmask = cs < C
        mask = (cols[:, None] < W) & cmask[None, :]
        px = x + b * xb + f * xf + y * xy + cols[:, None].to(tl.int64) * xx + cs[None, :]
        v = tl.load(px, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            v += tl.load(bias + cs, mask=cmask, other=0.0).to(tl.float32)[None, :]
        if HAS_RES:
            pr = res + b * rb + f * rf + y * ry + cols[:, None].to(tl.int64) * rx + cs[None, :]
            v += tl.load(pr, mask=mask, other=0.0).to(tl.float32)
        if WRITE_SUM:
            tl.store(px, v.to(x.dtype.element_ty), mask=mask)
        if NORM:
            inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(v * v, axis=1)), 1e-12)
            g = tl.load(gamma + cs, mask=cmask, other=0.0).to(tl.float32)
            v = v * inv[:, None] * scale * g[None, :]
        if SILU:
            v = v / (1.0 + tl.exp(-v))
        po = out + b * ob + f * of + y * oy + cols[:, None].to(tl.int64) * ox + cs[None, :]
        tl.store(po, v.to(out.dtype.element_ty), mask=mask)


def rows_torch(x, out, gamma=None, bias=None, res=None, write_sum=False, silu=True):
    """The twin of `rows`."""
    v = x.float()
    if bias is not None:
        v = v + bias.float().view(1, -1, 1, 1, 1)
    if res is not None:
        v = v + res.float()
    if write_sum:
        x.copy_(v)
    if gamma is not None:
        v = v / v.norm(dim=1, keepdim=True).clamp_min(EPS) * (x.shape[1] ** 0.5) * gamma.float().view(1, -1, 1, 1, 1)
    if silu:
        v = v * torch.sigmoid(v)
    out.copy_(v)


def rows(x, out, gamma=None, bias=None, res=None, write_sum=False, silu=True):
    """out = silu?(norm_gamma?(x + bias + res)); with write_sum, x + bias + res is also stored into x (in place).
    x, res, out: (B, C, t, H, W) with channel stride 1; gamma and bias: C values (any shape)."""
    if not use_triton(x):
        return rows_torch(x, out, gamma, bias, res, write_sum, silu)
    B, C, T, H, W = x.shape
    if tuple(out.shape) != tuple(x.shape) or (res is not None and tuple(res.shape) != tuple(x.shape)):
        raise ValueError(f"rows: x {list(x.shape)}, out {list(out.shape)}, res "
                         f"{None if res is None else list(res.shape)} differ")
    BC = triton.next_power_of_2(C)
    BW = max(1, min(triton.next_power_of_2(W), 4096 // BC))
    grid = (B * T * H, triton.cdiv(W, BW))
    r = res if res is not None else x
    _rows_kernel[grid](x, *_strides(x), bias if bias is not None else x, r, *_strides(r),
                       gamma if gamma is not None else x, out, *_strides(out), T, H, W, C, float(C) ** 0.5,
                       HAS_BIAS=bias is not None, HAS_RES=res is not None, WRITE_SUM=write_sum,
                       NORM=gamma is not None, SILU=silu, BW=BW, BC=BC, num_warps=4)


# shuffle: phases back on the 2x grid, + bias, + DupUp -------------------------------------------------------------

if triton is not None:
    @triton.jit
    def _shuffle_kernel(p, pn, py, px, bias, xin, xb, xf, xy, xx, out, ob, of, oy, ox,
                        N, H, W, CO, FT, A, R, STEP, OFF, BX: tl.constexpr, BC: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        b = pid // (N * 2 * H)
        t = (pid // (2 * H)) % N
        yy = pid % (2 * H)
        i = yy % 2
        y = yy // 2
        X = tl.program_id(1) * BX + tl.arange(0, BX)
        j = X % 2
        x = (X // 2).to(tl.int64)
        o = tl.arange(0, BC)
        omask = o < CO
        mask = (X[:, None] < 2 * W) & omask[None, :]
        pp = p + (b * N + t) * pn + (y + i) * py + (x[:, None] + j[:, None]) * px + (2 * i + j[:, None]) * CO + o[None, :]
        v = tl.load(pp, mask=mask, other=0.0).to(tl.float32)
        v += tl.load(bias + o, mask=omask, other=0.0).to(tl.float32)[None, :]
        c = (((o[None, :] * FT + A) * 2 + i) * 2 + j[:, None]) // R
        ps = xin + b * xb + t * xf + y * xy + x[:, None] * xx + c
        v += tl.load(ps, mask=mask, other=0.0).to(tl.float32)
        po = out + b * ob + (t * STEP + OFF) * of + yy * oy + X[:, None].to(tl.int64) * ox + o[None, :]
        tl.store(po, v.to(out.dtype.element_ty), mask=mask)


def shuffle_torch(p, bias, xin, out, step, off, ft, a):
    """The twin of `shuffle`."""
    n4, c4, h1, w1 = p.shape
    co, h, w = c4 // 4, h1 - 1, w1 - 1
    b, cin, n = xin.shape[:3]
    r = co * ft * 4 // cin
    up = torch.empty(n4, co, 2 * h, 2 * w, dtype=torch.float32, device=p.device)
    short = torch.empty_like(up)
    xs = xin.float().permute(0, 2, 1, 3, 4).reshape(b * n, cin, h, w)
    o = torch.arange(co, device=p.device)
    for i in (0, 1):
        for j in (0, 1):
            k = 2 * i + j
            up[:, :, i::2, j::2] = p[:, k * co:(k + 1) * co, i:i + h, j:j + w].float()
            short[:, :, i::2, j::2] = xs[:, (((o * ft + a) * 2 + i) * 2 + j) // r]
    v = up + bias.float().view(1, -1, 1, 1) + short
    frames = out[:, :, off:off + step * (n - 1) + 1:step]
    frames.copy_(v.view(b, n, co, 2 * h, 2 * w).permute(0, 2, 1, 3, 4))


def shuffle(p, bias, xin, out, step, off, ft, a):
    """out[:, o, t*step + off, 2y+i, 2x+j] = p[b*n + t, (2i+j)*Co + o, y+i, x+j] + bias[o]
    + xin[:, (((o*ft + a)*2 + i)*2 + j) // r, t, y, x], r = Co*ft*4 / Cin (DupUp's channel repeat).
    p: (B*n, 4Co, H+1, W+1) channels-last phase outputs; xin: (B, Cin, n, H, W); out: (B, Co, F, 2H, 2W), channel
    stride 1."""
    if not use_triton(p):
        return shuffle_torch(p, bias, xin, out, step, off, ft, a)
    n4, c4, h1, w1 = p.shape
    co, h, w = c4 // 4, h1 - 1, w1 - 1
    b, cin, n = xin.shape[:3]
    if p.stride(1) != 1 or n4 != b * n or out.shape[1] != co or tuple(out.shape[3:]) != (2 * h, 2 * w):
        raise ValueError(f"shuffle: phases {list(p.shape)} {p.stride()}, input {list(xin.shape)}, "
                         f"out {list(out.shape)} do not match")
    BC = triton.next_power_of_2(co)
    BX = max(2, min(triton.next_power_of_2(2 * w), 4096 // BC))
    grid = (b * n * 2 * h, triton.cdiv(2 * w, BX))
    xb, xf, xy, xx = _strides(xin)
    _shuffle_kernel[grid](p, p.stride(0), p.stride(2), p.stride(3), bias, xin, xb, xf, xy, xx,
                          out, *_strides(out), n, h, w, co, ft, a, co * ft * 4 // cin, step, off,
                          BX=BX, BC=BC, num_warps=4)


# head: conv_out's bias, unpatchify, clamp -----------------------------------------------------------------------

if triton is not None:
    @triton.jit
    def _head_kernel(y, yb, yf, yy, yx, bias, out, ob, oc, of, oy, ox, N, H, W, BX: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        b = pid // (N * 2 * H)
        f = (pid // (2 * H)) % N
        Y = pid % (2 * H)
        i = Y % 2
        X = tl.program_id(1) * BX + tl.arange(0, BX)
        mask = X < 2 * W
        j = X % 2
        x = (X // 2).to(tl.int64)
        for k in tl.static_range(3):
            ch = 4 * k + 2 * j + i
            v = tl.load(y + b * yb + f * yf + (Y // 2) * yy + x * yx + ch, mask=mask, other=0.0).to(tl.float32)
            v += tl.load(bias + ch, mask=mask, other=0.0).to(tl.float32)
            v = tl.minimum(tl.maximum(v, -1.0), 1.0)
            tl.store(out + b * ob + k * oc + f * of + Y * oy + X.to(tl.int64) * ox, v.to(out.dtype.element_ty),
                     mask=mask)


def head_torch(y, bias, out):
    """The twin of `head`."""
    v = y.float() + bias.float().view(1, -1, 1, 1, 1)
    out.copy_(torch.clamp(reference.unpatchify(v), min=-1.0, max=1.0))


def head(y, bias, out):
    """out (B, 3, n, 2H, 2W), any strides) = clamp(unpatchify(y + bias)), y: (B, 12, n, H, W) channels-last."""
    if not use_triton(y):
        return head_torch(y, bias, out)
    b, c, n, h, w = y.shape
    if c != 12 or tuple(out.shape) != (b, 3, n, 2 * h, 2 * w):
        raise ValueError(f"head: y {list(y.shape)} and out {list(out.shape)} do not match")
    BX = min(1024, triton.next_power_of_2(2 * w))
    grid = (b * n * 2 * h, triton.cdiv(2 * w, BX))
    _head_kernel[grid](y, *_strides(y), bias, out, out.stride(0), out.stride(1), out.stride(2), out.stride(3),
                       out.stride(4), n, h, w, BX=BX, num_warps=4)

