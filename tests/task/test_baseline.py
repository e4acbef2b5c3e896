"""solutions/baseline: the same decode as the reference, computed another way (channels-last conv buffers, phase
resamples, fused kernels; bands of rows on several ranks). On the CPU its kernels run as their PyTorch twins."""
import os

import pytest
import torch

import reference
import spec
from helpers import ROOT, baseline, random_weights


@pytest.mark.parametrize("chunk", [1, 3])
def test_decode_equals_the_reference_in_fp32(monkeypatch, chunk):
    """Mathematically equal: in fp32 the baseline differs from the reference by rounding only, with one latent
    frame per pass (the default) and with several (a full chunk, a partial last one)."""
    m = baseline()
    monkeypatch.setattr(m, "CHUNK", chunk)
    w = random_weights()
    for t in (1, 2, 5, 6):   # T = 1; T = 2; with chunk 3: one full chunk plus one frame; a partial last chunk
        z = torch.randn(1, 8, t, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(t))
        out = torch.full((1, 3, spec.frames(t), *spec.TINY.video_hw), float("nan"))
        m.run(z, w, 0, 1, None, out)
        ref = reference.decode(z, w)
        assert torch.isfinite(out).all()
        assert (out - ref).abs().max().item() < 1e-4, t


def test_phase_weights_equal_upsample_then_conv():
    """The four 2x2 phase convs (prepare's weights) against F.interpolate + the 3x3 conv, in fp64."""
    import torch.nn.functional as F
    m = baseline()
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 6, 5, 7, generator=g, dtype=torch.float64)
    w = torch.randn(4, 6, 3, 3, generator=g, dtype=torch.float64)
    want = F.conv2d(F.interpolate(x, scale_factor=2.0, mode="nearest"), w, padding=1)
    p = F.conv2d(x, m.phase_weights(w), padding=1)                     # (2, 16, 6, 8)
    got = torch.empty_like(want)
    for i in (0, 1):
        for j in (0, 1):
            k = 2 * i + j
            got[:, :, i::2, j::2] = p[:, 4 * k:4 * k + 4, i:i + 5, j:j + 7]
    assert (got - want).abs().max().item() < 1e-12


def _storage_bytes(tensors):
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


@pytest.mark.parametrize("triton", [False, True])
def test_prepare_drops_what_run_does_not_read(monkeypatch, triton):
    """prepare() keeps a stand-in (one element) for each weight that run() reads in another form: the resamples'
    3x3 weights, the time convs', and where Triton runs the Winograd convs'. The list keeps its shapes, and the
    bytes saved are exactly those weights'."""
    m = baseline()
    monkeypatch.setattr(m.kernels, "use_triton", lambda x: triton)
    w = random_weights()
    full, prepared = m.laid_out(w), m.prepare(w, 0, 1, None)
    names = [n for n, _ in spec.weight_list(spec.TINY)]
    dropped = m.superseded(spec.TINY, triton)
    assert any(n.endswith("conv1.weight") for n in dropped) == triton
    assert [tuple(t.shape) for t in prepared] == [tuple(t.shape) for t in full]
    assert [n for n, t in zip(names, prepared) if spec.is_stand_in(t)] == [n for n in names if n in dropped]
    saved = sum(full[names.index(n)].numel() * full[names.index(n)].element_size() for n in dropped)
    assert _storage_bytes(full) - _storage_bytes(prepared) == saved - len(dropped) * 4   # fp32 stand-ins: 4 bytes


def test_a_conv_without_its_direct_weights_says_so(monkeypatch):
    """Weights prepared for the Winograd path, decoded where Triton cannot run: one clear error, not a video of
    zeros."""
    m = baseline()
    monkeypatch.setattr(m.kernels, "use_triton", lambda x: True)
    w = m.prepare(random_weights(), 0, 1, None)
    monkeypatch.setattr(m.kernels, "use_triton", lambda x: False)
    z = torch.randn(1, 8, 1, *spec.TINY.latent_hw)
    out = torch.empty(1, 3, 1, *spec.TINY.video_hw)
    with pytest.raises(RuntimeError, match="decoder.conv_in: prepare.. kept only the Winograd form"):
        m.run(z, w, 0, 1, None, out)


def test_old_cudnn_falls_back_with_a_warning(monkeypatch):
    m = baseline()
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    with pytest.warns(UserWarning, match="older than 91500"):
        assert m.cudnn_ok() is False
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91900)
    assert m.cudnn_ok() is True


def test_bf16_within_the_release_decodes_error():
    m = baseline()
    w = random_weights(seed=1)
    z = torch.randn(1, 8, 6, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(9))
    ref = reference.decode_fp32(z, w)
    release = reference.decode_bf16(z, w).float()
    out = torch.empty(1, 3, spec.frames(6), *spec.TINY.video_hw, dtype=torch.bfloat16)
    m.run(z.to(torch.bfloat16), [x.to(torch.bfloat16) for x in w], 0, 1, None, out)
    err, base = (out.float() - ref).abs().max().item(), (release - ref).abs().max().item()
    assert err <= 2 * base, (err, base)


@pytest.mark.slow
def test_baseline_through_the_harness(tiny_data, tmp_path):
    """bench on worlds 1, 4 and 2 (slow tier: the default tier's test_ci passes the baseline through the gate)."""
    import json
    import subprocess
    import sys
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/baseline", "--tiny", "--workloads",
                        "f1x1,f17x4,f121x2", "--warmup", "0", "--min-reps", "2", "--max-reps", "2", "--json", str(out)],
                       cwd=ROOT, env=tiny_data, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads(out.read_text())
    assert all(r["passed"] for r in report["workloads"].values())


def _band_worker(rank, world, port, t, result):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        w = random_weights(seed=2)
        z = torch.randn(1, 8, t, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(3))
        out = torch.full((1, 3, spec.frames(t), *spec.TINY.video_hw), float("nan")) if rank == 0 else torch.empty(0)
        baseline().run(z, w, rank, world, dist.group.WORLD, out)
        if rank == 0:
            d = (out - reference.decode(z, w)).abs()
            seams = [r for s in spec.video_seams(world, spec.TINY) for r in (s - 1, s)]
            result.put((d.max().item(), d[:, :, :, seams].max().item()))
    finally:
        dist.destroy_process_group()



@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_band_split_equals_the_reference_in_fp32(world):
    """Bands of rows with halo exchange (gloo): the same video within rounding, seams included."""
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    procs = [ctx.Process(target=_band_worker, args=(r, world, port, 6, result)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    everywhere, at_seams = result.get(timeout=5)
    assert everywhere < 1e-4 and at_seams < 1e-4, (everywhere, at_seams)
