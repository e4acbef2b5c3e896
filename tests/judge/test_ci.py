"""ci.py, the gate, on the tiny geometry: honest solutions pass every time, and each cheat in tests/cheats/ fails for
its intended reason (the test reads the reason, not just the exit code)."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

import fixtures
import spec
from fixtures import CHEAT, FIXTURES
from harness.report.console import QUOTE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHEATS = os.path.join(ROOT, "tests", "cheats")


def gate(env, tmp_path, solution, *args, timeout=900):
    """ci.py on `solution` (a path from the repository's root) in tmp_path: (the process, its JSON, its JUnit XML)."""
    out = tmp_path / f"ci-{os.path.basename(solution)}.json"
    xml = tmp_path / "ci.xml"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "ci.py"), os.path.join(ROOT, solution), "--tiny", "--json",
                        str(out), "--junit", str(xml), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=timeout)
    report = json.loads(out.read_text())
    assert report["exit_code"] == p.returncode and report["schema_version"] == 1
    return p, report, xml


def failures(report):
    return {c["name"]: (c["status"], c["reason"] or "") for c in report["checks"] if c["status"] != "passed"}


# Both gate runs are in the slow tier (30 s or more each of the default tier's 4-minute budget on a 2-core machine);
# the default tier's cheats pass the same gate's every check but the one each fails.
@pytest.mark.slow
@pytest.mark.parametrize("solution, workloads", [("solutions/reference", "f5x1,f121x2,f17x4"),
                                                 ("solutions/baseline", "f1x4,f121x2,f17x1")])
def test_honest_solutions_pass(tiny_data, tmp_path, solution, workloads):
    """Every world, fresh latents and one stored workload per world."""
    p, report, xml = gate(tiny_data, tmp_path, solution, "--workloads", workloads)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    names = {c["name"] for c in report["checks"]}
    assert {"audit", *workloads.split(",")} <= names
    assert sum(n.startswith("fresh latents") for n in names) == 6   # two per world, worlds 1, 2, 4
    assert all(c["status"] == "passed" for c in report["checks"])
    assert report["isolation"].startswith("landlock") and "PASSED (3 of 15 workloads asked)" in p.stdout
    assert report["workloads"] == sorted(workloads.split(","), key=list(spec.WORKLOADS).index)
    assert set(report["not_asked"]) == set(spec.WORKLOADS) - set(workloads.split(","))
    assert "<testsuite" in xml.read_text() and 'failures="0"' in xml.read_text()
    if solution == "solutions/baseline":    # its one allowance (Triton's interpreter switch) is shown, not silent
        assert "allowed by the solution: kernels.py:30: environment" in p.stdout, p.stdout[-3000:]


# The cheats the gate fails, and those it passes with the audit's review notes: tests/fixtures.py's `ci` verdicts
# (exit code, check name, status, a phrase of the reason). Each runs on f1x1 and f5x1 plus fresh latents. The audit's
# findings on the cheats only it sees are tests/audit/test_audit.py's, and the gate's review notes on them
# test_what_only_the_audit_sees_is_a_review_note's; side_thread.py's review note and its runtime failure are shown
# together by test_audit_findings_are_reported_beside_the_dynamic_checks.
EXPECTED = {f.name: f for f in FIXTURES if f.kind == CHEAT and f.ci and f.ci.code != 0}
REVIEWED = {f.name: f for f in FIXTURES if f.kind == CHEAT and f.ci and f.ci.code == 0}


# The default tier's share: one cheat per kind of check (the rest run in the slow tier).
DEFAULT = tuple(c for c, f in EXPECTED.items() if f.tier == fixtures.DEFAULT)


@pytest.mark.parametrize("cheat", [c if c in DEFAULT else pytest.param(c, marks=pytest.mark.slow)
                                   for c in sorted(EXPECTED)])
def test_cheat_fails_for_its_reason(tiny_data, tmp_path, cheat):
    code, check, status, phrase = EXPECTED[cheat].ci
    scale = "0.01" if cheat.startswith("hangs") else "0.03"
    p, report, _ = gate(tiny_data, tmp_path, os.path.join(CHEATS, cheat), "--workloads", "f1x1,f5x1",
                        "--timeout-scale", scale, timeout=600)
    fails = failures(report)
    assert check in fails, (fails, p.stdout[-2000:])
    assert fails[check][0] == status and phrase in fails[check][1], fails[check]
    assert p.returncode == code, fails
    assert not list(tmp_path.parent.glob("**/planted*")), "the judge wrote where a name pointed"
    assert "\x1b" not in p.stdout and "\r" not in p.stdout, "a solution's terminal controls reached the console"
    forged = [line for line in p.stdout.splitlines() if "(forged)" in line and not line.startswith(QUOTE[1:])]
    assert not forged, f"a solution's line printed where the judge's start: {forged}"
    # The mapped checks' pictures, in a folder of the run's own under its working directory (none: no folder).
    pictures = sorted(str(f.relative_to(tmp_path)) for f in tmp_path.glob("error-maps/*/*.png"))
    assert pictures == sorted(c["error_map"]["picture"] for c in report["checks"] if c.get("error_map")), pictures
    assert (tmp_path / "error-maps").exists() == bool(pictures)
    if phrase.startswith(("max|d|", "rms(d)", "not finite")):          # failed on its figures: mapped
        assert next(c for c in report["checks"] if c["name"] == check)["error_map"]["picture"] in pictures


@pytest.mark.slow
@pytest.mark.parametrize("cheat", list(REVIEWED))
def test_what_only_the_audit_sees_is_a_review_note(tiny_data, tmp_path, cheat):
    """Narrow numerics inside run() stay inside the allowance: every runtime check passes, and the task's numerics
    rule is the reviewers' (no check reads it from the code). The gate passes with the audit's review notes shown
    (exit 0), and --strict fails them (exit 3)."""
    code, _, _, phrase = REVIEWED[cheat].ci
    p, report, xml = gate(tiny_data, tmp_path, os.path.join(CHEATS, cheat), "--workloads", "f1x1,f5x1")
    assert p.returncode == code and not failures(report), p.stdout[-2000:]
    if phrase == "review note":
        assert report["review"] and "review note" in p.stdout and "review note" in xml.read_text()
    else:       # waives_its_audit.py: its own allowance silences its note, listed as the solution's waiver
        assert phrase in p.stdout
    if cheat == "private_ops.py":
        p, report, _ = gate(tiny_data, tmp_path, os.path.join(CHEATS, cheat), "--workloads", "f1x1", "--strict")
        assert p.returncode == 3 and failures(report)["audit"][0] == "audit", p.stdout[-2000:]
        assert "(a review note; --strict)" in failures(report)["audit"][1]


@pytest.mark.slow      # 11 s; the default tier keeps test_audit's findings and the gate's other checks
def test_audit_findings_are_reported_beside_the_dynamic_checks(tiny_data, tmp_path):
    p, report, _ = gate(tiny_data, tmp_path, os.path.join(CHEATS, "side_thread.py"), "--workloads", "f1x1")
    fails = failures(report)
    assert "audit" not in fails and {n["rule"] for n in report["review"]} == {"process"}
    assert fails["f1x1"][0] == "tampering" and "threads left running after the call: ['late-decode']" in \
        fails["f1x1"][1], fails["f1x1"]
    assert p.returncode == 1


def test_exit_codes_order():
    import ci
    assert ci.exit_code([{"status": "passed"}]) == 0
    assert ci.exit_code([{"status": "incorrect"}, {"status": "timeout"}]) == 2
    assert ci.exit_code([{"status": "incorrect"}, {"status": "audit"}]) == 3
    assert ci.exit_code([{"status": "harness error"}, {"status": "audit"}]) == 4
    assert ci.exit_code([{"status": "no isolation"}, {"status": "timeout"}]) == 5
    assert ci.exit_code([{"status": "passed"}, {"status": "skipped"}]) == 6
    assert ci.exit_code([{"status": "incorrect"}, {"status": "skipped"}]) == 1


def test_refuses_to_certify_without_isolation(tiny_data, tmp_path):
    """Where the platform has no sandbox, the gate runs nothing and says why, unless --no-isolation is given; a
    certificate with parts left out (here the audit too) is partial."""
    env = dict(tiny_data, WAN_ASSUME_NO_LANDLOCK="1")
    p, report, _ = gate(env, tmp_path, "solutions/reference", "--workloads", "f1x1")
    assert p.returncode == 5 and failures(report)["isolation"][0] == "no isolation", p.stdout[-2000:]
    assert not any(c["name"].startswith(("f1x1", "fresh")) for c in report["checks"])
    p, report, _ = gate(env, tmp_path, "solutions/reference", "--workloads", "f1x1", "--no-isolation", "--no-audit")
    assert p.returncode == 6 and report["isolation"] == "none (--no-isolation)", p.stdout[-2000:]
    assert report["partial"] and "PARTIAL" in p.stdout and failures(report)["audit"][0] == "skipped"


@pytest.mark.slow
def test_a_replay_on_an_untimed_clip_fails_without_the_audit(tiny_data, tmp_path):
    """The untimed clips' repeats have a floor too: their calls on fresh latents after the warm-up. (f17's: a tiny
    f1 decodes in a few milliseconds on the CPU, within the CPU's tolerance of a replay.)"""
    p, report, _ = gate(tiny_data, tmp_path, os.path.join(CHEATS, "replays_untimed.py"), "--workloads", "f17x1",
                        "--no-audit")
    fails = failures(report)
    assert fails["f17x1 repeat"][0] == "tampering" and "faster on repeated inputs" in fails["f17x1 repeat"][1], fails


@pytest.mark.slow
def test_a_shapes_warm_up_is_checked_in_full(tiny_data, tmp_path):
    """A shape's first call (the gate's warm-up) wrong past its first five video frames fails there: every call is
    checked on its whole video."""
    p, report, _ = gate(tiny_data, tmp_path, os.path.join(CHEATS, "wrong_on_first_call.py"), "--workloads", "f17x1",
                        "--no-audit")
    fails = failures(report)
    assert fails["warm-up f17 x1"][0] == "incorrect" and "max|d|" in fails["warm-up f17 x1"][1], fails
    assert p.returncode == 1, fails


@pytest.mark.slow
def test_a_shapes_slow_first_call_is_no_floor_for_its_repeats(tiny_data, tmp_path):
    """An untimed shape's warm-up (its first call: compiles, autotunes) is not the speed of fresh latents: the
    stored and repeated calls after it, 0.5 s faster, pass."""
    p, report, _ = gate(tiny_data, tmp_path, os.path.join(ROOT, "tests", "broken", "compiles_per_shape.py"),
                        "--workloads", "f1x1", "--no-audit")
    checks = {c["name"]: c["status"] for c in report["checks"]}
    assert checks["warm-up f1 x1"] == checks["f1x1"] == checks["f1x1 repeat"] == "passed", failures(report)


def test_junit_and_the_console_hold_no_control_from_a_solution(tmp_path, capsys):
    """A reason, a check's name or the suite (a folder's name) with escape sequences, a carriage return or a lone
    surrogate (which JSON carries): the XML parses and holds none of them, and the console prints them as '?'."""
    import xml.etree.ElementTree as ET
    import ci
    from rich.text import Text
    from harness.report import console
    forged = "\r\x1b[2K\x1b[1A\x1b[32mPASS\ud800"
    path = tmp_path / "j.xml"
    ci.junit([{"name": "f1x1" + forged, "status": "incorrect", "reason": "bad" + forged}], str(path), "sol" + forged)
    case = ET.parse(path).getroot()[0]
    texts = [case.get("name"), case.get("classname"), case[0].get("message")]
    assert all("\x1b" not in t and "\r" not in t and "\ud800" not in t for t in texts), texts
    assert case[0].get("message") == "bad??[2K?[1A?[32mPASS?"
    console.console().print(Text.assemble(("ci sol" + forged, "bold"), ", exit 2"), "x" + forged)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "ci sol?[2K?[1A?[32mPASS?" in out


@pytest.mark.slow
def test_a_waiver_cannot_print_lines_of_the_judges(tiny_data, tmp_path):
    """An audit allowance is the solution's text on ci's console: a long one is never wrapped by the console, so a
    forged PASS padded to the width does not start a line of its own."""
    sol = tmp_path / "waiver"
    sol.mkdir()
    (sol / "solution.py").write_text(
        "import os\nfrom reference import run  # noqa: F401\n\n"
        "LANG = os.environ.get('LANG')  # audit: allow environment -- reviewed" + " " * 150
        + "PASS f121x1 (0.033 s) (forged)" + " " * 150 + "ci waiver: PASSED, exit 0 (forged)\n")
    p, report, _ = gate(tiny_data, tmp_path, str(sol), "--workloads", "f1x1")
    assert report["exit_code"] == 0, failures(report)
    assert any("(forged)" in line for line in p.stdout.splitlines())
    forged = [line for line in p.stdout.splitlines() if "(forged)" in line and line.startswith(("PASS", "ci "))]
    assert not forged, forged


def terminal_rows(text, width, lead=""):
    """What a terminal of `width` columns shows of `text` printed after `lead`: its own wrapping of a long line starts
    the rest in the first column."""
    from rich.cells import cell_len
    rows = []
    for line in (lead + text).split("\n"):
        row = ""
        for ch in line:
            if cell_len(row + ch) > width:
                rows.append(row)
                row = ""
            row += ch
        rows.append(row)
    return rows


@pytest.mark.parametrize("width", [40, 80, 161])
def test_a_quoted_line_is_wrapped_before_the_terminal_does(width):
    """console.quote with the console's width: every row a terminal shows, after the first, starts behind QUOTE, for
    a row that fills the terminal exactly, wide (two-cell) and ambiguous characters, tabs and the judge's words
    before it (the console shows printable ASCII only: a terminal decides the others' widths); the text is all there
    (but what was cut at QUOTED_LINE)."""
    from harness.report.console import QUOTED_LINE, quote
    forged = ["x" * (width - 4 - 1) + "PASS f1x1 (forged)", "\u754c" * width + "PASS f5x1 (forged)",
              "\t" * 30 + "PASS f17x1 (forged)", "\u2460\u2600\ufe0f" * width + "PASS f121x1 (forged)",
              "y" * (QUOTED_LINE + 50)]
    for lead in ("FAIL", "     allowed by the solution: ", "  solution-with-a-long-name f121x1   runtime error"):
        if len(lead) + 10 > width:      # the judge's own words wrap there: not what this checks
            continue
        text = quote(": gave up\n" + "\n".join(forged), width, len(lead))
        assert all(" " <= ch <= "~" for ch in text.replace("\n", "")), text
        rows = terminal_rows(text, width, lead)
        assert rows[0].startswith(lead) and all(r.startswith(QUOTE[1:]) for r in rows[1:]), rows
        body = "".join(r[len(QUOTE) - 1:] for r in rows[1:])
        assert "PASS f5x1 (forged)" in body and "y" * QUOTED_LINE + "..." in body
    # A console narrower than the indent still wraps (each row advances), and without a width (the records) lines
    # are only cut.
    narrow = quote("z" * 100, 1, 4).split(QUOTE)
    assert "".join(narrow) == "z" * 100 and len(narrow) == 5 and all(0 < len(r) <= 23 for r in narrow), narrow
    assert quote("a\nb" + "z" * 400).split(QUOTE) == ["a", "b" + "z" * (QUOTED_LINE - 1) + "..."]


@pytest.mark.slow
def test_the_gate_on_a_narrow_terminal_prints_no_row_of_a_solution_where_its_own_start(tiny_data, tmp_path):
    """ci.py on a terminal (a pty) of 80 columns: forges_the_console's lines, padded to the terminal's width, never
    start a row in the first column, as the terminal wraps what the gate prints."""
    import pty
    cheat = os.path.join(CHEATS, "forges_the_console.py")
    main, sub = pty.openpty()
    env = {**tiny_data, "COLUMNS": "80", "LINES": "40", "TERM": "xterm"}
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "ci.py"), cheat, "--tiny", "--workloads", "f1x1"],
                         cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=sub, stderr=sub)
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:             # the pty's other end closed: the gate is done
            break
        if not data:
            break
        chunks.append(data)
    assert p.wait(timeout=300) == 2
    os.close(main)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace")).replace("\r\n", "\n")
    rows = terminal_rows(text, 80)
    assert any("gave up" in row for row in rows) and sum("(forged)" in row for row in rows) >= 5, text[-3000:]
    forged = [row for row in rows if "(forged)" in row and not row.startswith(QUOTE[1:])]
    assert not forged, forged


def test_a_stored_call_stands_at_a_secret_place_among_its_shapes_fresh_calls():
    """On GPUs a fresh long clip is held to the release decode's widened allowance and only the stored calls to the
    task's rule: counting its calls must not tell a solution which one is stored. Over many plans every place occurs,
    never before a shape's warm-up; the repeat follows every fresh call of its shape; stored calls stay longest
    first (a longer stored clip after a shorter one of its source could resume it)."""
    import argparse
    import spec
    from harness.judge.gate_plan import Gate
    args = argparse.Namespace(tiny=True, maps=False, report=None, fresh_calls=2, release=False, fp32=None)
    gate = Gate(args, None, None)
    workloads = ["f1x1", "f5x1", "f17x1", "f121x1", "f241x1"]
    places = {w: set() for w in workloads}
    for _ in range(200):
        plan = gate.plan(workloads, 1)
        kinds = [(case[0], t) for _, t, case in plan]
        stored = [name for name, _, case in plan if case[0] == "stored"]
        assert stored == sorted(stored, key=lambda w: -spec.WORKLOADS[w].latent_frames)
        for w in workloads:
            t = spec.WORKLOADS[w].latent_frames
            at = next(i for i, (name, _, case) in enumerate(plan) if case == ("stored", w))
            start = max([i + 1 for i, (kind, _) in enumerate(kinds[:at]) if kind == "repeat"] or [0])
            shape = [i for i, (kind, u) in enumerate(kinds) if u == t and kind in ("fresh", "warm")
                     and i >= start]
            assert all(kinds[i][0] != "warm" or i < at for i in shape)
            places[w].add(sum(1 for i in shape if i < at and kinds[i][0] != "warm"))
            assert max(shape) < next(i for i, (_, _, case) in enumerate(plan) if case == ("repeat", w))
    assert places["f121x1"] == places["f241x1"] == {0, 1, 2}
    assert places["f17x1"] == places["f5x1"] == places["f1x1"] == {0, 1}


def test_a_world_draws_only_the_shapes_of_its_own_workloads():
    """A run of some workloads draws nothing it did not ask for: f121x1 with f1x4 draws f121 at world 1 only; world 4
    gets f5's shape (every world's) and f1's warm-up and fresh call."""
    import argparse
    from harness.judge.gate_plan import Gate
    gate = Gate(argparse.Namespace(tiny=True, maps=False, report=None, fresh_calls=2, release=False, fp32=None),
                None, None)
    four = [name for name, _, _ in gate.plan(["f121x1", "f1x4"], 4)]
    assert sorted(four) == sorted(["fresh latents #1 x4", "fresh latents #2 x4", "warm-up f1 x4", "fresh f1 x4",
                                   "f1x4", "f1x4 repeat"])
    one = [name for name, _, _ in gate.plan(["f121x1", "f1x4"], 1)]
    assert {"fresh f121 #1 x1", "fresh f121 #2 x1", "f121x1", "f121x1 repeat"} <= set(one)


def test_the_gate_decodes_a_worlds_references_before_its_first_call(tiny_data, monkeypatch):
    """Between two calls the judge's work must not depend on the next call: every planned draw is decoded before the
    world's ranks start (only a second look, which follows a call that looked too fast, draws later)."""
    import argparse
    import types
    import spec
    from harness.judge import gate_plan
    from harness.judge.fresh import Fresh
    monkeypatch.setenv("DATA", tiny_data["DATA"])
    events = []

    class Ranks:
        info = []

        def __init__(self, *a, **k):
            events.append(("start", None))

        def close(self, graceful=True):
            pass
    monkeypatch.setattr(gate_plan, "Group", Ranks)
    monkeypatch.setattr(Fresh, "give", lambda self, key: events.append(("draw", key)))
    monkeypatch.setattr(Fresh, "full", lambda self, z, check="video", key=None: (None, None))
    monkeypatch.setattr(gate_plan.Gate, "call", lambda self, group, name, t, world, case, first: events.append(
        ("call", name)) or {"time_s": 1.0, "status": "passed", "reason": None, "figures": None})
    args = argparse.Namespace(tiny=True, maps=False, report=None, fresh_calls=2, seed=None, release=False,
                              fp32=None, timeout_scale=1.0)
    g = gate_plan.Gate(args, types.SimpleNamespace(print=lambda *a, **k: None), lambda *a, **k: None)
    g.fresh, g.buffers, g.run_ = Fresh(spec.TINY, "cpu"), None, argparse.Namespace(lock=None)
    workloads = ["f1x1", "f5x1", "f17x1", "f121x1"]
    plan = g.plan(workloads, 1)
    g.world(argparse.Namespace(name="s"), 1, {t for _, t, _ in plan}, plan)
    first_call = next(i for i, (e, _) in enumerate(events) if e == "call")
    late = [key for e, key in events[first_call:] if e == "draw"]
    assert events.index(("start", None)) > max(i for i, (e, _) in enumerate(events[:first_call]) if e == "draw")
    assert all("second look" in key for key in late), late
    assert sum(1 for e, _ in events if e == "call") >= len(plan)


def test_an_audit_that_does_not_end_fails_the_gate(monkeypatch):
    """tests/cheats/slows_its_audit: a source the audit reads in quadratic time; the gate runs the audit in a child
    process with a deadline (here 2 s) and fails the solution, never waits for it."""
    import types
    from harness.judge import gate_plan
    said = []
    monkeypatch.setattr(gate_plan, "AUDIT_S", 2)
    args = types.SimpleNamespace(no_audit=False, timeout_scale=1.0,
                                 solution=os.path.join(CHEATS, "slows_its_audit"))
    started = time.monotonic()
    gate = types.SimpleNamespace(args=args, add=lambda *a, **k: said.append(a), review=[])
    gate_plan.Gate.start_audit(gate)
    gate_plan.Gate.audit(gate)
    assert said == [("audit", "audit", "the audit did not finish in 2 s: a source that slows its reading is not "
                                       "audited")]
    assert time.monotonic() - started < 15


@pytest.mark.slow      # 28 s: a whole f121 gate; the estimate stays in the default tier (test_inputs, test_data_split)
def test_an_error_past_the_rule_within_the_release_check_fails_on_the_secret_tile(tiny_data, tmp_path):
    """tests/cheats/errs_past_the_rule.py: the release plus 3.3 times its own error, inside the release check's widened
    allowance and past the task's rule. With --fp32 tile (the GPUs' default) every long fresh draw's whole video
    passes its release check and fails the rms estimated with its secret fp32 tile (the tiny geometry's tile is its
    whole video, where the estimate is exact); the stored call fails its own fp32 check."""
    p, report, _ = gate(tiny_data, tmp_path, "tests/cheats/errs_past_the_rule.py", "--workloads", "f121x1",
                        "--fp32", "tile", "--no-audit")
    assert p.returncode == 1, p.stdout[-3000:]
    fails = failures(report)
    fresh = [n for n in fails if n.startswith("fresh f121")]
    assert len(fresh) == 2 and "fresh latents #1 x1" not in fails
    for name in fresh:
        status, reason = fails[name]
        assert status == "incorrect" and reason.startswith(
            "rms(d) over the video, estimated with the secret fp32 tile (rows 0-64, columns 0-96"), reason
    assert fails["f121x1"][1].startswith("rms(d)")
    for tile in (c["tile"] for c in report["checks"] if c["name"] in fresh):
        # the tiny geometry's tile is its whole video: the estimate is the rms itself
        assert tile["figures"]["estimated_rms"] == pytest.approx(tile["figures"]["rms"], rel=1e-6)
        assert tile["figures"]["estimated_rms"] > tile["allowance"]["rms"]


def test_a_tile_is_drawn_at_a_secret_place_uniform_over_the_grid():
    """Each draw's tile is TILE x TILE latent rows and columns (the grid where smaller) at a place drawn from the run's
    secret seed and the draw's key: every place occurs, and the same seed and key give the same tile."""
    import spec
    from harness.judge.fresh import TILE, Fresh
    fresh = Fresh(spec.FULL, "cpu", seed=7)
    tiles = [fresh.tile(f"f121/x1/{k}") for k in range(3000)]
    assert {(t.rows.hi - t.rows.lo, t.cols.hi - t.cols.lo) for t in tiles} == {(TILE, TILE)}
    assert {t.rows.lo for t in tiles} == set(range(44 - TILE + 1))
    assert {t.cols.lo for t in tiles} == set(range(78 - TILE + 1))
    assert Fresh(spec.FULL, "cpu", seed=7).tile("f121/x1/5") == tiles[5] != Fresh(spec.FULL, "cpu", seed=8).tile(
        "f121/x1/5")
    whole = Fresh(spec.TINY, "cpu", seed=7).tile("k")
    assert whole.whole and whole.label() == "rows 0-64, columns 0-96 of the video"


def test_how_the_gate_holds_a_long_fresh_draw_to_the_fp32_rule():
    """By default the whole video's fp32 decode on the CPU and a secret fp32 tile beside the release decode on GPUs;
    --fp32 chooses either; --release (GPUs only) drops the fp32 check. The choice reaches the judge's decode with the
    draw's key (the tile's place is drawn from it)."""
    import types
    from harness.judge import gate_plan
    cases = {(False, None, True): "video", (False, None, False): "tile", (False, "video", False): "video",
             (False, "tile", True): "tile", (True, None, False): "release", (True, "video", False): "release",
             (True, None, True): "video"}
    for (release, fp32, cpu), check in cases.items():
        assert gate_plan.fp32_check(types.SimpleNamespace(release=release, fp32=fp32), cpu) == check
    asked = []
    fresh = types.SimpleNamespace(give=lambda key: None, draw=lambda key, t: "z",
                                  full=lambda z, check, key: asked.append((check, key)) or ("ref", "allowance"))
    judge = types.SimpleNamespace(check="tile", fresh=fresh)
    assert gate_plan.Gate.case(judge, 31, "f121/x2/0") == ("z", "ref", "allowance")
    assert asked == [("tile", "f121/x2/0")]
