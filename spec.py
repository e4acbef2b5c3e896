"""The task as data: decode Wan2.2 VAE latents into video on one, two or four GPUs of one node.

What is computed: diffusers' `AutoencoderKLWan._decode` (0.42.1) of the Wan2.2-TI2V-5B VAE, latents
z [1, 48, T, 44, 78] to video [1, 3, 4T-3, 704, 1248] in [-1, 1]: post_quant_conv over all frames, the decoder
one latent frame at a time with its causal caches, unpatchify 2 x 2, clamp. `reference.py` is the definition.

The solution interface (positional, destination passing):

    run(z, weights, rank, world, pg, out)
    prepare(weights, rank, world, pg) -> list[Tensor]        # optional, untimed

z is [1, 48, T, 44, 78] bf16 on every rank; weights are the 110 tensors of WEIGHTS, bf16, on this rank's GPU (or
what prepare returned); out is rank 0's video [1, 3, 4T-3, 704, 1248] bf16 from torch.empty (an empty tensor on
other ranks). bf16 weights and activations with fp32 accumulation, fp32 RMS-norm statistics, nothing narrower.

Correctness, on rank 0's out against ref_<clip>.pt (the fp32 decode, TF32 off, stored as fp16): every element
finite and in [-1, 1]; with d = out - ref in fp32, max|d| <= min(MAX_ABS_CAP, ERROR_FACTOR x bf16_max_abs) and
rms(d) <= ERROR_FACTOR x bf16_rms, the bf16 figures being the release bf16 decode's error on the same clip
(calibration.json).

Geometry: every function takes `geometry=FULL`. TINY is the same architecture at small channel widths and a
small latent size (the same clips, frame counts and workloads), for CPU runs and tests; a command chooses it
only through its `--tiny` flag, and its data lives in `$DATA/tiny`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

ERROR_FACTOR = 3.0
MAX_ABS_CAP = 2.0
WEIGHTS_FILE = "decoder_weights_bf16.pt"
NAMES_FILE = "weight_names.json"
CALIBRATION_FILE = "calibration.json"
MANIFEST_FILE = "manifest.json"
PATCH = 2                 # unpatchify: 12 decoder channels -> 3 colours x 2 x 2 pixels
OUT_CHANNELS = 12
RESNETS_PER_UP_BLOCK = 3  # num_res_blocks + 1
CACHE_T = 2               # frames a causal 3x3x3 conv keeps from the previous chunk

# The Wan2.2 VAE config's per-channel statistics of the latents a pipeline passes to decode.
LATENTS_MEAN = (
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891,
    0.1570, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230, -0.0313, -0.1649, 0.0117, 0.0723,
    -0.2839, -0.2083, -0.0520, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667)
LATENTS_STD = (
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901,
    0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944,
    0.5726, 1.2042, 0.5458, 1.6887, 0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744)

CLIPS = {
    "f1": {"source": "row_000168", "latent_frames": 1},
    "f5": {"source": "row_000168", "latent_frames": 2},
    "f17": {"source": "row_000168", "latent_frames": 5},
    "f121": {"source": "row_000168", "latent_frames": 31},
    "f241": {"source": "row_000129", "latent_frames": 61},
    "f481": {"source": "row_000090", "latent_frames": 121},
}
SOURCE_FRAMES = 121  # latent frames of each source clip (20 s)
SOURCES = tuple(dict.fromkeys(c["source"] for c in CLIPS.values()))
# The short clips are checked at one GPU and at four, never timed; the long ones are checked and timed at 1, 2, 4.
SHORT_CLIPS, LONG_CLIPS = ("f1", "f5", "f17"), ("f121", "f241", "f481")


@dataclasses.dataclass(frozen=True)
class Workload:
    """A clip decoded at a world size: `<clip>x<world>`."""
    name: str
    clip: str
    world: int
    timed: bool

    @property
    def latent_frames(self):
        return CLIPS[self.clip]["latent_frames"]


WORKLOADS = {
    **{f"{c}x{n}": Workload(f"{c}x{n}", c, n, False) for c in SHORT_CLIPS for n in (1, 4)},
    **{f"{c}x{n}": Workload(f"{c}x{n}", c, n, True) for c in LONG_CLIPS for n in (1, 2, 4)},
}
TIMED_WORKLOADS = tuple(w for w, e in WORKLOADS.items() if e.timed)


@dataclasses.dataclass(frozen=True)
class Geometry:
    """One size of the architecture: everything else (channel widths, weights, shapes, FLOPs) derives from it."""
    name: str
    latent_channels: int   # z_dim
    latent_hw: tuple       # latent rows, columns
    base_dim: int          # decoder_base_dim: widths are base_dim x (4, 4, 4, 2, 1)

    @property
    def dims(self):
        """Channels at conv_in/mid block, then after up blocks 0, 1, 2, 3."""
        b = self.base_dim
        return (4 * b, 4 * b, 4 * b, 2 * b, b)

    @property
    def up_blocks(self):
        """Per up block: (in channels, out channels, temporal upsampling, spatial upsampling)."""
        d = self.dims
        return tuple((d[i], d[i + 1], i < 2, i < 3) for i in range(4))

    @property
    def video_hw(self):
        return (self.latent_hw[0] * 8 * PATCH, self.latent_hw[1] * 8 * PATCH)


FULL = Geometry("full", 48, (44, 78), 256)
TINY = Geometry("tiny", 8, (4, 6), 8)
GEOMETRIES = {"full": FULL, "tiny": TINY}

LATENT_CHANNELS = FULL.latent_channels
LATENT_HW = FULL.latent_hw
VIDEO_HW = FULL.video_hw
UP_BLOCKS = FULL.up_blocks


def workloads_named(text: str | None) -> list[str]:
    """The workloads a comma list names, in its order (every workload for None or ''). ValueError names any that is
    unknown or named twice (a workload run twice would draw its fresh latents twice)."""
    if not text:
        return list(WORKLOADS)
    names = [w.strip() for w in text.split(",")]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workloads {unknown}; the workloads are {', '.join(WORKLOADS)}")
    twice = sorted({w for w in names if names.count(w) > 1})
    if twice:
        raise ValueError(f"--workloads names {', '.join(twice)} more than once")
    return names


def weight_list(geometry: Geometry = FULL) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of run()'s weights in diffusers' registration order: the one source of the weights' order."""
    out = []

    def conv(name, shape):
        out.extend([(f"{name}.weight", tuple(shape)), (f"{name}.bias", (shape[0],))])

    def resnet(name, cin, cout):
        out.append((f"{name}.norm1.gamma", (cin, 1, 1, 1)))
        conv(f"{name}.conv1", (cout, cin, 3, 3, 3))
        out.append((f"{name}.norm2.gamma", (cout, 1, 1, 1)))
        conv(f"{name}.conv2", (cout, cout, 3, 3, 3))
        if cin != cout:
            conv(f"{name}.conv_shortcut", (cout, cin, 1, 1, 1))

    z, d = geometry.latent_channels, geometry.dims
    conv("post_quant_conv", (z, z, 1, 1, 1))
    conv("decoder.conv_in", (d[0], z, 3, 3, 3))
    # Registration order: the mid block's attention comes before its resnets (it runs between them).
    out.append(("decoder.mid_block.attentions.0.norm.gamma", (d[0], 1, 1)))
    conv("decoder.mid_block.attentions.0.to_qkv", (3 * d[0], d[0], 1, 1))
    conv("decoder.mid_block.attentions.0.proj", (d[0], d[0], 1, 1))
    for j in range(2):
        resnet(f"decoder.mid_block.resnets.{j}", d[0], d[0])
    for i, (cin, cout, temporal, spatial) in enumerate(geometry.up_blocks):
        for j in range(RESNETS_PER_UP_BLOCK):
            resnet(f"decoder.up_blocks.{i}.resnets.{j}", cin if j == 0 else cout, cout)
        # Registration order: resample.1 before time_conv (time_conv runs first).
        if spatial:
            conv(f"decoder.up_blocks.{i}.upsampler.resample.1", (cout, cout, 3, 3))
        if temporal:
            conv(f"decoder.up_blocks.{i}.upsampler.time_conv", (2 * cout, cout, 3, 1, 1))
    out.append(("decoder.norm_out.gamma", (d[4], 1, 1, 1)))
    conv("decoder.conv_out", (OUT_CHANNELS, d[4], 3, 3, 3))
    return tuple(out)


WEIGHTS = weight_list(FULL)
WEIGHT_NAMES = [name for name, _ in WEIGHTS]


def geometry_of(weights: list[torch.Tensor]) -> Geometry:
    """The geometry whose weight list matches these tensors' shapes (latent size taken as FULL's)."""
    if len(weights) != len(WEIGHTS):
        raise ValueError(f"expected {len(WEIGHTS)} weight tensors, got {len(weights)}")
    z, base = weights[0].shape[0], weights[-2].shape[1]
    for g in GEOMETRIES.values():
        if (g.latent_channels, g.base_dim) == (z, base):
            return g
    return Geometry("custom", int(z), FULL.latent_hw, int(base))


def data_dir(geometry: Geometry = FULL) -> str:
    """The task's data: $DATA, else /data; the tiny geometry's in its `tiny` folder."""
    root = os.environ.get("DATA") or "/data"
    return root if geometry.name == "full" else os.path.join(root, geometry.name)


def frames(latent_frames: int) -> int:
    """The video frames of T latent frames: one for the first, four for every later one."""
    return 4 * latent_frames - 3


def bands(world: int, rows: int) -> list[tuple[int, int]]:
    """[(first, end)] of each rank's rows when `rows` rows are split over `world` ranks in equal bands, rank r's from
    r * rows / world: solutions/baseline's split of the latent rows (every level's bands are these, scaled). The
    judge's error maps name the seams between them (video_seams)."""
    if rows % world:
        raise ValueError(f"{rows} rows do not split into {world} equal bands")
    n = rows // world
    return [(r * n, (r + 1) * n) for r in range(world)]


def video_seams(world, geometry=FULL):
    """The video rows where the bands of ranks 1 .. world - 1 begin: bands() of the latent rows, in video rows."""
    scale = geometry.video_hw[0] // geometry.latent_hw[0]
    return [first * scale for first, _ in bands(world, geometry.latent_hw[0])[1:]]


def output_shape(workload: str, geometry: Geometry = FULL) -> tuple[int, ...]:
    """The shape of rank 0's out at a workload."""
    return (1, 3, frames(WORKLOADS[workload].latent_frames), *geometry.video_hw)


def _load(path):
    import torch
    if not os.path.exists(path):
        raise ValueError(f"{path} does not exist: make the data with `python -m data.make` (DATA={data_dir()})")
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # torch raises several types for a bad file
        raise ValueError(f"cannot read {path}: {e}") from e


def load_latents(source: str, geometry: Geometry = FULL, latent_frames: int = SOURCE_FRAMES) -> torch.Tensor:
    """fp32 latents [1, C, >= latent_frames, h, w] of a source clip, checked against the geometry."""
    import torch
    path = os.path.join(data_dir(geometry), f"latents_{source}.pt")
    obj = _load(path)
    latents = obj.get("latents") if isinstance(obj, dict) else None
    c, (h, w) = geometry.latent_channels, geometry.latent_hw
    if not isinstance(latents, torch.Tensor) or latents.dtype != torch.float32 or latents.dim() != 5 \
            or tuple(latents.shape[:2]) != (1, c) or tuple(latents.shape[3:]) != (h, w) \
            or latents.shape[2] < latent_frames:
        got = f"{latents.dtype} {list(latents.shape)}" if isinstance(latents, torch.Tensor) else type(latents).__name__
        raise ValueError(f"{path}: latents are {got}, expected fp32 [1, {c}, >= {latent_frames}, {h}, {w}]")
    return latents


def make_inputs(workload: str, device: str | torch.device, geometry: Geometry = FULL) -> tuple:
    """[z]: the clip's latents, the first T latent frames of its source, rounded to bf16, contiguous on `device`."""
    import torch
    clip = CLIPS[WORKLOADS[workload].clip]
    latents = load_latents(clip["source"], geometry, clip["latent_frames"])
    return [latents[:, :, :clip["latent_frames"]].to(device=device, dtype=torch.bfloat16).contiguous()]


def check_weights(weights, geometry=FULL, where="weights", dtype=None):
    """Raise ValueError unless `weights` is the geometry's weight list (order and shapes; dtype if given)."""
    import torch
    expected = weight_list(geometry)
    if not isinstance(weights, (list, tuple)) or len(weights) != len(expected):
        n = len(weights) if isinstance(weights, (list, tuple)) else type(weights).__name__
        raise ValueError(f"{where}: expected a list of {len(expected)} tensors, got {n}")
    for i, (t, (name, shape)) in enumerate(zip(weights, expected)):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or (dtype is not None and t.dtype != dtype):
            got = f"{t.dtype} {list(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            want = f"{dtype} " if dtype is not None else ""
            raise ValueError(f"{where}: tensor {i} is {got}, expected {name}, {want}{list(shape)}")


def stand_in(t: torch.Tensor) -> torch.Tensor:
    """A tensor of t's shape, dtype and device that stores one element (strides 0): what prepare() may return in
    place of a weight that run() reads only in another form. It holds no weight, so the precision census passes it."""
    return t.new_zeros(()).expand(t.shape)


def is_stand_in(t: torch.Tensor) -> bool:
    return t.numel() > 1 and not any(s for s, n in zip(t.stride(), t.shape) if n > 1)


def load_weights(device: str | torch.device, geometry: Geometry = FULL) -> list[torch.Tensor]:
    """run()'s weights on `device`: decoder_weights_bf16.pt, checked against the weight list (and weight_names.json
    where it is), so that a solution indexes what this file documents."""
    import torch
    listed = os.path.join(data_dir(geometry), NAMES_FILE)
    if os.path.exists(listed):
        try:
            with open(listed) as f:
                names = [(e["name"], tuple(e["shape"])) for e in json.load(f)]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"cannot read {listed}: {e}") from e
        if names != list(weight_list(geometry)):
            raise ValueError(f"{listed} does not list spec.weight_list({geometry.name}): the order or shapes differ")
    path = os.path.join(data_dir(geometry), WEIGHTS_FILE)
    weights = _load(path)
    check_weights(weights, geometry, where=path, dtype=torch.bfloat16)
    return [t.to(device).contiguous() for t in weights]


def load_reference(clip: str, geometry: Geometry = FULL) -> torch.Tensor:
    """The clip's fp32 decode, as stored: a CPU fp16 tensor [1, 3, 4T-3, H, W] (memory-mapped)."""
    import torch
    path = os.path.join(data_dir(geometry), f"ref_{clip}.pt")
    ref = _load(path)
    t, source = CLIPS[clip]["latent_frames"], CLIPS[clip]["source"]
    video = ref.get("video") if isinstance(ref, dict) else None
    shape = (1, 3, frames(t), *geometry.video_hw)
    if not isinstance(video, torch.Tensor) or tuple(video.shape) != shape or video.dtype != torch.float16:
        got = f"{video.dtype} {list(video.shape)}" if isinstance(video, torch.Tensor) else type(video).__name__
        raise ValueError(f"{path}: video is {got}, expected fp16 {list(shape)}")
    if ref.get("source") != source or ref.get("latent_frames") != t:
        raise ValueError(f"{path} decodes {ref.get('source')}'s first {ref.get('latent_frames')} latent frames, "
                         f"not {source}'s first {t} ({clip})")
    return video


CALIBRATION_FIELDS = ("source", "latent_frames", "bf16_max_abs", "bf16_mean_abs", "bf16_rms", "bf16_psnr_db",
                      "fp32_decode_s", "bf16_decode_s")


def calibration(clip: str, geometry: Geometry = FULL) -> dict:
    """The release's bf16 decode of the clip against its fp32 decode (calibration.json's entry)."""
    path = os.path.join(data_dir(geometry), CALIBRATION_FILE)
    try:
        with open(path) as f:
            entry = json.load(f)[clip]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} has no entry for {clip}: {e!r}") from e
    missing = [k for k in CALIBRATION_FIELDS if k not in entry]
    if missing:
        raise ValueError(f"{path}: the entry for {clip} lacks {', '.join(missing)}")
    if entry["source"] != CLIPS[clip]["source"] or entry["latent_frames"] != CLIPS[clip]["latent_frames"]:
        raise ValueError(f"{path}: {clip} is calibrated on another clip ({entry['source']}, "
                         f"{entry['latent_frames']} latent frames), expected {CLIPS[clip]['source']}, "
                         f"{CLIPS[clip]['latent_frames']}")
    return entry


def allowance(clip: str, geometry: Geometry = FULL) -> dict[str, float]:
    """{"max_abs", "rms"}: how far a solution's video may be from the fp32 decode of the clip (see Correctness)."""
    entry = calibration(clip, geometry)
    return allowance_from(entry["bf16_max_abs"], entry["bf16_rms"])


def allowance_from(bf16_max_abs: float, bf16_rms: float) -> dict[str, float]:
    """The allowance given the release bf16 decode's max-abs and rms error against the fp32 decode."""
    return {"max_abs": min(MAX_ABS_CAP, ERROR_FACTOR * bf16_max_abs), "rms": ERROR_FACTOR * bf16_rms}


def conv_level(name, t):
    """(output frames, spatial scale over the latent grid) of the conv whose weight is `name`, for t latent frames.

    Frames per level: t at the latent size (post_quant_conv, conv_in, mid block, up block 0's resnets); t - 1 for
    up block 0's time conv (it skips the first latent frame); 2t - 1 at 2x (up block 0's resample, up block 1's
    resnets); 2t - 2 for up block 1's time conv; 4t - 3 at 4x (up block 1's resample, up block 2's resnets) and at
    8x (up block 2's resample, up block 3, conv_out)."""
    if name.startswith(("post_quant_conv.", "decoder.conv_in.", "decoder.mid_block.", "decoder.up_blocks.0.resnets.")):
        return t, 1
    if name.startswith("decoder.up_blocks.0.upsampler.time_conv."):
        return t - 1, 1
    if name.startswith(("decoder.up_blocks.0.upsampler.resample.", "decoder.up_blocks.1.resnets.")):
        return 2 * t - 1, 2
    if name.startswith("decoder.up_blocks.1.upsampler.time_conv."):
        return 2 * t - 2, 2
    if name.startswith(("decoder.up_blocks.1.upsampler.resample.", "decoder.up_blocks.2.resnets.")):
        return 4 * t - 3, 4
    return 4 * t - 3, 8


def flops_by_weight(t, geometry=FULL):
    """{conv weight name: FLOPs} plus {"attention": FLOPs}: every conv at its full kernel over its output positions
    (2 x weight elements x frames x rows x columns, padding included) and the attention's two products per frame."""
    h, w = geometry.latent_hw
    out = {}
    for name, shape in weight_list(geometry):
        if name.endswith(".weight") and len(shape) >= 4:
            count, scale = conv_level(name, t)
            out[name] = 2 * math.prod(shape) * count * (h * scale) * (w * scale)
    out["attention"] = 2 * 2 * (h * w) ** 2 * geometry.dims[0] * t
    return out


def decode_flops(t: int, geometry: Geometry = FULL) -> int:
    """FLOPs of one decode of t latent frames."""
    return sum(flops_by_weight(t, geometry).values())


def floor_flops(t: int, geometry: Geometry = FULL) -> int:
    """The FLOPs below which no exact decode of t latent frames goes: each conv at one multiply-add per input
    channel, output channel and output position (its count over the kernel's taps: the limit of Winograd-type
    algorithms as their tiles grow; 1/27 of a 3x3x3 conv), the attention's products in full."""
    shapes = dict(weight_list(geometry))
    return sum(f if name == "attention" else f / math.prod(shapes[name][2:])
               for name, f in flops_by_weight(t, geometry).items())


def work_of(latent_frames, world, geometry=FULL):
    """{"flops", "bytes", "gpus"} of decoding any latents of `latent_frames` frames on `world` GPUs: the decode's
    FLOPs (spread over the GPUs), and the bytes that must move: the video written (bf16) and the weights read (bf16)."""
    video = 3 * frames(latent_frames) * math.prod(geometry.video_hw) * 2
    weights = sum(math.prod(shape) for _, shape in weight_list(geometry)) * 2
    return {"flops": decode_flops(latent_frames, geometry), "bytes": video + weights, "gpus": world}


def work(workload, geometry=FULL):
    """work_of() one call of the workload."""
    entry = WORKLOADS[workload]
    return work_of(entry.latent_frames, entry.world, geometry)


# The task's rules beside audit.py's own: run() reads nothing but its arguments.
RULES = {
    "file-io": {
        "include": r"(fstream|fcntl\.h|sys/mman\.h|filesystem|experimental/filesystem)",
        "text": r"\b(fopen|fopen64|freopen|fdopen|fread|fwrite|ifstream|ofstream|fstream|filebuf|mmap|mmap64|shm_open|"
                r"torch::load|torch::save|torch::pickle_load|torch::pickle_save|torch::jit::load)\b|"
                r"::\s*(open|openat|read|pread|write|pwrite)\s*\(",
        "why": "run() and prepare() read nothing but their arguments and write nothing but out: no files (the "
               "reference videos lie on the job's disk) and nothing that outlives a call"},
}

if __name__ == "__main__":
    for w in WORKLOADS:
        b = work(w)
        print(f"{w:<8} {b['flops'] / 1e15:8.4f} PFLOP over {b['gpus']} GPU(s), {b['bytes'] / 1e9:6.2f} GB")
