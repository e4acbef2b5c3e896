"""solutions/baseline: the same decode as the reference with several latent frames per decoder pass."""
import importlib.util
import os

import torch

import reference
import spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def baseline():
    s = importlib.util.spec_from_file_location("baseline_solution", os.path.join(ROOT, "solutions", "baseline",
                                                                                  "solution.py"))
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


def weights(seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for name, shape in spec.weight_list(spec.TINY):
        if name.endswith("gamma"):
            out.append(1 + 0.1 * torch.randn(shape, generator=gen))
        elif name.endswith("bias"):
            out.append(0.02 * torch.randn(shape, generator=gen))
        else:
            out.append(torch.randn(shape, generator=gen) / torch.Size(shape[1:]).numel() ** 0.5)
    return out


def test_chunked_decode_equals_the_reference_in_fp32():
    """Mathematically equal: in fp32 the multi-frame chunks differ from the one-frame decode by rounding only."""
    m = baseline()
    w = weights()
    for t in (1, 2, 6, 7):   # T = 1; one chunk short of CHUNK; a full chunk plus one; a partial last chunk
        z = torch.randn(1, 8, t, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(t))
        out = torch.full((1, 3, spec.frames(t), *spec.TINY.video_hw), float("nan"))
        m.run(z, w, 0, 1, None, out)
        ref = reference.decode(z, w)
        assert torch.isfinite(out).all()
        assert (out - ref).abs().max().item() < 1e-4, t


def test_bf16_within_the_release_decodes_error():
    m = baseline()
    w = weights(1)
    z = torch.randn(1, 8, 6, *spec.TINY.latent_hw, generator=torch.Generator().manual_seed(9))
    ref = reference.decode_fp32(z, w)
    release = reference.decode_bf16(z, w).float()
    out = torch.empty(1, 3, spec.frames(6), *spec.TINY.video_hw, dtype=torch.bfloat16)
    m.run(z.to(torch.bfloat16), [x.to(torch.bfloat16) for x in w], 0, 1, None, out)
    err, base = (out.float() - ref).abs().max().item(), (release - ref).abs().max().item()
    assert err <= 2 * base, (err, base)


def test_baseline_through_the_harness(tiny_data, tmp_path):
    import json
    import subprocess
    import sys
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "bench.py", "solutions/baseline", "--tiny", "--workloads",
                        "f1x1,f17x4,f121x2", "--max-reps", "3", "--json", str(out)], cwd=ROOT, env=tiny_data,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads(out.read_text())
    assert all(r["passed"] for r in report["workloads"].values())
