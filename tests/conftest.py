"""Shared fixtures. The repository root is importable (spec, reference, loader, bench ...) from every test, and so is
tests/ (helpers, kernel_checks, conftest) from the test files in its subsystems' folders (tests/judge/, ...)."""
import os
import shutil
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
# The test folders (tests/audit/, tests/data/, ...) have no __init__.py: pytest imports each test file by its base
# name (unique across the folders), and a folder of tests never hides the repository's audit.py or data/.
for path in (TESTS, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """The environment of a command that sees the whole tiny data set, made once per test session."""
    root = tmp_path_factory.mktemp("tinydata")
    env = dict(os.environ, DATA=str(root))
    subprocess.run([sys.executable, "-m", "data.make", "--tiny"], cwd=ROOT, env=env, check=True, capture_output=True,
                   timeout=900)
    return env


def private_copy(data, tmp_path, monkeypatch):
    """A private copy of a made data set's folder, as $DATA (for tests that change it): its tiny geometry's folder."""
    shutil.copytree(data, tmp_path / "data")
    monkeypatch.setenv("DATA", str(tmp_path / "data"))
    return tmp_path / "data" / "tiny"
