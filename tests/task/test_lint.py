"""ruff's small rule set (pyproject.toml: syntax errors, undefined and unused names, redefinitions) over the
repository, fixtures and recorded tools excepted."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ruff_finds_nothing():
    if subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True).returncode:
        if os.environ.get("CI"):
            pytest.fail("ruff is not installed (pip install -e '.[test]')")
        pytest.skip("ruff is not installed")
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-1000:]
