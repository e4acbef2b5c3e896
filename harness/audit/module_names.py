"""The modules the audit knows beyond harness/audit/rules.py's table, by top-level name: those a solution may import
(KNOWN_MODULES, the project's PROJECT) or may use only as the table allows (NAMED_ONLY), the harness's (HARNESS),
private or platform spellings of modules (MODULE_ALIASES), modules read again inside a longer dotted name
(SENSITIVE), and the libraries whose private names are findings (LIBRARIES)."""
from harness.audit.rules import RULE_MODULES

# Modules a solution may import beyond those that a rule names (whose members the table decides): what a decode
# needs. Any other module is foreign code: the audit does not know what it does.
KNOWN_MODULES = {"torch", "triton", "numpy", "math", "cmath", "functools", "itertools", "operator", "collections",
                 "typing", "dataclasses", "warnings", "contextlib", "enum", "abc", "numbers", "string", "re",
                 "__future__", "copy", "statistics", "fractions", "decimal", "bisect", "heapq", "array", "struct",
                 "diffusers", "einops", "time", "random", "json", "textwrap", "types", "weakref", "hashlib", "zlib",
                 "base64", "binascii", "logging"}
# Libraries whose private names are findings (the project's modules are audited through what they do instead).
LIBRARIES = ("torch", "triton", "numpy", "diffusers", "math", "functools", "itertools", "operator", "collections",
             "typing", "dataclasses", "warnings", "contextlib", "enum", "abc", "numbers", "string")

# The harness and the project, by top-level module name.
HARNESS = {"bench", "loader", "audit", "ci", "bounds", "data", "harness", "tests", "conftest"}
PROJECT = ("spec", "reference")   # the repository modules a solution may import

# Private or platform spellings of modules (of those the table names, most).
MODULE_ALIASES = {
    "posix": "os", "nt": "os", "posixpath": "os.path", "ntpath": "os.path", "genericpath": "os.path",
    "_io": "io", "_pyio": "io", "_pickle": "pickle", "_compat_pickle": "pickle", "_socket": "socket",
    "_ssl": "ssl", "_signal": "signal", "_ctypes": "ctypes", "_imp": "importlib", "_frozen_importlib": "importlib",
    "_frozen_importlib_external": "importlib", "_posixsubprocess": "subprocess", "_multiprocessing":
    "multiprocessing", "_sqlite3": "sqlite3", "_posixshmem": "mmap", "_tracemalloc": "tracemalloc",
    "_operator": "operator", "_winapi": "subprocess",
}
# Module names that, met inside a longer dotted name (`torch.os.system`, `self.os.environ`), are read again from
# there: packages re-export the modules they import.
SENSITIVE = {"os", "sys", "io", "subprocess", "pickle", "marshal", "shelve", "ctypes", "cffi", "importlib",
             "builtins", "socket", "shutil", "pathlib", "tempfile", "glob", "mmap", "threading", "_thread",
             "multiprocessing", "inspect", "gc", "asyncio", "atexit", "runpy", "pkgutil", "zipimport", "fcntl",
             "urllib", "http", "requests", "torch", "triton", "numpy", *MODULE_ALIASES}

# Modules the table names that are not KNOWN_MODULES: of these a solution uses only what an entry allows (a member no
# entry decides, `logging.config`, may turn text into any object).
NAMED_ONLY = RULE_MODULES - KNOWN_MODULES - {"builtins"}
