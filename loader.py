"""Load and build a solution: the public names of harness/load/solution.py, which holds the loader and the builder
(`describe`, `load`, `build`, `build_in_child`, `SolutionError`, ...), so that `import loader; loader.describe(path)`
works for users and tests. The harness itself imports harness.load.solution, never this module."""
from harness.load.solution import *  # noqa: F401,F403 (the names of __all__)

__all__ = ["ROOT", "MANIFEST_MAX", "KEYS", "LIST_MAX", "PATH_MAX", "NAME", "SolutionError", "Solution", "describe",
           "plain_name", "build_dir", "build", "load", "build_in_child"]
