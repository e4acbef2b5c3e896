"""The static report of a run: `bench.py --report DIR` and `ci.py --report DIR` write DIR/index.html with its
pictures beside it (no server, no network; it reads offline in any browser).

A bench page: the verdict per solution, the per-workload table with statuses, the A/B verdicts when several
solutions ran, the error maps (harness/report/error_maps.py, drawn during the run into DIR/maps), the roofline per
solution (bounds.plot: counted and executed FLOPs), the per-scope chart of each profiled call (profile.bar_chart), then
the environment and provenance. A gate page: the verdict, every check with its status, the error maps, the environment.
Everything shown comes from the run's JSON record (the same dict bench and ci write with --json). A few lines of
inline script, run after load, mark a picture that did not load and count the pictures and tables into the body's
data attributes (`data-pictures`, `data-broken`, `data-tables`); the page reads the same without them."""
import html
import json
import os
import re
import urllib.parse

import bounds
from harness.report import profile

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #222; max-width: 1500px }
h1 { font-size: 1.5em } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ccc }
table { border-collapse: collapse; margin: 0.6em 0 } td, th { border: 1px solid #ccc; padding: 2px 8px }
th { background: #f0f0f0; text-align: left } td.num { text-align: right; font-variant-numeric: tabular-nums }
.passed { color: #176f2c; font-weight: 600 } .failed { color: #b3261e; font-weight: 600 }
.skipped { color: #8a6d00; font-weight: 600 } .words { font-style: italic }
img { max-width: 100%; border: 1px solid #ddd } figure { margin: 1em 0 } .broken { color: #b3261e }
code, pre { font-size: 12px } pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto }
"""
# After load: mark each picture that did not load, and count what rendered (a browser test reads these).
SCRIPT = """
window.addEventListener("load", function () {
  var imgs = document.images, broken = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (!(imgs[i].complete && imgs[i].naturalWidth > 0)) {
      broken++;
      var note = document.createElement("p");
      note.className = "broken";
      note.textContent = "missing picture: " + imgs[i].getAttribute("src");
      imgs[i].parentNode.insertBefore(note, imgs[i]);
    }
  }
  document.body.dataset.pictures = imgs.length - broken;
  document.body.dataset.broken = broken;
  document.body.dataset.tables = document.getElementsByTagName("table").length;
});
"""


def add_arguments(p, what):
    """bench's and ci's --report and --maps; `what`: the things that are mapped ("workloads", "checks")."""
    p.add_argument("--report", metavar="DIR", help="write DIR/index.html, a static report with its pictures beside it "
                                                    "(error maps, roofline, scopes; needs matplotlib)")
    p.add_argument("--maps", action="store_true", help=f"error maps of passing {what} too (failing ones always get "
                                                       f"one); the pictures go into --report's DIR/maps, else into "
                                                       f"error-maps/<UTC time>-<pid>/")


def esc(x):
    return html.escape("" if x is None else str(x))


def status_class(status):
    return {"passed": "passed", "skipped": "skipped"}.get(status, "failed")


def table(header, rows):
    """An HTML table; a cell is text (escaped) or (text, css class)."""
    def cell(c, tag):
        text, cls = c if isinstance(c, tuple) else (c, "num" if isinstance(c, (int, float)) else None)
        return f"<{tag}{f' class={cls}' if cls else ''}>{esc(text)}</{tag}>"
    head = "".join(cell(h, "th") for h in header)
    body = "".join("<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def picture(folder, path, caption, width=None):
    src = urllib.parse.quote(os.path.relpath(path, folder))
    size = f" style=\"max-width: {width}px\"" if width else ""
    return f"<figure><img src=\"{src}\" alt=\"{esc(caption)}\"{size}><figcaption>{esc(caption)}</figcaption></figure>"


def stem(*parts):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(map(str, parts)))


def page(folder, title, sections):
    text = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>"
            f"<style>{STYLE}</style><script>{SCRIPT}</script></head>\n<body><h1>{esc(title)}</h1>\n"
            + "\n".join(sections) + "\n</body></html>\n")
    path = os.path.join(folder, "index.html")
    # A solution's path may hold bytes that are no UTF-8 (surrogate escapes): shown escaped, never a crash.
    with open(path + ".tmp", "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return path


def fmt(x, spec_=".4g"):
    return "" if x is None else format(x, spec_)


def error_maps(folder, items):
    """The error-map section: [(heading, status, error_map)]."""
    if not items:
        return ""
    out = ["<h2>Error maps</h2>"]
    for heading, status, m in items:
        out.append(f"<h3>{esc(heading)}: <span class={status_class(status)}>{esc(status)}</span></h3>"
                   f"<p class=words>{esc(m['words'])}</p>")
        if m.get("picture"):
            out.append(picture(folder, m["picture"], f"error map of {heading}"))
    return "\n".join(out)


def environment(env, method=None):
    """The environment and provenance section of a run's `environment` record (harness/report/console.py)."""
    if not env:
        return ""
    simple = [(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in env.items()
              if k not in ("ranks", "solutions", "gpus")]
    out = ["<h2>Environment and provenance</h2>", table(["", ""], [(k, v) for k, v in simple])]
    if env.get("gpus"):
        out.append(table(list(env["gpus"][0]), [list(g.values()) for g in env["gpus"]]))
    out.append(table(["solution", "path", "content hash"],
                     [(name, s["path"], s["content_hash"]) for name, s in (env.get("solutions") or {}).items()]))
    ranks = [(name, r.get("rank"), r.get("device"), r.get("torch"), r.get("triton"), fmt(r.get("prepare_s")),
              (r.get("isolation") or {}).get("isolation"))
             for name, rs in (env.get("ranks") or {}).items() for r in rs]
    if ranks:
        out.append(table(["ranks of", "rank", "device", "torch", "triton", "prepare s", "isolation"], ranks))
    if method:
        out.append(f"<p>Method: <code>{esc(json.dumps(method))}</code></p>")
    return "\n".join(out)


def solutions_of(out):
    """{solution name: its record} of a bench JSON (one solution's is the top level)."""
    if "solutions" in out:
        return out["solutions"]
    return {next(iter(out["environment"]["solutions"])): out}


def workloads_table(records):
    rows = []
    for w, r in records.items():
        a = r.get("allowance") or {}
        rows.append((w, r["world"], (r["status"], status_class(r["status"])),
                     f"{r['max_abs']:.3g} / {a['max_abs']:.3g}" if "max_abs" in r else "",
                     f"{r['rms']:.3g} / {a['rms']:.3g}" if "rms" in r else "",
                     fmt(r.get("psnr_db"), ".1f"), fmt(r.get("median_s"), ".4f"),
                     f"{100 * r['spread']:.1f}%" if r.get("median_s") else "", r.get("n", "") if r.get("median_s")
                     else "", fmt(r.get("tflops"), ".3g"), f"{100 * r['roofline']:.1f}%" if r.get("roofline") else "",
                     f"{max(r['peak_bytes']) / 2**30:.1f}" if r.get("peak_bytes") else "",
                     r.get("reason") or ""))
    return table(["workload", "world", "status", "max|d| / allow", "rms / allow", "PSNR dB", "median s", "spread",
                  "n", "TFLOP/s", "roofline", "peak GiB", "reason"], rows)


def roofline(folder, name, sol, geometry, cpu, gpu_key):
    """The solution's roofline PNG (bounds.plot of bounds.report), or None without a timed workload that passed."""
    timed = {w: r for w, r in sol["workloads"].items() if r.get("median_s")}
    if not timed:
        return None
    if cpu:
        gpu, peaks = "CPU stand-in (bounds.CPU_PEAK)", bounds.CPU_PEAK
    elif gpu_key:
        gpu, peaks = gpu_key, None
    else:
        gpu, peaks = "the fastest GPU of the table", bounds.peaks_for(False, None)
    rep = bounds.report(gpu, geometry, results={"workloads": timed, "objective_s": None}, peaks=peaks)
    path = os.path.join(folder, f"{stem('roofline', name)}.png")
    bounds.plot(rep, path, f"{name}: roofline on {gpu}")
    return path


def bench_page(folder, out, geometry, cpu, gpu_key):
    """DIR/index.html of a bench run's record `out`; returns its path."""
    os.makedirs(folder, exist_ok=True)
    sols = solutions_of(out)
    names = ", ".join(sols)
    sections = [f"<p>{esc(geometry.name)} geometry on the {'CPU' if cpu else 'GPU'}; isolation: "
                f"{esc(out.get('environment', {}).get('isolation'))}</p>"]
    summary = []
    for name, sol in sols.items():
        recs = sol["workloads"]
        passed = sum(r["status"] == "passed" for r in recs.values())
        objective = f"{sol['objective_s']:.4f} s" + ("" if sol.get("objective_complete") else " (partial)") \
            if sol.get("objective_s") else "none"
        summary.append((name, (f"{passed} of {len(recs)} passed", "passed" if passed == len(recs) else "failed"),
                        objective, sol.get("content_hash", "")))
    sections.append(table(["solution", "workloads", "objective (geomean of timed medians)", "content hash"], summary))
    for name, sol in sols.items():
        sections += [f"<h2>{esc(name)}: workloads</h2>", workloads_table(sol["workloads"])]
    if out.get("comparisons"):
        sections += ["<h2>A/B verdicts</h2>", table(
            ["workload", "solution", "time / baseline's", "verdict"],
            [(c["workload"], c["solution"], f"{c['time_ratio']:.3f}x of {c['baseline']}", c["verdict"])
             for c in out["comparisons"]])]
    sections.append(error_maps(folder, [(f"{name} {w}", r["status"], r["error_map"]) for name, sol in sols.items()
                                        for w, r in sol["workloads"].items() if r.get("error_map")]))
    plots = [(name, roofline(folder, name, sol, geometry, cpu, gpu_key)) for name, sol in sols.items()]
    sections.append("<h2>Roofline</h2>" + ("".join(picture(folder, p, f"roofline of {name}", 640)
                                                   for name, p in plots if p)
                                           or "<p>No timed workload passed: no achieved rate to place.</p>"))
    profiled = [(name, w, r["profile"]) for name, sol in sols.items() for w, r in sol["workloads"].items()
                if r.get("profile")]
    if profiled:
        sections.append("<h2>Where the time goes (profiled calls)</h2>")
        for name, w, prof in profiled:
            path = profile.bar_chart(prof, os.path.join(folder, f"{stem('scopes', name, w)}.png"),
                                     f"{name} {w}: one profiled call of {prof['time_s']:.4f} s")
            sections.append(picture(folder, path, f"per-scope self time of {name} {w} (traces: "
                                                  f"{', '.join(os.path.basename(r['trace']) for r in prof['ranks'])})"))
    sections.append(environment(out.get("environment"), out.get("method")))
    return page(folder, f"bench {names}", sections)


def gate_page(folder, out):
    """DIR/index.html of a gate run's record `out` (ci.py's JSON); returns its path."""
    os.makedirs(folder, exist_ok=True)
    sections = [f"<p class={'passed' if out['passed'] else 'failed'}>{esc(out['verdict'])}, exit code "
                f"{out['exit_code']}; isolation: {esc(out['isolation'])}; {esc(out['geometry'])} geometry</p>",
                "<h2>Checks</h2>", table(
                    ["check", "status", "seconds", "max|d|", "rms", "reason"],
                    [(c["name"], (c["status"], status_class(c["status"])), fmt(c.get("seconds"), ".3f"),
                      fmt((c.get("figures") or {}).get("max_abs"), ".3g"),
                      fmt((c.get("figures") or {}).get("rms"), ".3g"), c.get("reason") or "")
                     for c in out["checks"]]),
                *(["<h2>Review notes</h2>", table(["where", "rule", "found", "look at"],
                                                  [(f"{n['file']}:{n['line']}", n["rule"], n["reason"], n["look"])
                                                   for n in out["review"]])] if out.get("review") else []),
                error_maps(folder, [(c["name"], c["status"], c["error_map"]) for c in out["checks"]
                                    if c.get("error_map")]),
                environment(out.get("environment"))]
    return page(folder, f"ci {os.path.basename(os.path.abspath(out['solution']))}", sections)
