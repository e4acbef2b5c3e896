"""tests/fixtures.py, the index of the fixtures: every fixture on disk is listed exactly once, every entry exists, and
each entry's fields are of the index's forms, name tests that exist, and give some test something to run."""
import collections
import glob
import os

import fixtures
from fixtures import FIXTURES, ROOT


def test_every_fixture_on_disk_is_listed_exactly_once():
    """The fixtures are the direct children of tests/cheats/, tests/cheats_gpu/, tests/broken/, tests/honest/ and
    tests/probes/ but README.md and names starting with '_' or '.' (fixtures.on_disk)."""
    listed = collections.Counter(f.path for f in FIXTURES)
    assert not [p for p, n in listed.items() if n > 1], "listed more than once"
    in_folders = {p for p in listed if p.startswith(tuple(folder + "/" for folder in fixtures.FOLDERS))}
    on_disk = set(fixtures.on_disk())
    assert not on_disk - in_folders, f"fixtures missing from tests/fixtures.py: {sorted(on_disk - in_folders)}"
    assert not in_folders - on_disk, f"entries of tests/fixtures.py not on disk: {sorted(in_folders - on_disk)}"


def test_every_entry_exists():
    assert not [f.path for f in FIXTURES if not os.path.exists(f.file)]
    # bench and ci name a solution by its file's or folder's name: one entry per name
    names = collections.Counter(f.name for f in FIXTURES)
    assert not [n for n, count in names.items() if count > 1]


def test_every_entry_is_of_the_index_forms():
    for f in FIXTURES:
        assert f.kind in (fixtures.CHEAT, fixtures.BROKEN, fixtures.HONEST, fixtures.PROBE), f
        assert f.layer in (fixtures.RUNTIME, fixtures.AUDIT, fixtures.BOTH), f
        assert f.tier in (fixtures.DEFAULT, fixtures.SLOW, fixtures.GPU, None), f
        assert f.pins and isinstance(f.see, tuple), f
        for bench in (f.bench, f.gpu):
            assert bench is None or isinstance(bench, fixtures.Bench) and bench.run in (
                fixtures.BESIDE, fixtures.PROFILED, fixtures.INPUTS, fixtures.ALONE, fixtures.CORPUS), f
        for gate in (f.ci, f.ci_runtime):
            assert gate is None or isinstance(gate, fixtures.Gate) and gate.code in range(7), f
        assert f.audit is None or isinstance(f.audit, tuple), f
        # what some test runs: a verdict the index's tests read, or tests of its own
        assert f.bench or f.ci or f.ci_runtime or f.audit is not None or f.see, f"no test runs {f.path}"


def test_the_tests_an_entry_names_exist():
    """`see` names tests as "module::function" (the module's file name, without its folder under tests/)."""
    missing = []
    for f in FIXTURES:
        for test in f.see:
            module, function = test.split("::")
            files = glob.glob(os.path.join(ROOT, "tests", "**", module + ".py"), recursive=True)
            if len(files) != 1 or f"\ndef {function}(" not in open(files[0], encoding="utf-8").read():
                missing.append((f.path, test))
    assert not missing, missing
