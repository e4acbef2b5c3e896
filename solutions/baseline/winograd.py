"""Winograd F(2x2, 3x3) for the causal 3x3x3 convolutions, beside a plain PyTorch twin of the same arithmetic.

A causal conv's output frame f is the sum over its three time taps dt of a 3x3 conv of input frame f + dt. Each
2x2 block of output pixels (a tile) comes from the 4x4 input patch d around it: per channel the patch is taken to
the Winograd domain, V = B^T d B (16 values, additions only), each weight 3x3 to U = G g G^T (once, in prepare),
the 16 positions xi = (i, j) multiply independently, M[xi] = sum over (dt, ci) of V[xi] U[xi], and the tile is
A^T M A. That is 16 products per tile and input channel where the direct conv has 36: 4/9 of its multiplies.
Tiles of 2 x 4 outputs are the other choice (F(2x4, 3x3): the columns' transforms F(4, 3), 4 x 6 patches, 24
positions, 1/3 of the multiplies; transform_weights(cols=4)); conv() takes the tile from U's shape.

The operands are fp16: the conv inputs (normalised activations, the latents) are exact in fp16, and V and U round
8 times finer than in bf16, so the transforms add little to the direct conv's error; the products accumulate and
M is kept in fp32 (no fp16 overflow).

Three steps per conv: `_vin_kernel` writes V once per input frame (each frame serves three output frames and every
output channel), laid out (positions, B, tiles, frames, C) so that an output frame's three taps are one row of 3 C
values; per output frame one cuBLAS batched GEMM over the positions (K = 3 C) gives M; `_vout_kernel` takes M back to
pixels with the bias. One frame's M at a time keeps the peak low.

Layout: the conv's input buffer (B, C, 2 + n, rows, W) and its output (B, Co, n, H, W) are channels-last, as in
solution.py. `pad_rows` is 1 where the buffer has no halo rows (zeros above and below), 0 where it has them.
"""
import torch
import torch.nn.functional as F

from .kernels import INTERPRET, triton, use_triton

if triton is not None:
    import triton.language as tl

# V of at most this many bytes at a time (bands of tile rows): up block 2's first conv would otherwise hold 2.7 GB.
V_BYTES = 512 << 20

# F(2x2, 3x3): the transforms of Lavin & Gray (2015), the rows' always and the columns' of a 2x2 tile.
BT = torch.tensor([[1., 0., -1., 0.], [0., 1., 1., 0.], [0., -1., 1., 0.], [0., 1., 0., -1.]])
G = torch.tensor([[1., 0., 0.], [.5, .5, .5], [.5, -.5, .5], [0., 0., 1.]])
AT = torch.tensor([[1., 1., 1., 0.], [0., 1., -1., -1.]])
# F(4, 3) on the points 0, 1, -1, 2, -1/2 (and infinity): the columns' of a 2x4 tile, 24 products per 8 outputs
# (3/4 of F(2x2)'s V, M and products). These points add less error in fp16 than +-2 (tools/baseline/winograd_error.py:
# 1.14x the direct conv's error against 1.03x for F(2x2)); B^T and A^T are exact in fp16.
BT4 = torch.tensor([[1., 1.5, -2., -1.5, 1., 0.], [0., -1., -2.5, -.5, 1., 0.], [0., 1., .5, -2.5, 1., 0.],
                    [0., -.5, -1., .5, 1., 0.], [0., 2., -1., -2., 1., 0.], [0., 1., 1.5, -2., -1.5, 1.]])
G4 = torch.tensor([[1., 0., 0.], [-1 / 3, -1 / 3, -1 / 3], [1 / 3, -1 / 3, 1 / 3], [1 / 15, 2 / 15, 4 / 15],
                   [-16 / 15, 8 / 15, -4 / 15], [0., 0., 1.]])
AT4 = torch.tensor([[1., 1., 1., 1., 1., 0.], [0., 1., -1., 2., -.5, 0.], [0., 1., 1., 4., .25, 0.],
                    [0., 1., -1., 8., -.125, 1.]])
COLUMNS = {2: (BT, G, AT), 4: (BT4, G4, AT4)}    # a tile's output columns: the columns' transforms


def columns(u):
    """A tile's output columns, from U's positions (4 rows x 4 or 6 columns)."""
    return u.shape[0] // 4 - 2


def transform_weights(w, dtype=torch.float16, cols=2):
    """(Co, Ci, 3, 3, 3) conv weights -> U (4 n, 3 * Ci, Co) for tiles of 2 x `cols` outputs (n = cols + 2 columns
    of input): U[n i + j, dt * Ci + ci, co] = (G g G_c^T)[i, j] of g = w[co, ci, dt]; computed in fp32, rounded
    once."""
    co, ci = w.shape[:2]
    g, gc = G.to(w.device), COLUMNS[cols][1].to(w.device)
    u = torch.einsum("ia,octab,jb->ijtco", g, w.float(), gc)       # (4, n, 3, Ci, Co)
    return u.reshape(4 * (cols + 2), 3 * ci, co).to(dtype).contiguous()


def conv_torch(buf, u, pad_rows, bias=None, out=None):
    """The twin: conv() with PyTorch's ops in place of the two kernels (the same operand rounding, fp32 sums)."""
    return conv(buf, u, pad_rows, bias, out, kernels=False)


if triton is not None:
    @triton.jit
    def _e(base, xy, xx, ry0, ry1, S1, col, ci, rows, W, cmask, tmask):
        """One patch column of B^T d for BM tiles and BK channels: d[ry0] + S1 * d[ry1], zero outside."""
        cm = tmask & (col >= 0) & (col < W)
        p = base + col[:, None].to(tl.int64) * xx + ci[None, :]
        m0 = (cm & (ry0 >= 0) & (ry0 < rows))[:, None] & cmask[None, :]
        m1 = (cm & (ry1 >= 0) & (ry1 < rows))[:, None] & cmask[None, :]
        v = tl.load(p + (ry0 * xy)[:, None], mask=m0, other=0.0).to(tl.float32)
        v += S1 * tl.load(p + (ry1 * xy)[:, None], mask=m1, other=0.0).to(tl.float32)
        return v


def transform_input_torch(buf, pad_rows, dtype, cols=2):
    """(B, C, Fin, rows, W) -> V (4 n, B, th * tw, Fin, C) in `dtype`: per frame the 4 x n patches (n = cols + 2)
    to B^T d B_c. A tile's frames are adjacent, so output frame f's operand (its frames f, f+1, f+2) is one row of
    3 C values."""
    b, c, fin, rows, w = buf.shape
    h = rows + 2 * pad_rows - 2
    th, tw = (h + 1) // 2, (w + cols - 1) // cols
    x = F.pad(buf.float(), (1, cols * tw + 1 - w, pad_rows, 2 * th + 2 - rows - pad_rows))
    d = x.unfold(3, 4, 2).unfold(4, cols + 2, cols)                  # (B, C, Fin, th, tw, 4, n)
    bt, bc = BT.to(buf.device), COLUMNS[cols][0].to(buf.device)
    v = torch.einsum("ir,bcftyrs,js->ijbtyfc", bt, d, bc)
    return v.reshape(4 * (cols + 2), b, th * tw, fin, c).to(dtype).contiguous()


if triton is not None:
    @triton.jit
    def _vin_kernel(x, xb, xf, xy, xx, v, B, C, FIN, H, W, ROWS, TW, PAD, TY0, NTY, BM: tl.constexpr,
                    BK: tl.constexpr, COLS: tl.constexpr = 2):
        """V[xi, b, tile, frame, c] for BM consecutive tiles (row-major over tile rows TY0 .. TY0 + NTY) of one
        frame; tiles of 2 x COLS outputs."""
        pid = tl.program_id(0).to(tl.int64)
        tiles = NTY * TW
        blocks = tl.cdiv(tiles, BM)
        bf = pid // blocks                    # b * FIN + frame
        b = bf // FIN
        fr = bf % FIN
        t = (pid % blocks) * BM + tl.arange(0, BM)
        tmask = t < tiles
        ty = TY0 + t // TW
        cx = COLS * (t % TW) - 1              # the patch's first column
        r0 = 2 * ty - PAD                     # and first row in the buffer
        ci = tl.program_id(1) * BK + tl.arange(0, BK)
        cmask = ci < C
        base = x + b * xb + fr * xf
        vrow = v + ((b * tiles + t) * FIN + fr)[:, None] * C + ci[None, :]
        plane = B * tiles * FIN * C           # one xi's (B, tiles, FIN, C)
        m = tmask[:, None] & cmask[None, :]
        for i in tl.static_range(4):
            if i == 0:
                ra, rb, sg = r0, r0 + 2, -1.0
            elif i == 1:
                ra, rb, sg = r0 + 1, r0 + 2, 1.0
            elif i == 2:
                ra, rb, sg = r0 + 2, r0 + 1, -1.0
            else:
                ra, rb, sg = r0 + 1, r0 + 3, -1.0
            e0 = _e(base, xy, xx, ra, rb, sg, cx, ci, ROWS, W, cmask, tmask)
            e1 = _e(base, xy, xx, ra, rb, sg, cx + 1, ci, ROWS, W, cmask, tmask)
            e2 = _e(base, xy, xx, ra, rb, sg, cx + 2, ci, ROWS, W, cmask, tmask)
            e3 = _e(base, xy, xx, ra, rb, sg, cx + 3, ci, ROWS, W, cmask, tmask)
            vt = v.dtype.element_ty
            if COLS == 2:
                tl.store(vrow + (4 * i + 0) * plane, (e0 - e2).to(vt), mask=m)
                tl.store(vrow + (4 * i + 1) * plane, (e1 + e2).to(vt), mask=m)
                tl.store(vrow + (4 * i + 2) * plane, (e2 - e1).to(vt), mask=m)
                tl.store(vrow + (4 * i + 3) * plane, (e1 - e3).to(vt), mask=m)
            else:                             # BT4's rows
                e4 = _e(base, xy, xx, ra, rb, sg, cx + 4, ci, ROWS, W, cmask, tmask)
                e5 = _e(base, xy, xx, ra, rb, sg, cx + 5, ci, ROWS, W, cmask, tmask)
                tl.store(vrow + (6 * i + 0) * plane, (e0 + 1.5 * e1 - 2.0 * e2 - 1.5 * e3 + e4).to(vt), mask=m)
                tl.store(vrow + (6 * i + 1) * plane, (e4 - e1 - 2.5 * e2 - 0.5 * e3).to(vt), mask=m)
                tl.store(vrow + (6 * i + 2) * plane, (e1 + 0.5 * e2 - 2.5 * e3 + e4).to(vt), mask=m)
                tl.store(vrow + (6 * i + 3) * plane, (0.5 * e3 - 0.5 * e1 - e2 + e4).to(vt), mask=m)
                tl.store(vrow + (6 * i + 4) * plane, (2.0 * e1 - e2 - 2.0 * e3 + e4).to(vt), mask=m)
                tl.store(vrow + (6 * i + 5) * plane, (e1 + 1.5 * e2 - 2.0 * e3 - 1.5 * e4 + e5).to(vt), mask=m)

    @triton.jit
    def _vout_kernel(mm, bias, out, oc, oy, ox, CO, H, W, TW, TY0, NTY, HAS_BIAS: tl.constexpr,
                     BM: tl.constexpr, BN: tl.constexpr, COLS: tl.constexpr = 2):
        """One frame's output (1, Co, 1, H, W) = A^T M A_c (+ bias) for BM consecutive tiles (2 x COLS outputs) of
        tile rows TY0 .. TY0 + NTY, M (4 (COLS + 2), NTY * TW, Co)."""
        tiles = NTY * TW
        t = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
        tmask = t < tiles
        ty = TY0 + t // TW
        tx = t % TW
        co = tl.program_id(1) * BN + tl.arange(0, BN)
        comask = co < CO
        m = tmask[:, None] & comask[None, :]
        PLANE = tiles * CO
        N: tl.constexpr = COLS + 2
        src = mm + t[:, None] * CO + co[None, :]
        y00 = tl.zeros((BM, BN), dtype=tl.float32)
        y01 = y00
        y02 = y00
        y03 = y00
        y10 = y00
        y11 = y00
        y12 = y00
        y13 = y00
        for i in tl.static_range(4):
            a0 = tl.load(src + (N * i + 0) * PLANE, mask=m, other=0.0).to(tl.float32)
            a1 = tl.load(src + (N * i + 1) * PLANE, mask=m, other=0.0).to(tl.float32)
            a2 = tl.load(src + (N * i + 2) * PLANE, mask=m, other=0.0).to(tl.float32)
            a3 = tl.load(src + (N * i + 3) * PLANE, mask=m, other=0.0).to(tl.float32)
            if COLS == 2:                         # AT's rows
                z0 = a0 + a1 + a2
                z1 = a1 - a2 - a3
            else:                                 # AT4's rows
                a4 = tl.load(src + (N * i + 4) * PLANE, mask=m, other=0.0).to(tl.float32)
                a5 = tl.load(src + (N * i + 5) * PLANE, mask=m, other=0.0).to(tl.float32)
                z0 = a0 + a1 + a2 + a3 + a4
                z1 = a1 - a2 + 2.0 * a3 - 0.5 * a4
                z2 = a1 + a2 + 4.0 * a3 + 0.25 * a4
                z3 = a1 - a2 + 8.0 * a3 - 0.125 * a4 + a5
            # the rows' A^T: [1, 1, 1, 0] and [0, 1, -1, -1]
            if i < 3:
                y00 += z0
                y01 += z1
                if COLS == 4:
                    y02 += z2
                    y03 += z3
            if i == 1:
                y10 += z0
                y11 += z1
                if COLS == 4:
                    y12 += z2
                    y13 += z3
            elif i >= 2:
                y10 -= z0
                y11 -= z1
                if COLS == 4:
                    y12 -= z2
                    y13 -= z3
        if HAS_BIAS:
            bv = tl.load(bias + co, mask=comask, other=0.0).to(tl.float32)[None, :]
            y00 += bv
            y01 += bv
            y10 += bv
            y11 += bv
            if COLS == 4:
                y02 += bv
                y03 += bv
                y12 += bv
                y13 += bv
        base = out + co[None, :].to(tl.int64) * oc
        _put(base, y00, 2 * ty, COLS * tx, oy, ox, H, W, tmask, comask)
        _put(base, y01, 2 * ty, COLS * tx + 1, oy, ox, H, W, tmask, comask)
        _put(base, y10, 2 * ty + 1, COLS * tx, oy, ox, H, W, tmask, comask)
        _put(base, y11, 2 * ty + 1, COLS * tx + 1, oy, ox, H, W, tmask, comask)
        if COLS == 4:
            _put(base, y02, 2 * ty, 4 * tx + 2, oy, ox, H, W, tmask, comask)
            _put(base, y03, 2 * ty, 4 * tx + 3, oy, ox, H, W, tmask, comask)
            _put(base, y12, 2 * ty + 1, 4 * tx + 2, oy, ox, H, W, tmask, comask)
            _put(base, y13, 2 * ty + 1, 4 * tx + 3, oy, ox, H, W, tmask, comask)

    @triton.jit
    def _put(base, val, row, col, oy, ox, H, W, tmask, comask):
        """One output pixel of BM tiles (row, col) for BN channels, where it lies inside the frame."""
        mk = (tmask & (col < W) & (row < H))[:, None] & comask[None, :]
        tl.store(base + (row * oy + col * ox)[:, None], val.to(base.dtype.element_ty), mask=mk)


def conv(buf, u, pad_rows, bias=None, out=None, bm=32, bk=64, v_bytes=V_BYTES, kernels=None):
    """The causal 3x3x3 conv of a filled input buffer, from U = transform_weights(weight) (its tile from U's shape):
    V in u's dtype, the products by cuBLAS (fp32 accumulation and output), out (B, Co, n, H, W) made channels-last
    when None. Bands of tile rows whose V holds at most `v_bytes` go one after another. kernels=False: the twin's
    PyTorch ops."""
    b, c, fin, rows, w = buf.shape
    n, h, co = fin - 2, rows + 2 * pad_rows - 2, u.shape[2]
    cols, planes = columns(u), u.shape[0]
    th, tw = (h + 1) // 2, (w + cols - 1) // cols
    if out is None:
        out = torch.empty((b, co, n, h, w), dtype=buf.dtype, device=buf.device, memory_format=torch.channels_last_3d)
    per_row = planes * b * tw * fin * c * u.element_size()
    nty = max(1, min(th, v_bytes // per_row))
    triton_ok = use_triton(buf) if kernels is None else kernels
    if triton_ok:   # no wider than the work (the tests' tiny geometry: one program per frame)
        bm = min(1024 if INTERPRET else bm, triton.next_power_of_2(nty * tw))
        bk = min(bk, triton.next_power_of_2(c))
    else:
        v_all = transform_input_torch(buf, pad_rows, u.dtype, cols)
    for ty0 in range(0, th, nty):
        ty1 = min(th, ty0 + nty)
        tiles = (ty1 - ty0) * tw
        if triton_ok:
            v = torch.empty((planes, b, tiles, fin, c), dtype=u.dtype, device=buf.device)
            sb, _, sf, sy, sx = buf.stride()
            _vin_kernel[(b * fin * triton.cdiv(tiles, bm), triton.cdiv(c, bk))](
                buf, sb, sf, sy, sx, v, b, c, fin, h, w, rows, tw, pad_rows, ty0, ty1 - ty0, BM=bm, BK=bk,
                COLS=cols, num_warps=4)
        else:
            v = v_all[:, :, ty0 * tw:ty1 * tw].contiguous()
        m = torch.empty((planes, tiles, co), dtype=torch.float32, device=buf.device)
        plane = b * tiles * fin * c
        for bi in range(b):
            for f in range(n):
                a = v.as_strided((planes, tiles, 3 * c), (plane, fin * c, 1),
                                 v.storage_offset() + bi * tiles * fin * c + f * c)
                if buf.is_cuda:
                    torch.bmm(a, u, out_dtype=torch.float32, out=m)   # fp32 out: no fp16 overflow
                else:
                    torch.bmm(a.float(), u.float(), out=m)
                _output_transform(m, bias, out[bi:bi + 1, :, f:f + 1], ty0, ty1 - ty0, tw, bm, triton_ok, cols)
        del v, m
    return out


def _output_transform(m, bias, out, ty0, nty, tw, bm, triton_ok, cols=2):
    """Tile rows ty0 .. ty0 + nty of out (1, Co, 1, H, W) = A^T M A_c (+ bias), M (4 (cols + 2), nty * tw, Co) of
    one frame."""
    co, h, w = out.shape[1], out.shape[3], out.shape[4]
    if triton_ok:
        _, oc, _, oy, ox = out.stride()
        _vout_kernel[(triton.cdiv(nty * tw, bm), triton.cdiv(co, 64))](
            m, bias if bias is not None else m, out, oc, oy, ox, co, h, w, tw, ty0, nty, HAS_BIAS=bias is not None,
            BM=bm, BN=64, COLS=cols, num_warps=4)
        return
    at, ac = AT.to(m.device), COLUMNS[cols][2].to(m.device)
    y = torch.einsum("pi,ijtyo,qj->otpyq", at, m.view(4, cols + 2, nty, tw, co), ac).reshape(1, co, 1, 2 * nty,
                                                                                              cols * tw)
    y0, y1 = 2 * ty0, min(h, 2 * (ty0 + nty))
    y = y[..., :y1 - y0, :w]
    if bias is not None:
        y = y + bias.float().view(1, -1, 1, 1, 1)
    out[:, :, :, y0:y1].copy_(y)
