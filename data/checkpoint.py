"""Real data: the Wan2.2 VAE decoder's weights from a checkpoint, and latents from a folder, checked on the way in.

Two checkpoint layouts. diffusers': a safetensors file, or a folder holding diffusion_pytorch_model.safetensors or
vae/diffusion_pytorch_model.safetensors, whose keys are spec.weight_list's names. The original Wan2.2_VAE.pth: a
torch state dict (possibly wrapped in {"state_dict": ...}) whose keys original_key() gives, the renaming that
diffusers' scripts/convert_wan_to_diffusers.py (convert_vae_22) applies. Only post_quant_conv and the decoder are
read; the encoder and quant_conv (`conv1.*` in the original) are ignored.
"""
import os
import re

import torch

import spec

DIFFUSERS_FILES = ("diffusion_pytorch_model.safetensors", os.path.join("vae", "diffusion_pytorch_model.safetensors"))

# A residual block's parts: diffusers' name -> the original's.
_RESIDUAL = (("norm1.gamma", "residual.0.gamma"), ("conv1.", "residual.2."), ("norm2.gamma", "residual.3.gamma"),
             ("conv2.", "residual.6."), ("conv_shortcut.", "shortcut."))


def original_key(name):
    """The original Wan2.2 key of one of spec.weight_list's names."""
    def residual(prefix, part):
        for new, old in _RESIDUAL:
            if part.startswith(new):
                return prefix + old + part[len(new):]
        raise KeyError(name)

    if name.startswith("post_quant_conv."):
        return "conv2." + name[len("post_quant_conv."):]
    if name.startswith("decoder.conv_in."):
        return "decoder.conv1." + name[len("decoder.conv_in."):]
    if m := re.fullmatch(r"decoder\.mid_block\.resnets\.(\d+)\.(.+)", name):
        return residual(f"decoder.middle.{2 * int(m[1])}.", m[2])            # resnets 0, 1 -> middle 0, 2
    if m := re.fullmatch(r"decoder\.mid_block\.attentions\.0\.(.+)", name):
        return f"decoder.middle.1.{m[1]}"
    if m := re.fullmatch(r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", name):
        return residual(f"decoder.upsamples.{m[1]}.upsamples.{m[2]}.", m[3])
    if m := re.fullmatch(r"decoder\.up_blocks\.(\d+)\.upsampler\.(.+)", name):
        return f"decoder.upsamples.{m[1]}.upsamples.{spec.RESNETS_PER_UP_BLOCK}.{m[2]}"
    if name == "decoder.norm_out.gamma":
        return "decoder.head.0.gamma"
    if name.startswith("decoder.conv_out."):
        return "decoder.head.2." + name[len("decoder.conv_out."):]
    raise KeyError(name)


def find(path):
    """The checkpoint file that `path` names: the file itself, or the safetensors file of a diffusers folder."""
    if os.path.isdir(path):
        for rel in DIFFUSERS_FILES:
            if os.path.isfile(os.path.join(path, rel)):
                return os.path.join(path, rel)
        raise ValueError(f"{path}: a folder without {' or '.join(DIFFUSERS_FILES)}")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such checkpoint")
    return path


def _unreadable(path, kind, expected):
    """The one-line error for a file that its reader refused (the reader's own text left out)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(4)
    if size == 0:
        what = "an empty file"
    elif kind == "torch":
        what = "a truncated or damaged zip archive" if head.startswith(b"PK") else "not a zip archive"
    else:
        what = "a truncated or damaged file"
    return ValueError(f"{path}: unreadable as a {kind} file ({what}, {size} bytes); expected {expected}")


def _torch_load(path, expected):
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # mmap needs the zip format: try again without
        pass
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        raise _unreadable(path, "torch", expected) from None


def load(path, geometry=spec.FULL):
    """fp32 tensors of spec.weight_list(geometry), in order, from a checkpoint (a file or a diffusers folder)."""
    path = find(path)
    if path.endswith(".safetensors"):
        from safetensors import safe_open
        try:
            with safe_open(path, framework="pt") as f:
                state = {k: f.get_tensor(k) for k in f.keys() if k.startswith(("post_quant_conv.", "decoder."))}
        except Exception:
            raise _unreadable(path, "safetensors", "diffusers' AutoencoderKLWan weights") from None
        key = str
    else:
        state = _torch_load(path, "the original Wan2.2 VAE's state dict (Wan2.2_VAE.pth)")
        if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
            state = state["state_dict"]
        if not isinstance(state, dict):
            raise ValueError(f"{path}: not a state dict (a {type(state).__name__})")
        key = original_key
    out = []
    for name, shape in spec.weight_list(geometry):
        k = key(name)
        where = k if k == name else f"{k} ({name})"
        t = state.get(k)
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{path}: {where} is missing, expected a tensor of shape {list(shape)}")
        if tuple(t.shape) != shape or not t.is_floating_point():
            raise ValueError(f"{path}: {where} is {t.dtype} {list(t.shape)}, expected shape {list(shape)}")
        out.append(t.to(dtype=torch.float32, copy=True).contiguous())
    return out


def check_latents(path, geometry=spec.FULL):
    """Raise ValueError naming `path` unless it holds {"latents": fp32 [1, C, >= SOURCE_FRAMES, h, w]}."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such latents file")
    c, (h, w) = geometry.latent_channels, geometry.latent_hw
    obj = _torch_load(path, f"{{'latents': fp32 [1, {c}, >= {spec.SOURCE_FRAMES}, {h}, {w}]}} written by torch.save")
    z = obj.get("latents") if isinstance(obj, dict) else None
    if not isinstance(z, torch.Tensor) or z.dtype != torch.float32 or z.dim() != 5 or tuple(z.shape[:2]) != (1, c) \
            or tuple(z.shape[3:]) != (h, w) or z.shape[2] < spec.SOURCE_FRAMES:
        got = f"{z.dtype} {list(z.shape)}" if isinstance(z, torch.Tensor) else type(z).__name__
        raise ValueError(f"{path}: latents are {got}, expected {{'latents': fp32 [1, {c}, >= {spec.SOURCE_FRAMES}, "
                         f"{h}, {w}]}}")
