"""`bench.py --report DIR` and `ci.py --report DIR`: a tiny run of a passing and a deliberately wrong solution, its
error maps where the fixture put the error, and the page rendered in headless Chromium (Debian's `chromium`, which
.ci/run installs): every picture loaded, the tables there, not a blank page; a picture taken away is noticed. Without
--report the maps go into a folder of the run's own, and without matplotlib only their pictures are missing."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKEN = os.path.join(ROOT, "tests", "broken")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def run(env, script, *args, timeout=600, cwd=ROOT):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), "--tiny", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def chromium(tmp_path, *args):
    """Headless Chromium on a fresh profile; skipped where it is not installed, a failure under CI."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    profile = tmp_path / f"chromium-{len(list(tmp_path.glob('chromium-*')))}"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120)


def rendered(tmp_path, index):
    """What the page's load script counted ({"pictures", "broken", "tables"}) and the DOM after it ran."""
    p = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", f"file://{index}")
    body = re.search(r"<body([^>]*)>", p.stdout)
    assert body, p.stdout[-2000:] + p.stderr[-2000:]
    counts = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    assert set(counts) == {"pictures", "broken", "tables"}, (body.group(0), p.stderr[-2000:])
    return {k: int(v) for k, v in counts.items()}, p.stdout


def check_page(tmp_path, folder):
    """The report in `folder` renders: every <img> loaded, its tables there, a screenshot that is not blank; with a
    picture taken away, the page counts it broken and says which."""
    index = os.path.join(folder, "index.html")
    sources = re.findall(r'<img src="([^"]+)"', open(index).read())
    assert sources and all(os.path.exists(os.path.join(folder, s)) for s in sources), sources
    counts, dom = rendered(tmp_path, index)
    assert counts["broken"] == 0 and counts["pictures"] == len(sources) and counts["tables"] >= 3, counts
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1800", f"file://{index}")
    import matplotlib.image
    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] >= 1800 and pixels.std() > 0.1 and (pixels[..., :3].mean(-1) < 0.5).mean() > 0.01
    copy = tmp_path / "broken-report"
    shutil.copytree(folder, copy)
    os.remove(copy / sources[-1])
    counts, dom = rendered(tmp_path, copy / "index.html")
    assert counts["broken"] == 1 and counts["pictures"] == len(sources) - 1, counts
    assert f"missing picture: {sources[-1]}" in dom
    return dom


@pytest.fixture(scope="module")
def bench_report(tiny_data, tmp_path_factory):
    """bench on f5x1: the reference and a solution that writes frame 2 where frame 1 belongs, with --maps."""
    folder = tmp_path_factory.mktemp("bench-report")
    p = run(tiny_data, "bench.py", "solutions/reference", os.path.join(BROKEN, "shifted_frame.py"), "--workloads",
            "f5x1", "--report", str(folder / "report"), "--maps", "--json", str(folder / "r.json"))
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    return p, json.loads((folder / "r.json").read_text()), str(folder / "report")


def test_bench_report_names_where_the_wrong_solution_is_wrong(bench_report):
    p, report, folder = bench_report
    wrong = report["solutions"]["shifted_frame"]["workloads"]["f5x1"]
    m = wrong["error_map"]
    assert wrong["status"] == "incorrect" and m["worst_frame"] == 1 and m["frames_over_runs"] == [[1, 1]], m
    assert os.path.exists(m["picture"]) and os.path.dirname(m["picture"]) == os.path.join(folder, "maps")
    assert wrong["calls"][-1]["error_map"]["words"] == m["words"]
    assert "where: " in p.stdout and "worst frame 1 (frame 1 of 4 of latent frame 1)" in p.stdout
    honest = report["solutions"]["reference"]["workloads"]["f5x1"]      # --maps: the passing one mapped too
    assert honest["passed"] and "no frame over the allowance" in honest["error_map"]["words"]
    page = open(os.path.join(folder, "index.html")).read()
    assert m["words"] in page and "Environment and provenance" in page
    assert (report["environment"]["commit"] or "") in page


def test_bench_report_renders_in_a_browser(bench_report, tmp_path):
    dom = check_page(tmp_path, bench_report[2])
    assert "shifted_frame f5x1" in dom and "reference: workloads" in dom


def test_bench_page_of_a_timed_run_in_a_new_folder(bench_report, tmp_path):
    """The page's own pictures (a roofline per timed solution) go into a folder it makes, maps or not."""
    from harness.report import html
    report = json.loads(json.dumps(bench_report[1]))
    report["solutions"]["reference"]["workloads"]["f5x1"].update(median_s=0.25, spread=0.01, n=3)   # as if timed
    index = html.bench_page(str(tmp_path / "new" / "report"), report, spec.TINY, True, None)
    assert os.path.exists(tmp_path / "new" / "report" / "roofline-reference.png")
    assert 'src="roofline-reference.png"' in open(index).read()


@pytest.mark.slow
def test_maps_without_a_report_go_into_a_folder_of_the_run(tiny_data, tmp_path):
    """Without --report a failing call's map is drawn into error-maps/<UTC time>-<pid>/ under the working directory,
    which the JSON's `picture` and the console name; a passing run without --maps makes no folder."""
    p = run(tiny_data, "bench.py", os.path.join(ROOT, "solutions", "reference"), "--workloads", "f1x1", cwd=tmp_path)
    assert p.returncode == 0 and not (tmp_path / "error-maps").exists(), p.stdout[-3000:] + p.stderr[-3000:]
    p = run(tiny_data, "bench.py", os.path.join(BROKEN, "shifted_frame.py"), "--workloads", "f5x1", "--json", "r.json",
            cwd=tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    m = json.loads((tmp_path / "r.json").read_text())["workloads"]["f5x1"]["error_map"]
    folder, = (tmp_path / "error-maps").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-\d+", folder.name) and m["worst_frame"] == 1, (folder, m)
    assert m["picture"] == f"error-maps/{folder.name}/shifted_frame-f5x1.png"
    assert (tmp_path / m["picture"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"error maps: 1 drawn in error-maps/{folder.name}/" in p.stdout


def test_report_flags_say_what_they_need(tiny_data, tmp_path):
    """Without matplotlib --report is refused; without --report the maps' words still come, and the console says
    that the pictures were not drawn and what is missing."""
    blocker = tmp_path / "matplotlib"       # an environment without the plot extra
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = dict(tiny_data, PYTHONPATH=str(tmp_path))
    for script in ("bench.py", "ci.py"):
        p = run(env, script, "solutions/reference", "--report", str(tmp_path / "r"))
        assert p.returncode in (2, 4) and "--report needs matplotlib (the plot extra)" in p.stderr, p.stderr[-2000:]
        assert not (tmp_path / "r").exists()
    p = run(env, "bench.py", os.path.join(BROKEN, "shifted_frame.py"), "--workloads", "f5x1", "--json", "r.json",
            cwd=tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    m = json.loads((tmp_path / "r.json").read_text())["workloads"]["f5x1"]["error_map"]
    assert m["picture"] is None and "worst frame 1" in m["words"] and "where: " in p.stdout
    assert "error maps: 1 not drawn: drawing needs matplotlib (the plot extra)" in p.stdout
    assert not (tmp_path / "error-maps").exists()


@pytest.mark.slow
def test_bench_report_of_timed_solutions(tiny_data, tmp_path):
    """Two honest solutions timed at world 2 (A/B verdict, rooflines, profiles) and a wrong seam row, all in a page."""
    folder = tmp_path / "report"
    p = run(tiny_data, "bench.py", "solutions/reference", "solutions/baseline", os.path.join(BROKEN, "wrong_seam.py"),
            "--workloads", "f121x2", "--warmup", "0", "--min-reps", "2", "--max-reps", "2", "--profile",
            str(tmp_path / "prof"), "--report", str(folder),
            "--json", str(tmp_path / "r.json"), timeout=1200)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    m = report["solutions"]["wrong_seam"]["workloads"]["f121x2"]["error_map"]
    assert m["rows"] == [[32, 32]] and m["rows_words"] == "row 32 = the seam between ranks 0 and 1", m
    assert "errors concentrate on row 32 = the seam between ranks 0 and 1" in p.stdout
    assert [c["solution"] for c in report["comparisons"]] == ["baseline"]
    for name in ("reference", "baseline"):
        assert (folder / f"roofline-{name}.png").exists() and (folder / f"scopes-{name}-f121x2.png").exists()
    dom = check_page(tmp_path, str(folder))
    assert "A/B verdicts" in dom and "Where the time goes" in dom


@pytest.mark.slow
def test_gate_report(tiny_data, tmp_path):
    """The gate of the wrong seam: world 1 passes, world 2's checks fail with the seam named, in a page."""
    folder = tmp_path / "report"
    p = run(tiny_data, "ci.py", os.path.join(BROKEN, "wrong_seam.py"), "--workloads", "f121x2", "--report",
            str(folder), "--json", str(tmp_path / "ci.json"), timeout=1200)
    report = json.loads((tmp_path / "ci.json").read_text())
    assert p.returncode == 1 and report["environment"]["solutions"]["wrong_seam"]["path"], p.stdout[-3000:]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["fresh latents #1 x1"]["status"] == "passed" and "error_map" not in checks["fresh latents #1 x1"]
    seam = spec.video_seams(2, spec.TINY)[0]
    for name in ("fresh latents #1 x2", "f121x2"):
        assert checks[name]["status"] == "incorrect" and checks[name]["error_map"]["rows"] == [[seam, seam]], name
    dom = check_page(tmp_path, str(folder))
    assert "the seam between ranks 0 and 1" in dom


def test_a_page_with_a_path_that_is_no_utf8_is_written(tmp_path):
    """A solution's path may hold bytes that are no UTF-8 (Python's surrogate escapes): the page shows them escaped
    (the report crashed with UnicodeEncodeError, leaving index.html.tmp)."""
    from harness.report import html
    path = html.page(str(tmp_path), "bench ref\udcff", ["<p>ref\udcff</p>"])
    assert os.listdir(tmp_path) == ["index.html"] and "ref\\udcff" in open(path, encoding="utf-8").read()
