"""Checks of solutions/baseline/kernels.py against their PyTorch twins and an independent construction; run by
test_kernels.py in a subprocess under TRITON_INTERPRET=1 on the CPU (fp32: the interpreter has no bf16), and on a
GPU by the gpu-marked tests in bf16. `python tests/kernel_checks.py [cpu|cuda] [float32|bfloat16]` prints one line per
check: name, max |difference| against the twin, max |difference| against the independent construction."""
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import reference   # noqa: E402
from helpers import baseline as _solution, random_weights  # noqa: E402

CL3 = torch.channels_last_3d


def check_rows(k, dev, dt, g):
    """Norm + SiLU with bias and residual into a haloed buffer window; the sum written back in place."""
    b, c, n, h, w = 1, 32, 3, 5, 7
    x = torch.randn(b, c, n, h, w, generator=g).to(dev, dt).contiguous(memory_format=CL3)
    res = torch.randn(b, c, n, h, w, generator=g).to(dev, dt).contiguous(memory_format=CL3)
    bias, gamma = torch.randn(c, generator=g).to(dev, dt), torch.randn(c, 1, 1, 1, generator=g).to(dev, dt)
    results = []
    outs = []
    for fn in (k.rows, k.rows_torch):
        xs = x.clone(memory_format=CL3)
        buf = torch.zeros(b, c, n + 2, h + 2, w, device=dev, dtype=dt).contiguous(memory_format=CL3)
        fn(xs, buf[:, :, 2:, 1:-1], gamma, bias, res, write_sum=True, silu=True)
        outs.append((xs, buf))
    (xa, ba), (xb, bb) = outs
    s = x.float() + bias.float().view(1, -1, 1, 1, 1) + res.float()
    want = F.silu(reference.rms_norm(s, gamma.float()))       # reference's ops in fp32: the independent truth
    results.append(("rows: sum", (xa.float() - xb.float()).abs().max().item(), (xa.float() - s).abs().max().item()))
    results.append(("rows: norm+silu", (ba.float() - bb.float()).abs().max().item(),
                    (ba[:, :, 2:, 1:-1].float() - want).abs().max().item()))
    border = ba.clone()
    border[:, :, 2:, 1:-1] = 0
    results.append(("rows: nothing outside the window", border.abs().max().item(), border.abs().max().item()))
    plain = torch.empty_like(x)
    k.rows(x, plain, silu=False, bias=bias)
    results.append(("rows: bias only", 0.0, (plain.float() - (x.float() + bias.float().view(1, -1, 1, 1, 1)))
                    .abs().max().item()))
    return results


def check_shuffle(k, dev, dt, g):
    """Phase convs + shuffle + bias + DupUp against reference.upsampler's resample and avg_shortcut."""
    sol = _solution()
    results = []
    for cin, co, temporal in ((16, 16, True), (16, 8, False)):
        b, n, h, w = 1, 2, 4, 5
        ft = 2 if temporal else 1
        src = torch.randn(b, co, n, h, w, generator=g).to(dev, dt).contiguous(memory_format=CL3)
        x_in = torch.randn(b, cin, n, h, w, generator=g).to(dev, dt).contiguous(memory_format=CL3)
        wt = (torch.randn(co, co, 3, 3, generator=g) / (3 * co ** 0.5)).to(dev, dt)
        bias = torch.randn(co, generator=g).to(dev, dt)
        p = F.conv2d(sol.frames2d(src), sol.phase_weights(wt), None, padding=1)
        for a in range(ft):
            outs = []
            for fn in (k.shuffle, k.shuffle_torch):
                out = torch.full((b, co, n * ft, 2 * h, 2 * w), float("nan"), device=dev, dtype=dt)
                out = out.contiguous(memory_format=CL3)
                fn(p, bias, x_in, out, ft, a, ft, a)
                outs.append(out[:, :, a::ft])
            up = F.interpolate(sol.frames2d(src).float(), scale_factor=2.0, mode="nearest-exact")
            res = F.conv2d(up, wt.float(), bias.float(), padding=1)
            res = sol.frames5d(res, b)
            short = reference.avg_shortcut(x_in.float(), co, temporal, False)[:, :, a::ft]
            want = res + short
            results.append((f"shuffle {cin}->{co} ft={ft} a={a}", (outs[0].float() - outs[1].float()).abs().max().item(),
                            (outs[0].float() - want).abs().max().item()))
    return results


def check_head(k, dev, dt, g):
    b, n, h, w = 1, 3, 4, 5
    y = torch.randn(b, 12, n, h, w, generator=g).to(dev, dt).contiguous(memory_format=CL3)
    bias = torch.randn(12, generator=g).to(dev, dt)
    video = torch.full((b, 3, n + 2, 2 * h, 2 * w), float("nan"), device=dev, dtype=dt)
    k.head(y, bias, video[:, :, 1:1 + n])
    twin = torch.empty(b, 3, n, 2 * h, 2 * w, device=dev, dtype=dt)
    k.head_torch(y, bias, twin)
    want = torch.clamp(reference.unpatchify(y.float() + bias.float().view(1, -1, 1, 1, 1)), -1.0, 1.0)
    untouched = torch.isnan(video[:, :, 0]).all() and torch.isnan(video[:, :, -1]).all()
    return [("head", (video[:, :, 1:1 + n].float() - twin.float()).abs().max().item(),
             (video[:, :, 1:1 + n].float() - want).abs().max().item()),
            ("head: other frames untouched", 0.0 if untouched else 1.0, 0.0 if untouched else 1.0)]


def check_winograd(k, dev, dt, g):
    """Winograd F(2x2,3x3) and F(2x4,3x3) causal convs against the twin and F.conv3d of the same operands; odd
    sizes, with and without halo rows, with a bias."""
    wg = sys.modules[k.__name__.rsplit(".", 1)[0] + ".winograd"]
    results = []
    for cols, tile in ((2, ""), (4, " 2x4 tiles")):
        for c, co, n, h, w, pad in ((16, 16, 2, 6, 10, 1), (16, 32, 1, 5, 7, 1), (32, 16, 3, 5, 9, 0)):
            buf = torch.randn(1, c, n + 2, h + 2 - 2 * pad, w, generator=g).to(dev, dt).contiguous(memory_format=CL3)
            wt = (torch.randn(co, c, 3, 3, 3, generator=g) / (27 * c) ** 0.5).to(dev, dt)
            bias = torch.randn(co, generator=g).to(dev, dt)
            u = wg.transform_weights(wt, torch.float32 if dt == torch.float32 else torch.float16, cols)
            want = F.conv3d(buf.float(), wt.float(), bias.float(), padding=(0, pad, 1))
            twin = wg.conv_torch(buf, u, pad, bias).float()
            got = wg.conv(buf, u, pad, bias).float()
            results.append((f"winograd {c}->{co} {h}x{w} pad {pad}{tile}", (got - twin).abs().max().item(),
                            (got - want).abs().max().item()))
            banded = wg.conv(buf, u, pad, bias, v_bytes=1).float()      # one tile row at a time
            results.append((f"winograd {c}->{co} {h}x{w} pad {pad}{tile} by tile rows",
                            (banded - twin).abs().max().item(), (banded - want).abs().max().item()))
    return results


def check_decode():
    """The whole baseline (kernels included) on the tiny geometry against reference.decode, fp32 on the CPU."""
    import spec
    w = random_weights()
    # T = 2: the first latent frame alone, then one through the time convs (the interpreter is slow)
    z = torch.randn(1, 8, 2, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(1))
    out = torch.full((1, 3, spec.frames(2), *spec.TINY.video_hw), float("nan"))
    s = _solution()
    s.run(z, s.prepare(w, 0, 1, None), 0, 1, None, out)      # prepare: the Winograd convs without direct weights
    d = (out - reference.decode(z, w)).abs().max().item()
    print(f"decode\t{d:.3e}\t{d:.3e}\ttriton={os.environ.get('TRITON_INTERPRET') == '1'}")


def main(dev="cpu", dtype="float32"):
    if dev == "decode":
        return check_decode()
    k = sys.modules[_solution().__name__.rsplit(".", 1)[0] + ".kernels"]
    used = k.use_triton(torch.empty(0, device=dev))
    g = torch.Generator().manual_seed(0)
    dt = getattr(torch, dtype)
    checks = check_rows(k, dev, dt, g) + check_shuffle(k, dev, dt, g) + check_head(k, dev, dt, g)
    for name, twin, truth in checks + check_winograd(k, dev, dt, g):
        print(f"{name}\t{twin:.3e}\t{truth:.3e}\ttriton={used}")


if __name__ == "__main__":
    main(*sys.argv[1:])
