"""conv_out (256 -> 12 channels, 3x3x3, at 352 x 624) in cuDNN with its outputs padded with zero channels:
`python tools/baseline/conv_out_micro.py`. The profile of b4df5c6 finds it at 9% of the ceiling on its FLOPs
(docs/profile-baseline.md): the question is whether cuDNN has a faster kernel for a wider output. Per output width,
the median of 10 calls after warm-up (CUDA events) on a pass's buffer (2 cached + 4 new frames), counted TFLOP/s (of
the 12 real channels), and whether the first 12 channels equal the 12-channel conv's."""
import torch
import torch.nn.functional as F

from winograd_micro import timed   # this folder is the script's sys.path[0]

CL3 = torch.channels_last_3d


def main():
    torch.backends.cudnn.benchmark = True
    g = torch.Generator(device="cuda").manual_seed(0)
    n, c, h, w = 4, 256, 352, 624
    x = torch.randn(1, c, n + 2, h, w, device="cuda", generator=g).to(torch.bfloat16).contiguous(memory_format=CL3)
    wt = (torch.randn(12, c, 3, 3, 3, device="cuda", generator=g) / (27 * c) ** 0.5).to(torch.bfloat16)
    flop = 2 * 12 * c * 27 * n * h * w
    y12 = F.conv3d(x, wt.contiguous(memory_format=CL3), padding=(0, 1, 1))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'outputs':>8} {'ms':>8} {'TFLOP/s':>8}  first 12 equal")
    for co in (12, 16, 24, 32, 64):
        wp = torch.cat([wt, wt.new_zeros(co - 12, c, 3, 3, 3)]).contiguous(memory_format=CL3)
        y = F.conv3d(x, wp, padding=(0, 1, 1))
        same = torch.equal(y[:, :12], y12)
        ms = timed(lambda: F.conv3d(x, wp, padding=(0, 1, 1)))
        print(f"{co:8d} {ms:8.3f} {flop / ms / 1e9:8.1f}  {same}", flush=True)


if __name__ == "__main__":
    main()
