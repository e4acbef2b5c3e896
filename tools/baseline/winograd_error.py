"""The error Winograd adds to one conv, on the CPU: a 3x3 conv of K = 3 C input channels (a causal 3x3x3 conv's
three time taps are one sum over 3 C) against its float64 truth, computed directly with fp32 sums and a bf16 output
(cuDNN's way), and as Winograd F(m x n, 3x3) for several tile sizes and interpolation points, with V and U rounded
to fp16 or bf16, M kept in fp32 (solutions/baseline/winograd.py's way), and the output rounded to bf16.

The inputs: SiLU of normal activations (a normed decoder's conv input), bf16-valued; the weights normal with
variance 1/(9 K), bf16-valued. Real weights may be smoother or rougher than these.

    python tools/baseline/winograd_error.py [--channels 512] [--out 512] [--size 48] [--seed 0]
"""
import argparse
import math

import torch

F64 = torch.float64


def rounded(x, dtype):
    return x.to(dtype).to(F64)


def cook_toom(points, m, r=3):
    """(B^T, G, A^T) of the 1-D F(m, r) with the finite interpolation points `points` and infinity (m + r - 2 of
    them): A^T and G from the points, B^T solved from sum_j A^T[i, j] G[j, k] B^T[j, l] = [l == i + k]."""
    n = m + r - 1
    assert len(points) == n - 1
    p = torch.tensor(points, dtype=F64)
    at, g = torch.zeros(m, n, dtype=F64), torch.zeros(n, r, dtype=F64)
    for j in range(n - 1):
        at[:, j] = p[j] ** torch.arange(m, dtype=F64)
        g[j] = p[j] ** torch.arange(r, dtype=F64) / torch.prod(torch.stack([p[j] - p[k] for k in range(n - 1)
                                                                             if k != j]))
    at[m - 1, n - 1] = g[n - 1, r - 1] = 1
    rows, rhs = [], []
    for i in range(m):
        for k in range(r):
            for col in range(n):
                row = torch.zeros(n, n, dtype=F64)
                row[:, col] = at[i] * g[:, k]
                rows.append(row.flatten())
                rhs.append(float(col == i + k))
    a, b = torch.stack(rows), torch.tensor(rhs, dtype=F64)[:, None]
    bt = torch.linalg.lstsq(a, b).solution
    if (a @ bt - b).abs().max() > 1e-9:
        raise ValueError(f"no exact F({m}, {r}) from the points {points}")
    return bt.reshape(n, n), g, at


def winograd(x, w, rows, cols, operands):
    """The 'same' 3x3 conv of x (C, H, W) by w (Co, C, 3, 3) as Winograd with the 1-D transforms `rows` and `cols`
    ((B^T, G, A^T) each): V and U rounded to `operands`, their products summed exactly, M rounded to fp32."""
    (bh, gh, ah), (bw, gw, aw) = rows, cols
    mh, mw, nh, nw = ah.shape[0], aw.shape[0], bh.shape[0], bw.shape[0]
    c, h, w_ = x.shape
    th, tw = h // mh, w_ // mw
    d = torch.nn.functional.pad(x, (1, nw - mw - 1, 1, nh - mh - 1)).unfold(1, nh, mh).unfold(2, nw, mw)[:, :th, :tw]
    v = rounded(torch.einsum("ir,ctyrs,js->ijtyc", bh, d, bw), operands)
    u = rounded(torch.einsum("ia,ocab,jb->ijco", gh, w, gw), operands)
    m = rounded(torch.einsum("ijtyc,ijco->ijtyo", v, u), torch.float32)
    return torch.einsum("pi,ijtyo,qj->otpyq", ah, m, aw).reshape(-1, th * mh, tw * mw)


TRANSFORMS = {
    "F(2x2): points 0, 1, -1": ([0, 1, -1], 2, [0, 1, -1], 2),
    "F(4x4): points 0, +-1, +-2": ([0, 1, -1, 2, -2], 4, [0, 1, -1, 2, -2], 4),
    "F(4x4): points 0, +-1, 2, -1/2": ([0, 1, -1, 2, -.5], 4, [0, 1, -1, 2, -.5], 4),
    "F(2x4): rows 0, 1, -1; columns 0, +-1, 2, -1/2": ([0, 1, -1], 2, [0, 1, -1, 2, -.5], 4),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--channels", type=int, default=512, help="C: the conv sums over 3 C inputs")
    ap.add_argument("--out", type=int, default=512)
    ap.add_argument("--size", type=int, default=48, help="rows and columns (a multiple of 4)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    k = 3 * args.channels
    x = rounded(torch.nn.functional.silu(torch.randn(k, args.size, args.size, dtype=F64)), torch.bfloat16)
    w = rounded(torch.randn(args.out, k, 3, 3, dtype=F64) / math.sqrt(9 * k), torch.bfloat16)
    truth = torch.nn.functional.conv2d(x[None], w, padding=1)[0]
    scale = truth.pow(2).mean().sqrt()

    def rel(y):
        return ((y - truth).pow(2).mean().sqrt() / scale).item()

    direct = rel(rounded(torch.nn.functional.conv2d(x[None].float(), w.float(), padding=1)[0].double(),
                         torch.bfloat16))
    print(f"K = {k} inputs, {args.out} outputs, {args.size} x {args.size}, seed {args.seed}: rms error over the "
          f"output's rms")
    print(f"| way | multiplies per output | operands | before the bf16 output | after | over direct |")
    print("|---|---|---|---|---|---|")
    print(f"| direct, fp32 sums | 9 | bf16 | | {direct:.3e} | 1.00 |")
    for name, (ph, mh, pw, mw) in TRANSFORMS.items():
        rows, cols = cook_toom(ph, mh), cook_toom(pw, mw)
        mults = (mh + 2) * (mw + 2) / (mh * mw)
        for operands in (torch.float16, torch.bfloat16):
            y = winograd(x, w, rows, cols, operands)
            after = rel(rounded(y, torch.bfloat16))
            print(f"| {name} | {mults:.2f} | {str(operands)[6:]} | {rel(y):.3e} | {after:.3e} | "
                  f"{after / direct:.2f} |")


if __name__ == "__main__":
    main()
