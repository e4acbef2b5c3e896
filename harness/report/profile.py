"""Where a call's time goes: the per-scope table and communication overlap of a Chrome trace that torch.profiler
wrote (`bench.py --profile`), and `bench.py --scopes TRACE ...` to print it again for saved traces."""
import bisect
import gzip
import json
import os
import sys

from harness.report import console

SCOPE_ROOTS = ("decoder", "post_quant_conv", "unpatchify", "halo_exchange", "gather")
# Distinct scopes a trace may name (with their ancestors): the decode has a few hundred; the table's totals cost the
# square of the count (in the bounded child) and its console rows are drawn in the judge.
MAX_SCOPES = 2000


GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def gpu_work(events):
    """A trace's kernels, copies and memsets (complete events)."""
    return [e for e in events if e.get("cat") in GPU_WORK and e.get("ph") == "X"]


def read_trace(path):
    """The events of a Chrome trace that torch.profiler exported (plain or gzipped JSON)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


# A trace is the solution's file: the judge reads it in a child held to this much memory, CPU time and output, so that
# a trace made costly (empty events cost Python's json about 24 bytes a byte; a scope's path gets a row per ancestor;
# scopes times kernels) fails its solution, not the judge.
PARSE_CAP, CPU_CAP, OUTPUT_CAP = 16 << 30, 300, 64 << 20


class Unreadable(RuntimeError):
    """A trace that the bounded child could not summarise (not a trace, too costly, or it crashed)."""


def summarise(path, gpu, cap=PARSE_CAP, cpu_s=CPU_CAP, output=OUTPUT_CAP):
    """(scope table, communication or None) of the trace at path, computed in a child process limited to `cap` bytes
    of address space, `cpu_s` seconds of CPU and `output` bytes of summary; Unreadable where the child fails."""
    import resource
    import subprocess
    import tempfile

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import json, signal, sys\nsignal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
            "from harness.report import profile\n"
            "e = profile.read_trace(sys.argv[1])\n"
            "json.dump([profile.scope_table(e), profile.overlap(e) if sys.argv[2] == '1' else None], sys.stdout, "
            "allow_nan=False)")   # a duration of 1e999 in the trace: no figure the JSON cannot hold
    with tempfile.TemporaryFile() as out:
        try:
            p = subprocess.run([sys.executable, "-c", code, path, "1" if gpu else "0"], stdout=out,
                               stderr=subprocess.PIPE, cwd=root, env={**os.environ, "PYTHONPATH": root},
                               preexec_fn=limit, timeout=2 * cpu_s)
        except subprocess.TimeoutExpired:
            raise Unreadable(f"not summarised within {2 * cpu_s} s") from None
        if p.returncode != 0:
            last = (p.stderr.decode(errors="replace").strip().splitlines() or [f"exit {p.returncode}"])[-1]
            raise Unreadable(f"{last[:200]} (parsed in a child held to {cap >> 30} GiB, {cpu_s} s of CPU and "
                             f"{output >> 20} MiB of summary)")
        out.seek(0)
        scopes, communication = json.loads(out.read())
    return scopes, communication


def scope_table(events):
    """[{"scope", "total_s", "self_s"}] of the named scopes in a trace's events, in the order the decode runs them.

    Where the trace has GPU work, a scope's self time is the summed duration of the kernels, copies and memsets
    inside its GPU ranges (`gpu_user_annotation` events on the same device; the profiler gives each piece of GPU
    work to the innermost scope only), and its total adds the self times of the scopes below it in the path
    hierarchy (a scope with no work of its own still gets a row). Without GPU work the total is the CPU time of its
    ranges (`user_annotation`) and self time is the total less that of the scopes directly inside it."""
    work = sorted(gpu_work(events), key=lambda e: e["ts"])
    gpu = bool(work)
    by_pid = {}
    for e in work:
        by_pid.setdefault(e.get("pid"), []).append(e)
    starts = {pid: [e["ts"] for e in es] for pid, es in by_pid.items()}
    cat = "gpu_user_annotation" if gpu else "user_annotation"
    rows, first = {}, {}
    for a in events:
        if a.get("cat") != cat or a.get("ph") != "X" or not str(a.get("name", "")).startswith(SCOPE_ROOTS):
            continue
        name, t0, t1 = console.plain(a["name"]), a["ts"], a["ts"] + a["dur"]
        if gpu:
            es, ss = by_pid.get(a.get("pid"), []), starts.get(a.get("pid"), [])
            total, i = 0.0, bisect.bisect_left(ss, t0)
            while i < len(es) and es[i]["ts"] < t1:
                if es[i]["ts"] + es[i]["dur"] <= t1:
                    total += es[i]["dur"]
                i += 1
        else:
            total = a["dur"]
        rows[name] = rows.get(name, 0.0) + total / 1e6
        first[name] = min(first.get(name, t0), t0)
    table = []
    if gpu:
        for name in list(rows):            # the path's ancestors, with no work of their own
            parts = name.split("/")
            for k in range(1, len(parts)):
                up = "/".join(parts[:k])
                rows.setdefault(up, 0.0)
                first[up] = min(first.get(up, first[name]), first[name])
    if len(rows) > MAX_SCOPES:
        raise ValueError(f"{len(rows)} scopes (with their ancestors), more than {MAX_SCOPES}")
    if gpu:
        for name, own in rows.items():
            total = sum(v for n, v in rows.items() if n == name or n.startswith(name + "/"))
            table.append({"scope": name, "total_s": total, "self_s": own})
    else:
        for name, total in rows.items():
            children = [n for n in rows if n.startswith(name + "/") and "/" not in n[len(name) + 1:]]
            table.append({"scope": name, "total_s": total,
                          "self_s": max(0.0, total - sum(rows[c] for c in children))})
    return sorted(table, key=lambda r: (first[r["scope"]], r["scope"].count("/")))


def trace_span(events):
    """Seconds from the first to the last GPU work of a trace (without GPU work: of its named scopes)."""
    work = gpu_work(events)
    if not work:
        work = [e for e in events if e.get("cat") == "user_annotation" and e.get("ph") == "X"
                and str(e.get("name", "")).startswith(SCOPE_ROOTS)]
    if not work:
        return 0.0
    return (max(e["ts"] + e["dur"] for e in work) - min(e["ts"] for e in work)) / 1e6


def scopes_main(paths):
    """`bench.py --scopes TRACE [TRACE ...]`: the per-scope table of traces that --profile wrote (the ranks of one
    call, rank 0 first), without running anything."""
    if not paths:
        print("usage: bench.py --scopes TRACE [TRACE ...]", file=sys.stderr)
        return 2
    ranks = []
    for i, path in enumerate(paths):
        try:
            events = read_trace(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"cannot read trace {path}: {e}", file=sys.stderr)
            return 2
        gpu = bool(gpu_work(events))
        ranks.append({"rank": i, "trace": path, "call_s": trace_span(events) or 1.0, "scopes": scope_table(events),
                      "communication": overlap(events) if gpu else None})
    prof = {"time_s": ranks[0]["call_s"], "ranks": ranks}
    console.console().print(profile_report("trace", "", prof))
    return 0


def overlap(events):
    """{"communication_s", "hidden_s", "exposed_s"} of a trace: GPU time covered by NCCL kernels, the part of it
    covered by other GPU work at the same time, and the part with nothing beside it."""
    comm, comp = [], []
    for e in gpu_work(events):
        (comm if "nccl" in str(e.get("name", "")).lower() else comp).append((e["ts"], e["ts"] + e["dur"]))

    def union(iv):
        out = []
        for a, b in sorted(iv):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return out
    comm, comp = union(comm), union(comp)
    total = sum(b - a for a, b in comm)
    hidden, j = 0.0, 0
    for a, b in comm:                      # both lists sorted and disjoint: one sweep
        while j < len(comp) and comp[j][1] <= a:
            j += 1
        k = j
        while k < len(comp) and comp[k][0] < b:
            hidden += min(b, comp[k][1]) - max(a, comp[k][0])
            k += 1
    return {"communication_s": total / 1e6, "hidden_s": hidden / 1e6, "exposed_s": (total - hidden) / 1e6}


def profile_report(name, workload, prof):
    """The per-scope table of a profiled call (rank 0's, with every rank's call share), as rich Table."""
    from rich.table import Table
    ranks = prof["ranks"]
    t = Table(title=f"{name} {workload}: time per scope (one profiled call of {prof['time_s']:.4f} s; traces: "
                    f"{', '.join(os.path.basename(r['trace']) for r in ranks)})")
    for col in ["scope"] + [f"rank {r['rank']} total s" for r in ranks] + ["rank 0 self s", "share of call"]:
        t.add_column(col, justify="left" if col == "scope" else "right")
    by_rank = [{row["scope"]: row for row in r["scopes"]} for r in ranks]
    names = {row["scope"] for row in ranks[0]["scopes"]}
    for row in ranks[0]["scopes"]:
        depth = row["scope"].count("/")
        parent = row["scope"].rsplit("/", 1)[0]
        t.add_row("  " * depth + row["scope"].split("/")[-1] if depth and parent in names else row["scope"],
                  *[f"{br.get(row['scope'], {}).get('total_s', 0):.4f}" for br in by_rank],
                  f"{row['self_s']:.4f}", f"{100 * row['total_s'] / ranks[0]['call_s']:.1f}%")
    for r in ranks:
        c = r.get("communication")
        if c:
            t.caption = (t.caption or "") + (f"rank {r['rank']}: communication {c['communication_s']:.4f} s, "
                                             f"{c['hidden_s']:.4f} s beside compute, {c['exposed_s']:.4f} s alone. ")
    return t


def bar_chart(prof, path, title, most=20):
    """A PNG of a profiled call's scopes with the most self time (rank 0's, every rank's bar beside it), as shares of
    the call: where its time goes, for the report."""
    from harness.report import plot
    plt = plot.pyplot("the per-scope chart")
    ranks = prof["ranks"]
    rows = sorted(ranks[0]["scopes"], key=lambda r: -r["self_s"])[:most][::-1]
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(rows) + 1.6), layout="constrained")
    height = 0.8 / len(ranks)
    for i, r in enumerate(ranks):
        own = {row["scope"]: row["self_s"] for row in r["scopes"]}
        ax.barh([k + i * height for k in range(len(rows))], [100 * own.get(row["scope"], 0) / r["call_s"]
                                                              for row in rows], height, label=f"rank {r['rank']}")
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(rows))], [row["scope"] for row in rows], fontsize=7)
    ax.set_xlabel("self time, % of the profiled call")
    ax.set_title(title, fontsize=9)
    if len(ranks) > 1:
        ax.legend(fontsize=7)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
