"""The README and docs/ name only what exists: every repository path they quote in backticks is there."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                               if f.endswith(".md"))
TOP = {e for e in os.listdir(ROOT) if not e.startswith(".")}
# Placeholders and paths outside the repository: a solution or output folder of the reader's, the data folder.
PLACEHOLDER = re.compile(r"^(SOL|DIR|PATH|OUT|NAME|STAGE1|C1|C4|MAIN|PREV)\b|[$<>*{}]|^/|^~|^error-maps/")


def quoted_paths(text):
    """Backticked tokens that name a repository path: a top-level entry, then more of a path."""
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.rstrip(".,:;")
        first = token.split("/")[0]
        if "/" in token and first in TOP and not PLACEHOLDER.search(token):
            yield token.split("::")[0].split(":")[0]
        elif "/" not in token and token in TOP:
            yield token


@pytest.mark.parametrize("page", PAGES)
def test_every_quoted_path_exists(page):
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    missing = sorted({p for p in quoted_paths(text) if not os.path.exists(os.path.join(ROOT, p))})
    assert not missing, f"{page} names paths that do not exist: {missing}"


def test_the_readme_is_short():
    assert len(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()) <= 150
