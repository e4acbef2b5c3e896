"""What a run says: one line per workload as it finishes, the table per solution, the objective, the comparisons,
and the environment that the JSON records (commit, changed files, GPUs, data manifest, isolation)."""
import datetime
import hashlib
import os
import platform
import re
import subprocess
import sys

import spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The layout of bench's and ci's JSON (docs/output.md): raised when a field changes meaning or goes away.
SCHEMA_VERSION = 1


def environment(gpus, cpu, ranks, solutions, geometry, isolation):
    """What ran where (bench's and ci's JSON): the date, host, commit and files changed since it, the data manifest's
    hash, the GPUs, each group's ranks (`ranks`: what they said when ready) and each solution's path and content
    hash (`solutions`: [{"name", "path", "hash"}])."""
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(), "geometry": geometry.name,
           "device": "cpu" if cpu else "cuda", "visible_gpus": gpus, "isolation": isolation}
    try:
        env["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                       timeout=10).stdout.strip() or None
        # Tracked files that differ from that commit: the commit alone does not name what ran (the solutions'
        # content hashes do).
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True, timeout=10).stdout
        env["changed_since_commit"] = [line[3:] for line in status.splitlines()] if env["commit"] else None
    except (OSError, subprocess.TimeoutExpired):
        env["commit"] = env["changed_since_commit"] = None
    manifest = os.path.join(spec.data_dir(geometry), spec.MANIFEST_FILE)
    if os.path.exists(manifest):
        with open(manifest, "rb") as f:
            env["data_manifest_sha256"] = hashlib.sha256(f.read()).hexdigest()
    if not cpu:
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
            env["gpus"] = [dict(zip(("name", "uuid", "driver", "power_limit", "max_sm_clock"),
                                    [x.strip() for x in line.split(",")])) for line in q.strip().splitlines()]
        except (OSError, subprocess.TimeoutExpired):
            env["gpus"] = None
    env["ranks"] = ranks
    env["solutions"] = {s["name"]: {"path": os.path.relpath(s["path"], ROOT) if s["path"].startswith(ROOT)
                                    else s["path"], "content_hash": s["hash"]} for s in solutions}
    return env


def gib(b):
    return f"{b / 2**30:.1f}"


# What a terminal or a reader acts on rather than shows: C0 and C1 controls but tab and newline (escape sequences that
# move the cursor or erase the judge's lines, carriage returns), bidirectional overrides; and what XML cannot hold
# (lone surrogates, which JSON can carry, and U+FFFE, U+FFFF).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def plain(text):
    """Text from a solution (its messages, logs, trace names, sources) as the judge shows it: every character that
    would act instead of show (see _UNSAFE) becomes '?', so no line of the judge's can be overwritten or forged."""
    return _UNSAFE.sub("?", str(text))


QUOTE = "\n     | "


QUOTED_LINE = 300     # characters of a line of a solution's text on the console (the records keep it whole)


_NOT_ASCII = re.compile("[^\x20-\x7e\n]")


def shown(text):
    """plain(text) as the console shows it: printable ASCII and newlines, '?' for the rest (a terminal decides the
    widths of wide, ambiguous and joined characters and of tabs, and rich may count them otherwise: a row it thinks
    fits would wrap, and its rest start where the judge's lines start)."""
    return _NOT_ASCII.sub("?", plain(text))


def quote(text, width=None, lead=0):
    """plain(text) for the console, where a solution's text (a message, a log's tail) may span lines: each line after
    its first is indented behind QUOTE, so none of them starts where the judge's lines do (a PASS of its own, a
    failure blamed on another solution), and each is cut at QUOTED_LINE characters. With `width` (the console's;
    `lead`: the columns the judge's own words take before the text on its first row) every character but printable
    ASCII shows as '?' (a terminal's width of the others is its own: wide, ambiguous, joined, tabs) and every row is
    wrapped here, each continuation behind QUOTE too: a terminal's own wrapping of a long row would start its rest in
    the first column, where the judge's lines start. Print it with soft_wrap=True, so the console does not wrap it
    either."""
    text = plain(text) if width is None else shown(text)
    indent = len(QUOTE) - 1
    width = None if width is None else max(width, indent + 20)     # a console a few columns wide still advances
    rows = []
    for k, line in enumerate(text.split("\n")):
        line = line if len(line) <= QUOTED_LINE else line[:QUOTED_LINE] + "..."
        if width is None:
            rows.append(line)
            continue
        room = width - (lead if k == 0 else indent)
        if room < 10:                   # the judge's words fill the row: the text starts on the next one
            rows.append("")
            room = width - indent
        while len(line) > room:
            rows.append(line[:room])
            line, room = line[room:], width - indent
        rows.append(line)
    return QUOTE.join(rows)


def console(width=160, stderr=False):
    """The judge's console. Without markup: names, reasons and scopes come from solutions, and a `[/]` in them must
    print as itself, not end a style (or raise); colour goes in as `style` or Text pieces. Strings and Text it
    renders go through shown(): printable ASCII, as a table's cells too (the judge's own words are ASCII; rich's
    rules and boxes are drawn past it), so no width a terminal gives a character differs from rich's count."""
    from rich.console import Console

    from rich.text import Text

    class Plain(Console):
        def render_str(self, text, *args, **kwargs):
            return super().render_str(shown(text), *args, **kwargs)

        def print(self, *objects, **kwargs):
            for t in objects:
                if isinstance(t, Text):
                    t.plain = shown(t.plain)          # one character for one: the styles' spans still fit
            super().print(*objects, **kwargs)
    stream = sys.stderr if stderr else sys.stdout
    return Plain(width=None if stream.isatty() else width, markup=False, highlight=False, stderr=stderr)


def line(name, rec, many, width=None):
    """A workload's line of the console (a rich Text), its quoted reason wrapped at `width` (see quote)."""
    from rich.text import Text
    who = f"{name} " if many else ""
    if rec["status"] != "passed":
        where = f"\n  {' ' * len(who)}{'':<8} where: {rec['error_map']['words']}" if rec.get("error_map") else ""
        head = f"  {who}{rec['workload']:<8} "
        return Text.assemble(head, (rec["status"], "red"),
                             quote(f": {rec['reason']}", width, len(head) + len(rec["status"])), where)
    t = f"median {rec['median_s']:.4f} s (n={rec['n']}, spread {100 * rec['spread']:.1f}%)" if rec.get("median_s") \
        else "checked"
    psnr = f"PSNR {rec['psnr_db']:.1f} dB, " if "psnr_db" in rec else ""
    return Text.assemble(f"  {who}{rec['workload']:<8} ", ("passed", "green"), f" {psnr}{t}")


def report(console, solutions, results, geometry, cpu):
    from rich.table import Table
    from rich.text import Text

    from harness.judge import checks     # here: the judge imports report/, not the reverse
    out = {"geometry": geometry.name, "device": "cpu" if cpu else "cuda"}
    per = {}
    for s in solutions:
        res = results[s["name"]]
        table = Table(title=f"{s['name']} ({geometry.name} geometry{', CPU' if cpu else ''})")
        for col in ("workload", "world", "status", "max|d| / allow", "rms / allow", "PSNR dB", "median s",
                    "spread", "n", "TFLOP/s", "roofline", "peak GiB"):
            table.add_column(col, justify="left" if col in ("workload", "status") else "right")
        for w in spec.WORKLOADS:
            r = res.get(w)
            if r is None:
                continue
            a = r.get("allowance") or {}
            table.add_row(
                w, str(r["world"]), r["status"],
                f"{r['max_abs']:.3g} / {a['max_abs']:.3g}" if "max_abs" in r else "",
                f"{r['rms']:.3g} / {a['rms']:.3g}" if "rms" in r else "",
                f"{r['psnr_db']:.1f}" if "psnr_db" in r else "",
                f"{r['median_s']:.4f}" if r.get("median_s") else "",
                f"{100 * r['spread']:.1f}%" if r.get("median_s") else "",
                str(r.get("n", "")) if r.get("median_s") else "",
                f"{r['tflops']:.3g}" if r.get("tflops") else "",
                f"{100 * r['roofline']:.1f}%" if r.get("roofline") else "",
                gib(max(r["peak_bytes"])) if r.get("peak_bytes") else "")
        console.print(table)
        value, complete, n = checks.objective(res, spec.TIMED_WORKLOADS)
        if value is not None:
            console.print(Text.assemble(f"objective ({s['name']}): geomean of {n} timed medians = ",
                                        (f"{value:.4f} s", "bold"),
                                        ("" if complete else (f" (partial: {n} of {len(spec.TIMED_WORKLOADS)} timed "
                                                              f"workloads passed)", "yellow"))))
        else:
            console.print(f"objective ({s['name']}): none (no timed workload passed)")
        per[s["name"]] = {"workloads": res, "objective_s": value, "objective_complete": complete,
                          "objective_workloads": n, "content_hash": s["hash"]}
    if len(solutions) > 1:
        base = solutions[0]["name"]
        lines = []
        for s in solutions[1:]:
            for w in spec.WORKLOADS:
                a, b = results[base].get(w), results[s["name"]].get(w)
                if a and b and a.get("median_s") and b.get("median_s"):
                    ratio, v = checks.compare_times(a, b)
                    lines.append({"workload": w, "solution": s["name"], "baseline": base, "time_ratio": ratio,
                                  "verdict": f"{base} {v}"})
                    console.print(f"  {w:<8} {s['name']} takes {ratio:.2f}x the time of {base}: {base} {v}")
        out["comparisons"] = lines
        out["solutions"] = per
    else:
        out.update(per[solutions[0]["name"]])
    return out
