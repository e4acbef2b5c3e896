"""The decoder's small convs, which b4df5c6's profile finds far from the ceiling (docs/profile-baseline.md), in other
forms: `python tools/baseline/small_convs_micro.py`.

- conv_out (256 -> 12 channels, 3x3x3, at 352 x 624, 9% of the ceiling): cuDNN with its outputs padded with zero
  channels to 16-64, in case cuDNN has a faster kernel for a wider output.
- The 1x1x1 shortcuts (1024 -> 512 at 176 x 312, 512 -> 256 at 352 x 624; 25-41%): cuDNN's conv3d against one cuBLAS
  addmm on the channels-last activations viewed as (pixels, channels).

Each on a pass's frames (conv_out: 2 cached + 4 new), the median of 10 calls after warm-up (CUDA events), counted
TFLOP/s, and the largest difference from the shipped form (0 where the numbers are the same)."""
import torch
import torch.nn.functional as F

from winograd_micro import timed   # this folder is the script's sys.path[0]

CL3 = torch.channels_last_3d


def conv_out(g):
    n, c, h, w = 4, 256, 352, 624
    x = torch.randn(1, c, n + 2, h, w, device="cuda", generator=g).to(torch.bfloat16).contiguous(memory_format=CL3)
    wt = (torch.randn(12, c, 3, 3, 3, device="cuda", generator=g) / (27 * c) ** 0.5).to(torch.bfloat16)
    flop = 2 * 12 * c * 27 * n * h * w
    y12 = F.conv3d(x, wt.contiguous(memory_format=CL3), padding=(0, 1, 1))
    for co in (12, 16, 24, 32, 64):
        wp = torch.cat([wt, wt.new_zeros(co - 12, c, 3, 3, 3)]).contiguous(memory_format=CL3)
        y = F.conv3d(x, wp, padding=(0, 1, 1))
        diff = (y[:, :12].float() - y12.float()).abs().max().item()
        ms = timed(lambda: F.conv3d(x, wp, padding=(0, 1, 1)))
        print(f"conv_out 256 -> {co:<3} {'cuDNN':14} {ms:8.3f} {flop / ms / 1e9:8.1f} {diff:9.2e}", flush=True)


def shortcut(g, c, co, n, h, w):
    x = torch.randn(1, c, n, h, w, device="cuda", generator=g).to(torch.bfloat16).contiguous(memory_format=CL3)
    wt = (torch.randn(co, c, 1, 1, 1, device="cuda", generator=g) / c ** 0.5).to(torch.bfloat16)
    b = (0.02 * torch.randn(co, device="cuda", generator=g)).to(torch.bfloat16)
    flop = 2 * co * c * n * h * w
    ref = F.conv3d(x, wt, b)
    out = torch.empty_like(ref, memory_format=CL3)
    x2, o2, w2 = x.permute(0, 2, 3, 4, 1).reshape(-1, c), out.permute(0, 2, 3, 4, 1).view(-1, co), wt.view(co, c)

    def gemm():
        torch.addmm(b, x2, w2.t(), out=o2)
    gemm()
    diff = (out.float() - ref.float()).abs().max().item()
    for form, fn, d in (("cuDNN conv3d", lambda: F.conv3d(x, wt, b), 0.0), ("cuBLAS addmm", gemm, diff)):
        ms = timed(fn)
        print(f"{f'shortcut {c} -> {co} {h}x{w}':28} {form:14} {ms:8.3f} {flop / ms / 1e9:8.1f} {d:9.2e}", flush=True)


def main():
    torch.backends.cudnn.benchmark = True
    g = torch.Generator(device="cuda").manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'conv':28} {'form':14} {'ms':>8} {'TFLOP/s':>8} {'max diff':>9}")
    conv_out(g)
    shortcut(g, 1024, 512, 4, 176, 312)
    shortcut(g, 512, 256, 4, 352, 624)


if __name__ == "__main__":
    main()
