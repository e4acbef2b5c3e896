"""What a call's result is worth: the statuses, the one figures function, the one judge of figures against an
allowance, and the statistics of timed calls. bench, ci and the data maker all use these."""
from __future__ import annotations

import math

STATUSES = ("passed", "incorrect", "input modified", "tampering", "runtime error", "crash", "timeout", "build error",
            "load error", "invalid timing", "impossible", "skipped", "harness error")
# Which status wins when a call has several problems: the ones the judge cannot be fooled about come first.
SEVERITY = ("tampering", "input modified", "incorrect", "impossible")


def compared(out, ref, device):
    """The one comparison of a video with its reference, frame chunk by frame chunk (a bounded slice of the video
    at a time, in fp32 on `device`): yields (first frame, o, finite, d) with o the chunk, finite its mask and
    d = o - ref where o is finite, 0 elsewhere; d is None for frames past the reference's (a reference of fewer frames
    is compared with the video's first frames)."""
    import torch
    step = max(1, (1 << 27) // max(1, ref[0, 0, 0].numel() * 3))
    for f in range(0, out.shape[2], step):
        o = out[:, :, f:f + step].to(device).float()
        finite = torch.isfinite(o)
        if f >= ref.shape[2]:
            yield f, o, finite, None
            continue
        n = min(o.shape[2], ref.shape[2] - f)
        r = ref[:, :, f:f + n].to(device).float()
        d = torch.where(finite[:, :, :n], o[:, :, :n] - r, torch.zeros_like(r))
        yield f, o, finite, d


def figures(out, ref, device) -> dict[str, float]:
    """{"max_abs", "rms", "psnr_db", "nonfinite", "outside", "frames_compared"} of a video against its reference
    (compared()); non-finite elements are counted and left out of the differences. Frames past the reference's are
    still checked for non-finite and out-of-range elements."""
    import torch
    n, sq, max_abs, nonfinite, outside, bad_ref = 0, 0.0, 0.0, 0, 0, 0
    for _, o, finite, d in compared(out, ref, device):
        nonfinite += int((~finite).sum())
        outside += int((o.abs() > 1).sum())
        if d is not None:
            ok = torch.isfinite(d)          # where the video is finite, a non-finite d is the reference's
            bad_ref += int((~ok).sum())
            d = torch.where(ok, d, torch.zeros_like(d))
            sq += float((d.double() ** 2).sum())
            max_abs = max(max_abs, float(d.abs().max()))
            n += d.numel()
    mse = sq / n
    return {"max_abs": max_abs, "rms": math.sqrt(mse), "psnr_db": 10 * math.log10(4 / mse) if mse > 0 else math.inf,
            "nonfinite": nonfinite, "outside": outside, "frames_compared": min(ref.shape[2], out.shape[2]),
            "reference_nonfinite": bad_ref}


def judge(figs: dict, allow: dict[str, float]) -> tuple[str, str | None]:
    """(status, reason) of a call's figures against an allowance {"max_abs", "rms"}."""
    f, reasons = figs, []
    if f.get("reference_nonfinite"):      # a damaged data set, which every video would "match" (NaN compares false)
        return "harness error", (f"the reference has {f['reference_nonfinite']} non-finite elements: the data set is "
                                 f"damaged (remake it: python -m data.make)")
    if f["nonfinite"]:
        reasons.append(f"{f['nonfinite']} elements not finite (NaN is the poison: unwritten elements)")
    if f["outside"]:
        reasons.append(f"{f['outside']} elements outside [-1, 1]")
    if f["max_abs"] > allow["max_abs"]:
        reasons.append(f"max|d| {f['max_abs']:.4g} > allowance {allow['max_abs']:.4g}")
    if f["rms"] > allow["rms"]:
        reasons.append(f"rms(d) {f['rms']:.4g} > allowance {allow['rms']:.4g}")
    return ("incorrect", "; ".join(reasons)) if reasons else ("passed", None)


def worst(problems: list[tuple[str, str]]) -> tuple[str, str | None]:
    """(status, reason) of a list of (status, reason): the most severe status, every reason."""
    if not problems:
        return "passed", None
    order = {s: i for i, s in enumerate(SEVERITY)}
    status = min((s for s, _ in problems), key=lambda s: order.get(s, len(order)))
    return status, "; ".join(r for _, r in problems)


def stats(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    n = len(s)
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    mean = sum(s) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1)) if n > 1 else 0.0
    return {"n": n, "median_s": median, "mean_s": mean, "min_s": s[0], "max_s": s[-1], "std_s": std,
            "spread": (s[-1] - s[0]) / median if median else 0.0,
            "se_median_s": 1.2533 * std / math.sqrt(n) if n > 1 else math.inf}


def compare_times(a: dict, b: dict) -> tuple[float, str]:
    """Solution a's timing stats against b's: (ratio b/a, 'faster' | 'slower' | 'same within noise')."""
    ratio = b["median_s"] / a["median_s"]
    noise = max(0.01, 2 * math.hypot(a["se_median_s"] / a["median_s"], b["se_median_s"] / b["median_s"]))
    if abs(math.log(ratio)) <= noise:
        return ratio, "same within noise"
    return ratio, "faster" if ratio > 1 else "slower"


def objective(records: dict, timed_workloads) -> tuple[float | None, bool, int]:
    """Geometric mean of the timed workloads' medians; complete only when every timed workload passed."""
    times = [r["median_s"] for w, r in records.items() if w in timed_workloads and r.get("median_s")]
    complete = all(records.get(w, {}).get("median_s") for w in timed_workloads)
    value = math.exp(sum(math.log(t) for t in times) / len(times)) if times else None
    return value, complete, len(times)
