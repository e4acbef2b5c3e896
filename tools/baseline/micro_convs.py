"""The micro-benchmark behind results/h200/micro_convs.txt (`python3 tools/baseline/micro_convs.py`; run on the H200
from results/h200/, where it lay then, as `python3 micro_convs.py`): cuDNN bf16 channels-last convs of the decoder's
shapes, padding inside the conv or by F.pad, the resample as upsample + 3x3 or as one 2x2 phase conv, the time conv
whole or in halves, conv_out. A record of how the figures were made."""
import torch, torch.nn.functional as F, time, sys
torch.backends.cudnn.benchmark = True
dev = "cuda"; bf = torch.bfloat16
CL = torch.channels_last_3d
def bench(fn, n=10):
    fn(); torch.cuda.synchronize()
    for _ in range(2): fn()
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n
rows = []
def row(name, ms, flop):
    rows.append((name, ms, flop / ms / 1e9))
    print(f"{name:60s} {ms:8.3f} ms {flop/ms/1e9:7.1f} TF/s", flush=True)
# 1. conv3d: in-conv spatial padding on a buffer vs F.pad + conv
for ci, co, h, w, n in [(256, 256, 352, 624, 4), (512, 256, 352, 624, 4), (512, 512, 176, 312, 4), (1024, 512, 176, 312, 4), (1024, 1024, 88, 156, 2), (1024, 1024, 44, 78, 1), (1024, 1024, 44, 78, 4)]:
    x = torch.randn(1, ci, n + 2, h, w, device=dev, dtype=bf).to(memory_format=CL)
    wt = (torch.randn(co, ci, 3, 3, 3, device=dev, dtype=bf) * 0.02).to(memory_format=CL)
    b = torch.randn(co, device=dev, dtype=bf)
    flop = 2 * co * ci * 27 * n * h * w
    row(f"conv3d {ci}->{co} {h}x{w} n={n} pad-in-conv bias", bench(lambda: F.conv3d(x, wt, b, padding=(0, 1, 1))), flop)
    row(f"conv3d {ci}->{co} {h}x{w} n={n} pad-in-conv nobias", bench(lambda: F.conv3d(x, wt, None, padding=(0, 1, 1))), flop)
    row(f"conv3d {ci}->{co} {h}x{w} n={n} F.pad+conv", bench(lambda: F.conv3d(F.pad(x, (1, 1, 1, 1)), wt, b)), flop)
    xh = torch.randn(1, ci, n + 2, h + 2, w, device=dev, dtype=bf).to(memory_format=CL)
    row(f"conv3d {ci}->{co} {h}x{w} n={n} halo rows pad(0,0,1)", bench(lambda: F.conv3d(xh, wt, None, padding=(0, 0, 1))), flop)
    del x, xh
# 2. resample: nearest x2 + 3x3 vs phase 2x2 pad 1 (4 Co outputs)
for c, h, w, n in [(1024, 44, 78, 2), (1024, 88, 156, 4), (512, 176, 312, 4)]:
    x = torch.randn(n, c, h, w, device=dev, dtype=bf).to(memory_format=torch.channels_last)
    wt = (torch.randn(c, c, 3, 3, device=dev, dtype=bf) * 0.02).to(memory_format=torch.channels_last)
    wp = (torch.randn(4 * c, c, 2, 2, device=dev, dtype=bf) * 0.02).to(memory_format=torch.channels_last)
    flop = 2 * c * c * 9 * n * 4 * h * w
    row(f"resample {c} {h}x{w} n={n} interp+3x3", bench(lambda: F.conv2d(F.interpolate(x, scale_factor=2.0, mode="nearest"), wt, None, padding=1)), flop)
    xu = F.interpolate(x, scale_factor=2.0, mode="nearest")
    row(f"resample {c} {h}x{w} n={n} 3x3 conv only (hi-res)", bench(lambda: F.conv2d(xu, wt, None, padding=1)), flop)
    row(f"resample {c} {h}x{w} n={n} phase 2x2 pad1 (counted as 3x3)", bench(lambda: F.conv2d(x, wp, None, padding=1)), flop)
# 3. time conv
for c, h, w, n in [(1024, 44, 78, 1), (1024, 88, 156, 2)]:
    x = torch.randn(1, c, n + 2, h, w, device=dev, dtype=bf).to(memory_format=CL)
    wt = (torch.randn(2 * c, c, 3, 1, 1, device=dev, dtype=bf) * 0.02).to(memory_format=CL)
    w0, w1 = wt[:c].contiguous(memory_format=CL), wt[c:].contiguous(memory_format=CL)
    flop = 2 * 2 * c * c * 3 * n * h * w
    row(f"time_conv {c} {h}x{w} n={n} one conv", bench(lambda: F.conv3d(x, wt)), flop)
    row(f"time_conv {c} {h}x{w} n={n} two convs", bench(lambda: (F.conv3d(x, w0), F.conv3d(x, w1))), flop)
# 4. norm+silu in torch (reference ops) on the top level
x = torch.randn(1, 256, 4, 352, 624, device=dev, dtype=bf).to(memory_format=CL)
g = torch.randn(256, 1, 1, 1, device=dev, dtype=bf)
nbytes = x.numel() * 4
def rn(): return F.silu((F.normalize(x.float(), dim=1).to(bf) * 16.0) * g + 0.0)
ms = bench(rn); print(f"torch rms_norm+silu 256x4x352x624 CL {ms:.3f} ms ({nbytes/ms/1e9:.0f} GB/s at 4 B/elem)")
# 5. conv_out
x = torch.randn(1, 256, 6, 352, 624, device=dev, dtype=bf).to(memory_format=CL)
wt = (torch.randn(12, 256, 3, 3, 3, device=dev, dtype=bf) * 0.02).to(memory_format=CL)
row("conv_out 256->12 CL", bench(lambda: F.conv3d(x, wt, None, padding=(0, 1, 1))), 2 * 12 * 256 * 27 * 4 * 352 * 624)
print(torch.__version__, torch.backends.cudnn.version())
