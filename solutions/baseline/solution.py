"""The baseline: the Wan2.2 decode in channels-last bf16 through cuDNN, with Triton for the memory-bound work.

Same decode as reference.py (the causal caches, the first latent frame alone, the time convs skipping it), computed
another way:
- Activations are channels-last bf16 (B, C, t, H, W) tensors; norm statistics and every kernel's arithmetic are fp32.
- Every causal conv reads one input buffer: its two cached frames, then the new frames, written there by the kernel
  that makes them (norm + SiLU). cuDNN pads the columns (and the rows, on one GPU) itself, so no F.pad or cat copies
  the activations; the conv's bias is added by the next kernel that reads its output.
- The nearest-2x upsample and 3x3 conv of a resample are four 2x2 convs on the low-resolution frames ("phases",
  4/9 of the FLOPs), one cuDNN call with 4 x C outputs; `kernels.shuffle` puts them back on the 2x grid together
  with the bias and the DupUp shortcut. The time conv runs as two convs (one per output frame), so its frame
  interleave is only where `shuffle` writes.
- The causal 3x3x3 convs at the three lower levels run as Winograd F(2x2,3x3) (winograd.py, WINOGRAD_COLS):
  4/9 of the multiplies, fp16 operands, cuBLAS for the products; cuDNN's direct conv stays at the 8x level, and
  runs everywhere on a CPU without the Triton interpreter.
- conv_out's bias, unpatchify and the clamp are one kernel writing into `out`.
- `prepare` lays the weights out once: channels-last, the phase weights (summed in fp32, rounded once), the time
  conv's halves, the Winograd weights; the weights these replace become one-element stand-ins (1.0 GiB less).

Several ranks: every rank decodes a band of rows at every level (bands.py); each spatial conv's input buffer has a
halo row above and below, filled from the neighbours, so only the columns are padded; the mid block's attention
gathers the keys and values; rank 0 gathers the video bands into out.
"""
import warnings

import torch
import torch.nn.functional as F

import reference
import spec
from reference import CACHE_T, scope

from . import bands
from . import kernels
from . import winograd

# Latent frames per decoder pass after the first, per GPU of the world. More would speed the 44 x 78 convs a little
# (3% of the FLOPs) but grows every level's activations, and with 1 f481x1 already peaks near the 10 GiB target
# (docs/perf-notes.md, "Memory"). On `world` ranks a rank holds 1/world of each frame, so a pass of CHUNK * world
# frames keeps its activations that size while launching 1/world as many kernels and halo exchanges per frame
# (docs/perf-notes.md, "Frames per pass at world 2").
CHUNK = 1
CL3 = torch.channels_last_3d
CL2 = torch.channels_last
MIN_CUDNN = 91500                      # older cuDNN disables or breaks bf16 conv3d
# The Winograd tile of the causal 3x3x3 convs by level (spatial upsamples so far): 2 x WINOGRAD_COLS[level] outputs.
# 2 is F(2x2,3x3); 4 is F(2x4,3x3), 3/4 of its bytes of V and M and of its products for 1.14x its error in those
# convs (tools/baseline/winograd_error.py). F(2x4) at levels 0-2 took 6.5% off f481 but its transformed weights are
# 1.5x larger: a peak of 10.5 GiB (docs/perf-notes.md, "F(2x4) timed stand-alone"). cuDNN's direct conv serves the
# levels not listed: it stays faster at the 8x level (docs/perf-notes.md, "Winograd").
WINOGRAD_COLS = {0: 2, 1: 2, 2: 2}


def winograd_convs(geometry):
    """{name: tile columns} of the causal 3x3x3 convs at the levels of WINOGRAD_COLS."""
    # conv_in and the mid block run at level 0; up block i at level i (one spatial upsample ends each block before it)
    at = [("decoder.conv_in", 0)] + [(f"decoder.mid_block.resnets.{j}.conv{k}", 0) for j in (0, 1) for k in (1, 2)]
    at += [(f"decoder.up_blocks.{i}.resnets.{j}.conv{k}", i) for i in range(len(geometry.up_blocks))
           for j in range(spec.RESNETS_PER_UP_BLOCK) for k in (1, 2)]
    return {name: WINOGRAD_COLS[level] for name, level in at if level in WINOGRAD_COLS}


def extra_names(geometry):
    """Names of the tensors prepare() appends to the weight list, in order."""
    out = []
    for i, (_, _, temporal, spatial) in enumerate(geometry.up_blocks):
        u = f"decoder.up_blocks.{i}.upsampler"
        if spatial:
            out.append(f"{u}.resample.phases")
        if temporal:
            out += [f"{u}.time_conv.weight0", f"{u}.time_conv.weight1", f"{u}.time_conv.bias0",
                    f"{u}.time_conv.bias1"]
    return out + [f"{name}.winograd" for name in winograd_convs(geometry)]


def phase_weights(w):
    """(Co, C, 3, 3) conv after a nearest 2x upsample -> (4 Co, C, 2, 2): phase (i, j) (output rows 2y+i, columns
    2x+j) at block 2i+j. Rows of the upsampled input seen by row 2y+i are y-1, y (i = 0: taps w0, w1+w2) or y, y+1
    (i = 1: w0+w1, w2); the same for columns. A 2x2 conv with padding 1 over the H x W input then gives phase (i, j)
    at (y+i, x+j)."""
    w32 = w.float() if w.dtype in (torch.bfloat16, torch.float16) else w   # summed in fp32 at least

    def taps(a, i, dim):
        a0, a1, a2 = a.unbind(dim)
        return torch.stack((a0, a1 + a2) if i == 0 else (a0 + a1, a2), dim)

    blocks = [taps(taps(w32, i, 2), j, 3) for i in (0, 1) for j in (0, 1)]
    return torch.cat(blocks, 0).to(w.dtype).contiguous(memory_format=CL2)


def _layout(t):
    if t.dim() == 5:
        return t.contiguous(memory_format=CL3)
    if t.dim() == 4:
        return t.contiguous(memory_format=CL2)
    return t.contiguous()


def prepare(weights, rank, world, pg):
    """laid_out(weights), with spec.stand_in for the tensors that run() does not read (1.0 GiB of the full
    geometry); on a GPU, then tune()."""
    g = spec.geometry_of(weights)
    out = laid_out(weights)
    drop = set(superseded(g, kernels.use_triton(out[0])))
    for i, (name, _) in enumerate(spec.weight_list(g)):
        if name in drop:
            out[i] = spec.stand_in(out[i])
    if out[0].is_cuda and cudnn_ok():
        tune(out, g, rank, world, pg)
    return out


def superseded(geometry, with_winograd=True):
    """Names of the weights that run() reads only in prepare()'s other form: the resamples' 3x3 weights (their
    phases), the time convs' (their halves), and with_winograd the Winograd convs' (their U)."""
    out = []
    for i, (_, _, temporal, spatial) in enumerate(geometry.up_blocks):
        u = f"decoder.up_blocks.{i}.upsampler"
        out += [f"{u}.resample.1.weight"] if spatial else []
        out += [f"{u}.time_conv.weight", f"{u}.time_conv.bias"] if temporal else []
    return out + ([f"{name}.weight" for name in winograd_convs(geometry)] if with_winograd else [])


def laid_out(weights):
    """The weights channels-last, then extra_names' tensors."""
    g = spec.geometry_of(weights)
    spec.check_weights(weights, g)
    W = dict(zip([n for n, _ in spec.weight_list(g)], weights))
    out = [_layout(t) for t in weights]
    for i, (_, cout, temporal, spatial) in enumerate(g.up_blocks):
        u = f"decoder.up_blocks.{i}.upsampler"
        if spatial:
            out.append(phase_weights(W[f"{u}.resample.1.weight"]))
        if temporal:
            w, b = W[f"{u}.time_conv.weight"], W[f"{u}.time_conv.bias"]
            # copies, not views: prepare() frees the whole tensors
            out += [_layout(w[:cout].clone()), _layout(w[cout:].clone()), b[:cout].clone(), b[cout:].clone()]
    for name, cols in winograd_convs(g).items():
        w = W[f"{name}.weight"]
        # fp16 operands for bf16 weights (finer than bf16, same speed); an fp32 decode stays fp32.
        out.append(winograd.transform_weights(w, torch.float32 if w.dtype == torch.float32 else torch.float16, cols))
    return out


def tune(weights, g, rank, world, pg):
    """Decode zeros of the first frame and two passes, so that cuDNN's algorithm search runs here, while no call's
    latents and `out` are resident. The search tries candidate algorithms with workspaces of up to a GiB, which on
    top of a call's own memory would raise its peak (docs/perf-notes.md, "The tune() memory fix")."""
    t = 1 + 2 * CHUNK * world
    dev, dtype = weights[0].device, weights[0].dtype
    z = torch.zeros(1, g.latent_channels, t, *g.latent_hw, dtype=dtype, device=dev)
    out = torch.empty((1, 3, spec.frames(t), *g.video_hw) if rank == 0 else (0,), dtype=dtype, device=dev)
    run(z, weights, rank, world, pg, out)


def cudnn_ok():
    """False (with a warning) where cuDNN is older than MIN_CUDNN: then the convs run without cuDNN."""
    v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if v is not None and v < MIN_CUDNN:
        warnings.warn(f"cuDNN {v} is older than {MIN_CUDNN}, which bf16 conv3d needs; running the convolutions "
                      f"without cuDNN (slow)")
        return False
    return True


class Act:
    """A value x + bias + res whose sum is not formed yet: the next kernel that reads it adds it in."""

    def __init__(self, x, bias=None, res=None):
        self.x, self.bias, self.res = x, bias, res

    @property
    def pending(self):
        return self.bias is not None or self.res is not None


def materialize(act, into=None):
    """The value as a tensor (in place into act.x, or into `into`)."""
    if into is None:
        if act.pending:
            kernels.rows(act.x, act.x, bias=act.bias, res=act.res, silu=False)
        return act.x
    if act.pending:
        kernels.rows(act.x, into, bias=act.bias, res=act.res, silu=False)
    else:
        into.copy_(act.x)
    return into


def cl(y):
    """y channels-last (cuDNN's convs keep their input's layout; the CPU's may not)."""
    fmt = CL3 if y.dim() == 5 else CL2
    return y if y.is_contiguous(memory_format=fmt) else y.contiguous(memory_format=fmt)


def frames2d(x):
    """(B, C, n, H, W) channels-last-3d -> (B*n, C, H, W) channels-last, a view."""
    b, c, n, h, w = x.shape
    return x.permute(0, 2, 1, 3, 4).reshape(b * n, c, h, w)


def frames5d(x, b):
    """The inverse of frames2d."""
    n, c, h, w = x.shape
    return x.view(b, n // b, c, h, w).permute(0, 2, 1, 3, 4)


class Decoder:
    def __init__(self, W, geometry, band):
        self.W, self.g, self.band, self.caches = W, geometry, band, {}

    # causal convs over an input buffer ---------------------------------------------------------------------------

    def buffer(self, key, like, channels, halo=True):
        """A conv's input buffer (B, C, CACHE_T + n, H [+ 2 halo rows], W): the cached frames (zeros before the
        first chunk) and, returned beside it, the window that the new frames are written into."""
        b, _, n, h, w = like.shape
        p = 1 if halo and self.band is not None else 0
        buf = torch.empty((b, channels, CACHE_T + n, h + 2 * p, w), dtype=like.dtype, device=like.device,
                          memory_format=CL3)
        cache = self.caches.get(key)
        if cache is None:
            buf[:, :, :CACHE_T].zero_()
        else:
            buf[:, :, :CACHE_T].copy_(cache)
        return buf, buf[:, :, CACHE_T:, p:p + h]

    def conv(self, key, buf, weight, bias=None):
        """The causal conv over a filled buffer, after keep(); Winograd where prepare() transformed its weights."""
        self.keep(key, buf, spatial=weight.shape[3] > 1)
        u = self.W.get(f"{key}.winograd")
        # Where the kernels cannot run (a CPU without the interpreter) the direct conv is the cheaper exact one.
        if u is not None and kernels.use_triton(buf):
            return winograd.conv(buf, u, 0 if self.band is not None else 1, bias)
        if spec.is_stand_in(weight):
            raise RuntimeError(f"{key}: prepare() kept only the Winograd form of this conv, and Triton cannot run "
                               f"on {buf.device} here")
        return self.convolve(buf, weight, bias)

    def keep(self, key, buf, spatial):
        """Fill a filled buffer's halo rows (spatial convs on bands) and keep its last CACHE_T frames as the next
        chunk's cache."""
        if self.band is not None and spatial:
            with scope("halo_exchange"):
                self.band.fill_halo(buf[:, :, CACHE_T:])
        cache = torch.empty_like(buf[:, :, -CACHE_T:], memory_format=CL3)
        cache.copy_(buf[:, :, -CACHE_T:])
        self.caches[key] = cache

    def convolve(self, buf, weight, bias=None):
        kh, kw = weight.shape[3:]
        rows = 0 if self.band is not None else kh // 2
        return cl(F.conv3d(buf, weight, bias, padding=(0, rows, kw // 2)))

    # blocks ------------------------------------------------------------------------------------------------------

    def resnet(self, act, name):
        with scope(reference._path(name)):
            return self._resnet(act, name)

    def _resnet(self, act, name):
        W, path = self.W, reference._path(name)
        x = act.x
        cout = W[f"{name}.conv1.weight"].shape[0]
        with scope(f"{path}/norm1"):
            buf, inner = self.buffer(f"{name}.conv1", x, x.shape[1])
            kernels.rows(x, inner, W[f"{name}.norm1.gamma"], act.bias, act.res, write_sum=act.pending)
        with scope(f"{path}/conv1"):
            y = self.conv(f"{name}.conv1", buf, W[f"{name}.conv1.weight"])
        del buf, inner
        if f"{name}.conv_shortcut.weight" in W:   # after conv1, whose input buffer is then freed: a lower peak
            with scope(f"{path}/conv_shortcut"):
                h = cl(F.conv3d(x, W[f"{name}.conv_shortcut.weight"], W[f"{name}.conv_shortcut.bias"]))
        else:
            h = x
        with scope(f"{path}/norm2"):
            buf, inner = self.buffer(f"{name}.conv2", y, cout)
            kernels.rows(y, inner, W[f"{name}.norm2.gamma"], W[f"{name}.conv1.bias"])
        del y
        with scope(f"{path}/conv2"):
            y = self.conv(f"{name}.conv2", buf, W[f"{name}.conv2.weight"])
        return Act(y, W[f"{name}.conv2.bias"], h)

    def attention(self, act, name):
        with scope(reference._path(name)):
            return self._attention(act, name)

    def _attention(self, act, name):
        W, path = self.W, reference._path(name)
        x = materialize(act)
        b, c, n, h, w = x.shape
        with scope(f"{path}/norm"):
            xn = torch.empty_like(x, memory_format=CL3)
            kernels.rows(x, xn, W[f"{name}.norm.gamma"], silu=False)
        with scope(f"{path}/to_qkv"):
            qkv = cl(F.conv2d(frames2d(xn), W[f"{name}.to_qkv.weight"], W[f"{name}.to_qkv.bias"]))   # (N, 3C, h, W)
        del xn
        qkv = qkv.permute(0, 2, 3, 1)                                                          # (N, h, W, 3C)
        q = qkv[..., :c].reshape(b * n, 1, h * w, c)
        kv = qkv[..., c:]
        if self.band is not None:
            with scope("gather"):
                kv = self.band.gather_rows(kv.contiguous(), dim=1)
        k = kv[..., :c].reshape(b * n, 1, -1, c)
        v = kv[..., c:].reshape(b * n, 1, -1, c)
        with scope(f"{path}/attention"):
            o = F.scaled_dot_product_attention(q, k, v)                                        # (N, 1, hW, C)
        o = o.reshape(b * n, h, w, c).permute(0, 3, 1, 2)                                         # channels-last
        with scope(f"{path}/proj"):
            o = cl(F.conv2d(o, W[f"{name}.proj.weight"], W[f"{name}.proj.bias"]))
        return Act(frames5d(o, b), res=x)

    def upsampler(self, act, x_in, i, first):
        _, cout, temporal, _ = self.g.up_blocks[i]
        W, name = self.W, f"decoder.up_blocks.{i}.upsampler"
        path = reference._path(name)
        ft = 2 if temporal else 1
        b, c, n, h, w = act.x.shape
        key = f"{name}.time_conv"
        if temporal and not first:
            with scope(f"{path}/time_conv"):
                buf, inner = self.buffer(key, act.x, c, halo=False)
                materialize(act, into=inner)
                self.keep(key, buf, spatial=False)
                srcs = [(self.convolve(buf, W[f"{key}.weight{k}"], W[f"{key}.bias{k}"]), k) for k in (0, 1)]
                del buf, inner
            step = 2
        else:
            if temporal:     # the first chunk skips the time conv; the next one sees two zero frames
                self.caches[key] = act.x.new_zeros((b, c, CACHE_T, h, w)).contiguous(memory_format=CL3)
            srcs, step = [(materialize(act), ft - 1)], 1
        out = torch.empty((b, cout, n * step, 2 * h, 2 * w), dtype=act.x.dtype, device=act.x.device,
                          memory_format=CL3)
        with scope(f"{path}/resample"):
            for src, k in srcs:
                x2 = frames2d(src)
                if self.band is not None:
                    with scope("halo_exchange"):
                        x2 = self.band.haloed(x2)
                    pad = (0, 1)
                else:
                    pad = (1, 1)
                p = cl(F.conv2d(x2, W[f"{name}.resample.phases"], None, padding=pad))            # (N, 4Co, h+1, W+1)
                del x2
                kernels.shuffle(p, W[f"{name}.resample.1.bias"], x_in, out, step, k if step == 2 else 0, ft, k)
                del p
        return Act(out)

    def __call__(self, x, first):
        """One chunk of latent frames (after post_quant_conv) -> conv_out's output without its bias."""
        W, g = self.W, self.g
        with scope("decoder/conv_in"):
            buf, inner = self.buffer("decoder.conv_in", x, x.shape[1])
            inner.copy_(x)
            act = Act(self.conv("decoder.conv_in", buf, W["decoder.conv_in.weight"], W["decoder.conv_in.bias"]))
            del buf, inner
        with scope("decoder/mid_block"):
            act = self.resnet(act, "decoder.mid_block.resnets.0")
            act = self.attention(act, "decoder.mid_block.attentions.0")
            act = self.resnet(act, "decoder.mid_block.resnets.1")
        for i, (_, _, _, spatial) in enumerate(g.up_blocks):
            with scope(f"decoder/up_blocks.{i}"):
                act = Act(materialize(act))
                x_in = act.x if spatial else None      # the upsampler's shortcut; else freed after resnets.0
                for j in range(spec.RESNETS_PER_UP_BLOCK):
                    act = self.resnet(act, f"decoder.up_blocks.{i}.resnets.{j}")
                if spatial:
                    with scope(f"decoder/up_blocks.{i}/upsampler"):
                        act = self.upsampler(act, x_in, i, first)
                del x_in
        with scope("decoder/norm_out"):
            buf, inner = self.buffer("decoder.conv_out", act.x, act.x.shape[1])
            kernels.rows(act.x, inner, W["decoder.norm_out.gamma"], act.bias, act.res)
            del act
        with scope("decoder/conv_out"):
            return self.conv("decoder.conv_out", buf, W["decoder.conv_out.weight"])


def chunks(t, world=1):
    """The passes over t latent frames: the first frame alone, then CHUNK * world at a time."""
    n = CHUNK * world
    return [(0, 1)] + [(s, min(s + n, t)) for s in range(1, t, n)]


def _named(weights, z):
    """{name: tensor} of prepare()'s list (or of a plain weight list, laid out here) and the geometry."""
    n = len(spec.WEIGHTS)
    if len(weights) == n:
        weights = laid_out(weights)
    W, g = reference.named_weights(list(weights[:n]), z)
    names = extra_names(g)
    if len(weights) != n + len(names):
        raise ValueError(f"expected {n + len(names)} tensors from prepare(), got {len(weights)}")
    W.update(zip(names, weights[n:]))
    return W, g


def run(z, weights, rank, world, pg, out):
    W, g = _named(weights, z)
    dtype = W["decoder.conv_in.weight"].dtype
    t, h = z.shape[2], z.shape[3]
    band = bands.Band(rank, world, pg, h) if world > 1 else None
    if band is None and rank != 0:
        return
    if band is not None:
        z = z[:, :, :, band.first:band.first + band.rows]
    enabled = cudnn_ok()
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=enabled, benchmark=enabled, deterministic=False,
                                                     allow_tf32=torch.backends.cudnn.allow_tf32):
        with scope("post_quant_conv"):
            x = cl(F.conv3d(z.to(dtype).contiguous(memory_format=CL3), W["post_quant_conv.weight"],
                            W["post_quant_conv.bias"]))
        dec = Decoder(W, g, band)
        done = 0
        for start, stop in chunks(t, world):
            with scope("decoder"):
                y = dec(x[:, :, start:stop], start == 0)
            b, _, n, hh, ww = y.shape
            with scope("unpatchify"):
                if band is None:
                    kernels.head(y, W["decoder.conv_out.bias"], out[:, :, done:done + n])
                else:
                    video = torch.empty((b, 3, n, 2 * hh, 2 * ww), dtype=dtype, device=y.device)
                    kernels.head(y, W["decoder.conv_out.bias"], video)
            del y
            if band is not None:
                with scope("gather"):
                    band.gather_video(video, out[:, :, done:done + n] if rank == 0 else None)
            done += n
    assert done == spec.frames(t)
