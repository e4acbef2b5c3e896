"""Winograd F(2x2,3x3) and F(2x4,3x3) (solutions/baseline/winograd.py) against cuDNN's direct conv3d on the
decoder's 3x3x3 causal convs: `python tools/baseline/winograd_micro.py`.

Per level: a channels-last bf16 input buffer (2 cached + n new frames), bf16 weights; cuDNN (benchmark mode, as the
baseline runs it) and winograd.conv with 32 and 64 tiles per program, then its three steps timed alone (input
transform, GEMMs, output transform); the median of 10 timed calls after warm-up (CUDA events), counted TFLOP/s (the
direct conv's FLOPs), and each one's rms error relative to the rms of an fp32 conv of the same bf16 operands (TF32
off)."""
import importlib
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import loader  # noqa: E402

LEVELS = [  # (name, C in, C out, new frames, H, W)
    ("352x624 C256", 256, 256, 4, 352, 624),
    ("176x312 C512", 512, 512, 4, 176, 312),
    ("88x156 C1024", 1024, 1024, 2, 88, 156),
    ("44x78 C1024", 1024, 1024, 1, 44, 78),
]
def timed(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def main():
    sol = loader.load(os.path.join(ROOT, "solutions", "baseline")).module
    wg = importlib.import_module(sol.__name__.rsplit(".", 1)[0] + ".winograd")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    cl3 = torch.channels_last_3d
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'level':14} {'method':28} {'ms':>8} {'TFLOP/s':>8} {'rel rms':>9}")
    for name, c, co, n, h, w in LEVELS:
        buf = torch.randn(1, c, n + 2, h, w, device="cuda", generator=g).to(torch.bfloat16).contiguous(memory_format=cl3)
        wt = (torch.randn(co, c, 3, 3, 3, device="cuda", generator=g) / (27 * c) ** 0.5).to(torch.bfloat16)
        wcl = wt.contiguous(memory_format=cl3)
        ref = F.conv3d(buf.float(), wt.float(), padding=(0, 1, 1))
        scale = ref.pow(2).mean().sqrt().item()
        flop = 2 * co * c * 27 * n * h * w
        rows = []
        y = F.conv3d(buf, wcl, padding=(0, 1, 1))
        ms = timed(lambda: F.conv3d(buf, wcl, padding=(0, 1, 1)))
        rows.append(("cuDNN direct", ms, (y.float() - ref).pow(2).mean().sqrt().item() / scale))
        del y
        out = torch.empty_like(ref, dtype=torch.bfloat16, memory_format=cl3)
        for cols in (2, 4):              # tiles of 2 x cols outputs: F(2x2,3x3), F(2x4,3x3)
            u = wg.transform_weights(wt, cols=cols)
            planes = u.shape[0]
            for bm in (32, 64):
                wg.conv(buf, u, 1, out=out, bm=bm)
                err = (out.float() - ref).pow(2).mean().sqrt().item() / scale
                ms = timed(lambda: wg.conv(buf, u, 1, out=out, bm=bm))
                rows.append((f"winograd 2x{cols}, BM {bm}", ms, err))
            th, tw = h // 2, (w + cols - 1) // cols
            v = torch.empty((planes, 1, th * tw, n + 2, c), dtype=u.dtype, device="cuda")
            sb, _, sf, sy, sx = buf.stride()
            grid = ((n + 2) * ((th * tw + 31) // 32), (c + 63) // 64)
            rows.append(("  input transform", timed(lambda: wg._vin_kernel[grid](
                buf, sb, sf, sy, sx, v, 1, c, n + 2, h, w, h, tw, 1, 0, th, BM=32, BK=64, COLS=cols,
                num_warps=4)), float("nan")))
            m = torch.empty((n, planes, th * tw, co), dtype=torch.float32, device="cuda")

            def gemms():
                for f in range(n):
                    a = v.as_strided((planes, th * tw, 3 * c), (th * tw * (n + 2) * c, (n + 2) * c, 1), f * c)
                    torch.bmm(a, u, out_dtype=torch.float32, out=m[f])
            rows.append(("  GEMMs", timed(gemms), float("nan")))
            _, oc, _, oy, ox = out.stride()
            grid = ((th * tw + 31) // 32, (co + 63) // 64)

            def outs():
                for f in range(n):
                    wg._vout_kernel[grid](m[f], m, out[:, :, f:f + 1], oc, oy, ox, co, h, w, tw, 0, th,
                                          HAS_BIAS=False, BM=32, BN=64, COLS=cols, num_warps=4)
            rows.append(("  output transform", timed(outs), float("nan")))
            del v, m
        for method, ms, err in rows:
            print(f"{name:14} {method:28} {ms:8.3f} {flop / ms / 1e9:8.0f} {err:9.2e}", flush=True)
        del buf, ref, out


if __name__ == "__main__":
    main()
