"""What the judge imports from is importable in the ranks: a package a user installed with `pip install --target DIR`
and `PYTHONPATH=DIR` (harness/judge/rank_env.py import_paths), never the repository or the data."""
import os
import subprocess
import sys

from harness.judge import rank_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_package_on_the_judges_pythonpath_imports_in_every_rank(tiny_data, tmp_path):
    target = tmp_path / "target"
    (target / "wan_helpers").mkdir(parents=True)
    (target / "wan_helpers" / "__init__.py").write_text(
        "import reference\n\ndef decode(z, weights, out):\n    reference.decode_bf16(z, weights, out=out)\n")
    sol = tmp_path / "uses_a_package.py"
    sol.write_text("import wan_helpers\n\n\ndef run(z, weights, rank, world, pg, out):\n"
                   "    if rank == 0:\n        wan_helpers.decode(z, weights, out)\n")
    environ = dict(tiny_data, PYTHONPATH=os.pathsep.join([str(target), ROOT]))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench.py"), str(sol), "--tiny", "--workloads",
                        "f1x1"], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "load error" not in p.stdout


def test_the_repository_and_the_data_are_never_import_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("DATA", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    (tmp_path / "pkgs").mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, os.path.join(ROOT, "harness"), str(tmp_path / "data"),
                                                      str(tmp_path / "pkgs"), str(tmp_path / "missing"), ""]))
    paths = rank_env.import_paths()
    assert str(tmp_path / "pkgs") in paths
    assert not any(p.startswith((ROOT, str(tmp_path / "data"))) for p in paths), paths
    assert rank_env.rank_env(0, 1, 1, str(tmp_path), True, "d", "b", "pkg")["PYTHONPATH"].split(os.pathsep)[:2] == \
        ["pkg", paths[0]]
