"""Shared fixtures. The repository root is importable (spec, reference, loader, bench ...) from every test."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


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
