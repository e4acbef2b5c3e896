"""The honest corpus (tests/honest/, and the repository's diffusers solution): decoders written the way users write
them, each showing a pattern the audit notes but the gate must pass (docs/audit.md). Each passes bench and the gate
with no failing finding and no allowance comment: the CPU ones on the tiny geometry here, the GPU ones under
`-m gpu` (tests/gpu/test_gpu.py)."""
import json
import os
import subprocess
import sys

import pytest

import audit
import fixtures
from fixtures import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HONEST = os.path.join(ROOT, "tests", "honest")

# The corpus: tests/fixtures.py's honest entries that list the audit's review notes they must raise (`audit`: rules, at
# least); a solution (a path from the repository's root) -> its entry.
CORPUS = {f.path: f for f in FIXTURES if f.kind == fixtures.HONEST and f.audit is not None}


def files_of(path):
    path = os.path.join(ROOT, path)
    if os.path.isfile(path):
        return [path]
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


@pytest.mark.parametrize("solution", sorted(CORPUS))
def test_the_audit_only_notes_what_honest_code_does(solution):
    report = audit.audit(os.path.join(ROOT, solution))
    assert report.ok and not report.allowed, audit.format_report(report)
    assert set(CORPUS[solution].audit) <= {f.rule for f in report.notes}, audit.format_report(report)
    assert not any("audit: allow" in open(f, errors="replace").read() for f in files_of(solution))


def test_the_corpus_is_listed_once():
    on_disk = {os.path.join("tests", "honest", f) for f in os.listdir(HONEST)
               if not f.startswith(("_", ".")) and f != "README.md" and f != "__pycache__"}
    assert on_disk == {s for s in CORPUS if s.startswith("tests/honest/")}


# The default tier gates the module tree (the published decoder's patterns); the slow tier every solution (compiling
# and building take a minute or more each on a 2-core machine).
@pytest.mark.parametrize("solution", [s if CORPUS[s].tier == fixtures.DEFAULT else
                                      pytest.param(s, marks=pytest.mark.slow) for s in sorted(CORPUS)])
def test_the_gate_passes_honest_code(tiny_data, tmp_path, solution):
    if solution == "solutions/diffusers":
        pytest.importorskip("diffusers")
    out = tmp_path / "ci.json"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "ci.py"), os.path.join(ROOT, solution), "--tiny",
                        "--workloads", "f1x1", "--fresh-calls", "1", "--json", str(out)], cwd=tmp_path,
                       env=tiny_data, capture_output=True, text=True, timeout=900)
    record = json.loads(out.read_text())
    assert p.returncode == CORPUS[solution].ci.code and record["passed"], p.stdout[-3000:] + p.stderr[-2000:]
    assert set(CORPUS[solution].audit) <= {n["rule"] for n in record["review"]}


@pytest.mark.parametrize("workloads", ["f5x1", pytest.param("f121x4", marks=pytest.mark.slow)])
def test_bench_passes_honest_code(tiny_data, tmp_path, workloads):
    """Every solution of the corpus but the slow-to-compile ones and diffusers in one bench run (their groups alive
    at once); in the slow tier a timed clip at world 4 too (the plan of a timed workload, four ranks per group)."""
    solutions = [os.path.join(ROOT, s) for s in sorted(CORPUS) if CORPUS[s].bench]
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench.py"), *solutions, "--tiny", "--workloads",
                        workloads, "--min-reps", "2", "--max-reps", "2", "--warmup", "0", "--json", str(out)],
                       cwd=tmp_path, env=tiny_data, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    record = json.loads(out.read_text())
    assert all(r["passed"] for s in record["solutions"].values() for r in s["workloads"].values())
