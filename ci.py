"""The gate: `python ci.py SOLUTION [--tiny] [--json PATH] [--junit PATH]`; exit 0 only when the audit is clean, the
ranks ran isolated, every check passed and every workload asked ran.

Exit codes: 0 passed (the audit's review notes shown, not failing), 1 wrong results (incorrect, input modified,
tampering, impossibly fast), 2 runtime failure (exception, crash, timeout, build or load error), 3 audit failure (a
failing rule's finding; with --strict, a review note too), 4 harness error, 5 no isolation (the platform has no
sandbox and --no-isolation was not given: nothing ran), 6 partial (what ran passed, but workloads this machine
cannot run, the audit or, with --release, the fp32 checks were left out). With several kinds of failure the code is
the first of harness, audit, isolation, runtime, wrong, partial. A run of some workloads (--workloads) passes as
what it is: its verdict line and JSON (`workloads`, `not_asked`) name what it covers.

What it checks, beyond bench.py's per-call checks (the same rank processes, judge and sandbox):
- audit.py's static rules over every source: the task's file-io rule and unreadable files fail; every other finding
  is a review note (console, JSON `review`, JUnit, report) with what a reviewer should look at.
- The stored workloads (all of them by default), one call each.
- Fresh latents that exist nowhere on disk (a secret seed, the data maker's latent statistics), a new draw for
  every call: the gate decodes them itself and holds each to the task's fp32 rule (--fp32: the whole video, the
  CPU's default; or, on GPUs, the whole video against the release bf16 decode beside a secret tile in fp32).
- Every call's time against the roofline (bounds.bound_of): faster than the hardware allows is impossible.

A failing check's error map (harness/report/error_maps.py; every check's with --maps) says where its video is wrong, and
its PNG goes into error-maps/<UTC time>-<pid>/ under the working directory (DIR/maps with --report DIR); --report DIR
writes the checks, their maps and the environment as DIR/index.html.
"""
import argparse
import json
import sys
import time
import xml.etree.ElementTree as ET

import loader
import spec
from harness.isolation import procs
from harness.report import console as console_module, html

EXIT = {"passed": 0, "wrong": 1, "runtime": 2, "audit": 3, "harness": 4, "isolation": 5, "partial": 6}
KIND = {"passed": "passed", "incorrect": "wrong", "input modified": "wrong", "tampering": "wrong",
        "impossible": "wrong", "invalid timing": "wrong", "runtime error": "runtime", "crash": "runtime",
        "timeout": "runtime", "build error": "runtime", "load error": "runtime", "audit": "audit",
        "harness error": "harness", "no isolation": "isolation", "skipped": "partial"}


def exit_code(checks):
    kinds = {KIND.get(c["status"], "harness") for c in checks}
    for kind in ("harness", "audit", "isolation", "runtime", "wrong", "partial"):
        if kind in kinds:
            return EXIT[kind]
    return EXIT["passed"]


def junit(checks, path, suite, review=()):
    """The checks as JUnit XML, the review notes as the audit case's output; every text plain (console.plain: what XML
    cannot hold, and terminal controls)."""
    suite = console_module.plain(suite)
    root = ET.Element("testsuite", name=suite, tests=str(len(checks)),
                      failures=str(sum(c["status"] != "passed" for c in checks)))
    for c in checks:
        case = ET.SubElement(root, "testcase", classname=suite, name=console_module.plain(c["name"]),
                             time=f"{c.get('seconds') or 0:.6f}")
        if c["status"] != "passed":
            ET.SubElement(case, "failure", type=console_module.plain(c["status"]),
                          message=console_module.plain((c["reason"] or "")[:2000]))
        if c["name"] == "audit" and review:
            ET.SubElement(case, "system-out").text = console_module.plain("\n".join(note_lines(review)))
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def note_lines(review):
    """A review note as words: where, which rule, what was found, what a reviewer looks at."""
    return [f"review note {n['file']}:{n['line']}: {n['rule']}: {n['reason']} (look at: {n['look']})"
            for n in review]


def parse_args(argv):
    p = argparse.ArgumentParser(description="The gate: audit, every workload, fresh latents, the roofline floor.")
    p.add_argument("solution")
    p.add_argument("--tiny", action="store_true", help="the tiny geometry on the CPU (gloo)")
    p.add_argument("--workloads", help=f"comma list (default: all {len(spec.WORKLOADS)})")
    p.add_argument("--fresh-calls", type=int, default=2, help="draws of fresh latents per shape and world")
    p.add_argument("--seed", type=int, help="the fresh latents' seed (default: a secret one)")
    p.add_argument("--release", action="store_true",
                   help="on GPUs, verify the long fresh clips against the release bf16 decode, the allowance widened "
                        "by its error (faster; a partial certificate: the task's rule then holds on the stored calls "
                        "only)")
    p.add_argument("--fp32", choices=("video", "tile"),
                   help="what of each long fresh draw the gate's fp32 decode covers: the whole video (the CPU's "
                        "default), or a secret tile with which the rms over the video is estimated, beside the whole "
                        "video checked against the release bf16 decode (the GPUs' default; at most 7.4%% of the fp32 "
                        "work)")
    p.add_argument("--timeout-scale", type=float, default=1.0)
    p.add_argument("--no-isolation", action="store_true", help="run the ranks unconfined (never a certificate)")
    p.add_argument("--no-audit", action="store_true", help="skip the static audit (never a certificate)")
    p.add_argument("--strict", action="store_true", help="the audit's review notes fail the gate too (exit 3)")
    p.add_argument("--json", help="write every check here")
    p.add_argument("--junit", help="write JUnit XML here")
    html.add_arguments(p, "checks")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    procs.mark_judge()      # before the data maker starts its workers
    from rich.text import Text
    from harness.judge.gate_plan import Gate
    from harness.report import plot
    if args.report and not plot.available():
        print(f"--report {plot.MISSING}", file=sys.stderr)
        return EXIT["harness"]
    console = console_module.console()
    started, checks, gate, asked = time.monotonic(), [], None, []

    def add(name, status, reason=None, seconds=None, **extra):
        checks.append({"name": name, "status": status, "reason": reason, "seconds": seconds, **extra})
        colour = "green" if status == "passed" else "yellow" if status == "skipped" else "red"
        word = {"passed": "PASS", "skipped": "SKIP"}.get(status, "FAIL")
        said = f" {name}" + (f": {status}: {reason}" if status != "passed" else "") \
            + (f" ({seconds:.3f} s)" if seconds is not None else "")
        console.print(Text.assemble((word, colour), console_module.quote(said, console.width, len(word))),
                      soft_wrap=True)
        for a in extra.get("allowed") or []:      # the solution's own waivers: shown, never silent
            waiver = "     allowed by the solution: "
            console.print(Text.assemble((waiver, "yellow"), console_module.quote(a, console.width, len(waiver))),
                          soft_wrap=True)
        if name == "audit" and gate is not None:
            lead = "     review note: "
            for n in gate.review:      # the solution's names in its text: quoted, as its waivers are
                note = f"{n['file']}:{n['line']}: {n['rule']}: {n['reason']}; look at: {n['look']}"
                console.print(Text.assemble((lead, "yellow"), console_module.quote(note, console.width, len(lead))),
                              soft_wrap=True)
        if status != "passed" and extra.get("error_map"):
            console.print(f"     where: {extra['error_map']['words']}")
    try:
        asked = spec.workloads_named(args.workloads)
        gate = Gate(args, console, add)
        runnable = [w for w in asked if gate.cpu or spec.WORKLOADS[w].world <= gate.gpus]
        for w in asked:
            if w not in runnable:
                add(w, "skipped", f"needs {spec.WORKLOADS[w].world} GPUs, {gate.gpus} visible")
        gate.run(runnable)
    except Exception as e:  # the harness's own failure: never reported as the solution's
        import traceback
        traceback.print_exc()
        add("harness", "harness error", f"{type(e).__name__}: {e}")
    finally:
        if gate is not None:
            gate.close()
    code = exit_code(checks)
    failed = [c for c in checks if c["status"] not in ("passed", "skipped")]
    skipped = [c["name"] for c in checks if c["status"] == "skipped"]
    asked = [w for w in spec.WORKLOADS if w in asked]
    left = [w for w in spec.WORKLOADS if w not in asked]     # a certificate names what it does not cover
    covers = f" ({len(asked)} of {len(spec.WORKLOADS)} workloads asked)" if left else ""
    notes = f", {len(gate.review)} review note(s)" if gate is not None and gate.review else ""
    verdict = "PASSED" + covers + notes if code == 0 else \
        f"PARTIAL (not run: {', '.join(skipped)})" if code == EXIT["partial"] else \
        f"FAILED ({len(failed)} of {len(checks)} checks)"
    if gate is not None and (said := gate.atlas.said()):
        console.print(said)
    isolation = gate.run_.isolation if gate is not None and gate.run_ is not None else None
    if gate is not None:
        console.print(gate.breakdown.said())
    # The isolation on a line of its own, before the verdict: a 0 is a certificate only where it says the ranks ran
    # confined.
    console.print(f"isolation: {isolation}", soft_wrap=True)
    console.print(Text.assemble((f"ci {loader.plain_name(args.solution)}: {verdict}", "bold"),
                                f", exit {code}, {time.monotonic() - started:.0f} s"), soft_wrap=True)
    record = {"schema_version": console_module.SCHEMA_VERSION, "solution": args.solution, "exit_code": code,
              "passed": code == 0, "partial": code == 6,
              "verdict": verdict, "workloads": asked, "not_asked": left, "isolation": isolation, "checks": checks,
              "geometry": gate.geometry.name if gate else None, "review": gate.review if gate else [],
              "strict": args.strict, "time_s": gate.breakdown.as_dict() if gate else None}
    if gate is not None and gate.solution is not None:
        record["environment"] = console_module.environment(gate.gpus, gate.cpu, gate.info, [gate.solution],
                                                           gate.geometry, isolation)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1, default=str)
    if args.junit:
        junit(checks, args.junit, "ci", record["review"])
    if args.report:
        console.print(f"wrote {html.gate_page(args.report, json.loads(json.dumps(record, default=str)))}")
    return code


if __name__ == "__main__":
    sys.exit(main())
