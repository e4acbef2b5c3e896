"""Static audit of a solution: named rules over every source, each with the reason it exists.

    python audit.py SOLUTION [--json PATH]     # findings, then the allowances used; exit 0 clean, 1 findings, 2 usage
    python audit.py --rules                    # the rules table

    from audit import audit
    report = audit("solutions/reference")      # report.ok, .findings, .allowed, .warnings

What is read, and how:
- Python (`.py`) by its syntax tree (`ast`): names are resolved through the file's imports and simple aliases
  (`t = torch`) to dotted names (`torch.load`), which the NAMES table maps to rules; bare builtins (`open`, `eval`)
  count unless a function binds the name locally. Imports between the solution's own modules are followed
  (`helper.torch.load` is `torch.load`), and so are re-exports (`spec.os`, `torch.os`); a module used as a value
  (an argument, an attribute) is itself a finding, since the audit cannot follow it. spec.py's and reference.py's
  functions that touch files or the environment (`spec.load_reference`) are banned through them: the audit reads
  those modules with the same rules. Comments never reach the tree, docstrings and bare string statements are
  skipped; other string constants are scanned for narrow formats and, when they look like C/C++ or PTX source
  (`;`, `{`, `#include`), by the C++ rules too.
- C/C++/CUDA sources and headers by text: line splices joined, `//` and `/* */` comments blanked (string literals
  kept, so PTX inside `asm("...")` is read), then regexes; the task's own `spec.RULES["file-io"]` among them
  ("include" on `#include` names, "text" on the code). Quoted includes are followed: a header inside the solution
  is audited whatever its suffix, one outside it is a finding.
- `solution.yml`: the C++ rules over its text (a `-DX=fopen` macro), `sources` and flags that reach outside the
  solution. Every other file in the solution directory must be a source, documentation, or bytecode identical to
  its source's.

Allowances: a reviewed false positive is silenced by a comment on the finding's line,
`# audit: allow RULE[, RULE] -- reason` (or `// ...` in C++); the reason is required, every allowance used is
listed, and one that silences nothing is a warning. A static check cannot see everything (values computed at run
time, gadgets inside third-party packages, device code reading memory it was not given): the runtime checks of
bench.py are the other half of the defence.
"""
import argparse
import ast
import builtins
import dataclasses
import importlib.util
import io
import json
import marshal
import os
import re
import sys
import tokenize

import loader
import spec

ROOT = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------------------------------------------
# The rules: name -> why it exists.

RULES = {
    "file-io": spec.RULES["file-io"]["why"],
    "network": "a solution talks to no other machine or process: a connection could fetch answers or report to an "
               "accomplice",
    "process": "work outside the calling thread (processes, threads, signal and exit hooks, finalizers, load-time "
               "constructors) can escape the timer, outlive run() or forge a rank's result",
    "environment": "environment variables and argv are the harness's channel, not an input: seeds, paths and flags "
                   "must not steer a solution",
    "foreign-code": "code the audit cannot read (ctypes, dlopen, importlib, exec/eval/compile of text, C++ built or "
                    "Python run from C++ at run time) would run unaudited",
    "monkeypatch": "changing another module's state (torch, time, builtins, spec, operator kernels) can fake "
                   "timings or checks and outlives the call",
    "harness-import": "solutions import spec and reference only: the harness (bench, loader, audit, ci, bounds, "
                      "data, tests) is the judge, not a library",
    "introspection": "frames, the garbage collector and namespaces-as-dicts reach the harness's objects (the "
                     "reference among them) past the interface",
    "dynamic-name": "a name built at run time (getattr of a computed string, `import *`, C++ token pasting, a "
                    "computed #include) hides what is called from a static check",
    "narrow-numerics": "the task fixes bf16 weights and activations with fp32 accumulation: fp8/fp6/fp4, MX/NV block "
                       "formats and int8/int4 quantized matmuls are narrower",
    "unaudited-file": "every file of a solution must be a source the audit reads: compiled modules, data files, "
                      "bytecode that differs from its source, sources outside the solution or that do not parse "
                      "would load unaudited",
    "allowance": "an allowance silences a reviewed false positive only with its reason; a malformed one, or one "
                 "naming no rule, is itself a finding",
}

PHRASE = {  # how a finding's reason names what the rule forbids
    "file-io": "touches files", "network": "opens connections",
    "process": "starts processes or threads, or acts outside the call",
    "environment": "reads or changes the environment", "foreign-code": "runs code the audit cannot read",
    "monkeypatch": "changes another module's state", "introspection": "reaches interpreter internals",
    "dynamic-name": "names its target at run time", "narrow-numerics": "is narrower than bf16",
    "harness-import": "is the harness", "unaudited-file": "is not audited",
}

HARNESS = {"bench", "loader", "audit", "ci", "bounds", "data", "tests", "conftest"}
PROJECT = ("spec", "reference")   # the repository modules a solution may import


def _rule(rule, *names):
    return {n: rule for n in names}


# Dotted names -> rule (None: allowed). The longest entry that covers a name decides: an exact entry, else
# `prefix.*` (members of prefix not listed), else `prefix` itself (a banned module bans its members, an allowed
# entry allows them).
NAMES = {
    # the modules and members that are fine, so that a wider entry below does not catch them
    **_rule(None, "os", "os.path", "sys", "io", "builtins.*", "io.BytesIO", "io.StringIO",
            "os.sep", "os.linesep", "os.name", "os.curdir", "os.pardir", "os.extsep", "os.altsep", "os.pathsep",
            "os.devnull", "os.cpu_count", "os.process_cpu_count", "os.sched_getaffinity", "os.getpid", "os.fspath",
            "os.fsencode", "os.fsdecode", "os.PathLike", "os.strerror", "os.urandom",
            "sys.version", "sys.version_info", "sys.hexversion", "sys.implementation", "sys.platform",
            "sys.byteorder", "sys.maxsize", "sys.maxunicode", "sys.float_info", "sys.int_info", "sys.hash_info",
            "sys.float_repr_style", "sys.stdout", "sys.stderr", "sys.getrecursionlimit", "sys.setrecursionlimit",
            "sys.getsizeof", "sys.getrefcount", "sys.getdefaultencoding", "sys.getfilesystemencoding",
            "sys.intern", "sys.is_finalizing", "sys.executable", "sys.exc_info", "sys.exception", "sys.flags"),
    # file access
    **_rule("file-io", "builtins.open", "builtins.input", "io.*", "os.*", "sys.stdin",
            "os.path.exists", "os.path.lexists", "os.path.isfile", "os.path.isdir", "os.path.islink",
            "os.path.ismount", "os.path.isjunction", "os.path.isdevdrive", "os.path.getsize", "os.path.getmtime",
            "os.path.getatime", "os.path.getctime", "os.path.samefile", "os.path.sameopenfile", "os.path.samestat",
            "os.path.realpath",
            "pathlib", "shutil", "tempfile", "glob", "mmap", "pickle", "shelve", "marshal", "dbm", "sqlite3",
            "fileinput", "filecmp", "zipfile", "tarfile", "gzip", "bz2", "lzma", "linecache", "fcntl", "pwd", "grp",
            "codecs.open", "tokenize.open", "logging.FileHandler", "logging.handlers", "logging.basicConfig",
            "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.fromfile", "numpy.memmap",
            "numpy.loadtxt", "numpy.savetxt", "numpy.genfromtxt", "numpy.fromregex", "numpy.lib.format",
            "numpy.lib.npyio", "numpy.DataSource",
            "torch.load", "torch.save", "torch.from_file", "torch.serialization", "torch.package", "torch.hub",
            "torch.jit.load", "torch.jit.save", "torch.distributed.checkpoint", "torch.distributed.FileStore",
            "torch.utils.tensorboard", "safetensors", "h5py", "dill", "cloudpickle", "joblib",
            # well-known readers in third-party packages (a static audit cannot list them all)
            "PIL.Image.open", "cv2.imread", "cv2.imwrite", "cv2.VideoCapture", "cv2.VideoWriter", "imageio",
            "torchaudio.load", "torchaudio.save", "pandas.read_csv", "pandas.read_pickle", "pandas.read_parquet",
            "huggingface_hub", "diffusers.utils.load_image", "diffusers.utils.load_video",
            "diffusers.utils.export_to_video", "diffusers.utils.export_to_gif"),
    # network
    **_rule("network", "socket", "ssl", "select", "selectors", "urllib", "urllib3", "http", "requests", "httpx",
            "aiohttp", "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib", "socketserver", "xmlrpc",
            "websocket", "websockets", "grpc", "zmq", "paramiko", "torch.distributed.rpc",
            "torch.distributed.TCPStore"),
    # processes, threads, work that runs later
    **_rule("process", "subprocess", "multiprocessing", "threading", "_thread", "concurrent", "asyncio", "signal",
            "atexit", "pty", "psutil", "sh", "pexpect", "ray", "dask", "webbrowser", "_xxsubinterpreters",
            "_interpreters", "interpreters", "weakref.finalize", "builtins.exit", "builtins.quit", "sys.exit",
            "torch.multiprocessing", "torch.jit.fork", "torch.jit._fork", "torch.distributed.elastic",
            "torch.distributed.launcher", "torch.distributed.run", "torch.distributed.launch",
            "torch.utils.data.DataLoader",
            "os.system", "os.popen", "os.fork", "os.forkpty", "os.execl", "os.execle", "os.execlp", "os.execlpe",
            "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle", "os.spawnlp",
            "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.posix_spawn",
            "os.posix_spawnp", "os.kill", "os.killpg", "os._exit", "os.abort", "os.wait", "os.wait3", "os.wait4",
            "os.waitpid", "os.waitid", "os.register_at_fork", "os.nice", "os.setsid", "os.setpgid",
            "os.pidfd_open", "os.startfile", "os.sched_setaffinity"),
    # environment
    **_rule("environment", "os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv",
            "os.path.expanduser", "os.path.expandvars", "sys.argv", "sys.orig_argv", "getpass", "dotenv"),
    # code the audit cannot read
    **_rule("foreign-code", "ctypes", "cffi", "_cffi_backend", "cppyy", "importlib", "imp", "pkgutil", "runpy",
            "zipimport", "code", "codeop", "site", "distutils", "setuptools", "py_compile", "compileall", "timeit",
            "doctest", "types.CodeType", "builtins.exec", "builtins.eval", "builtins.compile",
            "builtins.__import__", "torch.ops.load_library", "torch.classes.load_library",
            "torch.utils.cpp_extension", "numpy.ctypeslib", "torch.cuda.memory.CUDAPluggableAllocator",
            "torch.cuda.CUDAPluggableAllocator", "torch.cuda.memory.change_current_allocator",
            "torch.cuda.change_current_allocator", "sys.path", "sys.meta_path", "sys.path_hooks",
            "sys.path_importer_cache"),
    # other modules' state
    **_rule("monkeypatch", "builtins", "builtins.setattr", "builtins.delattr", "sys.modules", "sys.addaudithook",
            "sys.displayhook", "sys.excepthook", "sys.unraisablehook", "sys.breakpointhook",
            "torch.library.Library", "torch.library.impl", "torch.library._impl", "torch.library.register_kernel",
            "torch.library.fallthrough_kernel", "torch.overrides", "torch.utils._python_dispatch",
            "torch.set_default_dtype", "torch.set_default_device", "torch.set_default_tensor_type",
            "torch.set_float32_matmul_precision", "torch.set_flush_denormal", "torch.use_deterministic_algorithms",
            "torch._ops", "torch._library", "unittest", "mock", "pytest", "operator.setitem", "operator.delitem"),
    # interpreter internals
    **_rule("introspection", "gc", "inspect", "traceback", "dis", "tracemalloc", "faulthandler", "pdb", "bdb",
            "trace", "cProfile", "profile", "sys.*", "builtins.globals", "builtins.locals", "builtins.vars",
            "builtins.breakpoint"),
    # names chosen at run time
    **_rule("dynamic-name", "builtins.getattr", "operator.attrgetter", "operator.methodcaller"),
    # narrower than bf16
    **_rule("narrow-numerics", "torch.ao", "torch.quantization", "torchao", "bitsandbytes"),
}

# Private or platform spellings of the modules above.
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
             "urllib", "http", "requests", *MODULE_ALIASES}

# Attribute names that are findings on any object (and, as exact string constants, as getattr fodder).
ATTRS = {
    **_rule("introspection", "__globals__", "__code__", "__closure__", "cell_contents", "__subclasses__",
            "__self__", "__dict__", "__traceback__", "f_back", "f_locals", "f_globals", "f_builtins", "f_code",
            "tb_frame",
            "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code"),
    **_rule("monkeypatch", "__builtins__", "__setattr__", "__delattr__", "__torch_function__",
            "__torch_dispatch__", "py_impl", "py_kernels"),
    **_rule("dynamic-name", "__getattribute__"),
    **_rule("file-io", "__loader__", "__spec__", "tofile", "from_file", "read_text", "read_bytes", "write_text",
            "write_bytes", "cuModuleLoad", "from_pretrained", "save_pretrained"),
    **_rule("foreign-code", "load_library", "__import__"),
}
# torch's private switches of the dispatcher and of function/dispatch modes, on any object.
ATTR_PATTERN = re.compile(r"^_(dispatch_|set_torch_function|set_torch_dispatch|push_on_torch|pop_torch|"
                          r"enable_torch|disable_torch|python_dispatch)")
BIG_CONSTANT = 256 * 1024      # characters: a longer string or bytes constant is data, not code
BIG_FILE = 2 * 1024 * 1024     # bytes: a longer source is data, not code
NAME_RULES = {"__builtins__": "monkeypatch", "__loader__": "file-io", "__spec__": "file-io"}
DEF_RULES = {"__del__": "process", "__torch_function__": "monkeypatch", "__torch_dispatch__": "monkeypatch"}
MUTATORS = {"update", "clear", "pop", "popitem", "setdefault", "append", "extend", "insert", "remove", "discard",
            "__setitem__", "__delitem__"}
BUILTIN_NAMES = set(dir(builtins))

# Narrow formats. In Python identifiers `float4` is a dtype; in C++ it is CUDA's 4-vector, so the text pattern
# (also used for Python strings, which may hold CUDA source) names the formats by their exponent/mantissa split.
_NARROW_COMMON = (r"e4m3|e5m2|e2m1|e3m2|e2m3|e8m0|nvfp4|nvf4|mxfp|mxf[468]|f8f6f4|_scaled_mm|_int_mm|"
                  r"int[48]pack_mm|quantize_per_")
NARROW_PY = re.compile(r"(?i)(float8|fp8|float6|fp6|float4|fp4)(?!\d)|(?<![a-z0-9])q(u)?int\d|"
                       r"(?<![a-z0-9])u?int[2-7](?!\d)|" + _NARROW_COMMON)
NARROW_TEXT = re.compile(r"(?i)(fp8|fp6|fp4|float8)(?!\d)|__nv_fp|dp4a|dp2a|\.[su][48]\.[su][48]|\.b1\.b1|"
                         r"precision::(s4|u4|b1)|kind::i8|\bu?int[1-4]b_t\b|\bbin1_t\b|" + _NARROW_COMMON)

def _calls(names):
    """A regex for calls of C functions: bare, `::name(` or `std::name(`; not `obj.name(`, `p->name(`, `ns::name(`."""
    return r"(?:(?<![\w:])(?:std\s*)?::\s*|(?<![\w.>:]))(?:" + names + r")\s*\("


# C/C++/CUDA rules: (rule, "include" (the header name of #include lines) or "text" (the code), regex, reason).
_FILE_IO = spec.RULES["file-io"]
CPP_RULES = [
    ("file-io", "include", re.compile(_FILE_IO["include"]), "includes a file-access header"),
    ("file-io", "text", re.compile(_FILE_IO["text"]), "accesses a file (spec.RULES['file-io'])"),
    ("file-io", "include", re.compile(r"(^|/)(cufile\.h|dirent\.h|sys/stat\.h|sys/sendfile\.h|sys/inotify\.h)$"),
     "includes a file-access header"),
    ("file-io", "text", re.compile(r"#\s*embed\b|__has_embed|\bincbin\b"), "embeds a file at build time"),
    ("file-io", "text", re.compile(_calls(
        r"open|openat|open64|creat|read|write|pread64|pwrite64|close|lseek|unlink|unlinkat|rename|renameat2?|"
        r"truncate|ftruncate|mkdir|rmdir|opendir|readdir|stat|lstat|fstat|access|readlink|symlink|chdir|dup[23]?|"
        r"pipe2?|mkfifo|memfd_create|sendfile|tmpfile|tmpnam|mkstemp|mkdtemp")), "calls a POSIX file function"),
    ("file-io", "text", re.compile(r"\bcuFile\w*|\bcuModuleLoad\s*\(|\bcu(da)?LibraryLoadFromFile|\bcuLinkAddFile"),
     "loads a file through CUDA"),
    ("process", "include", re.compile(r"(^|/)(thread|future|pthread\.h|unistd\.h|spawn\.h|signal\.h|csignal|"
                                      r"sys/wait\.h|sys/syscall\.h|sys/ptrace\.h)$"),
     "includes a process or thread header"),
    ("process", "text", re.compile(
        r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_\w+|" + _calls(
            r"system|popen|fork|vfork|execl|execle|execlp|execv|execve|execvp|execvpe|fexecve|posix_spawnp?|kill|"
            r"killpg|signal|sigaction|atexit|at_quick_exit|on_exit|daemon|_exit|_Exit|quick_exit") +
        r"|\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|"
        r"__attribute__\s*\(\(\s*(constructor|destructor)|\[\[\s*gnu\s*::\s*(constructor|destructor)|"
        r"\.(init_array|fini_array|ctors|dtors)\b"),
     "starts processes or threads, or runs code outside the call"),
    ("environment", "text", re.compile(r"\b(getenv|secure_getenv|setenv|putenv|unsetenv|clearenv|environ|"
                                       r"__environ)\b"), "reads or changes the environment"),
    ("network", "include", re.compile(r"(^|/)(sys/socket\.h|netinet/.*|arpa/inet\.h|netdb\.h|sys/un\.h|curl/.*)$"),
     "includes a network header"),
    ("network", "text", re.compile(_calls(r"socket|getaddrinfo|gethostbyname|inet_pton|inet_addr") +
                                   r"|\bcurl_\w+"), "opens connections"),
    ("foreign-code", "include", re.compile(r"(^|/)(dlfcn\.h|windows\.h|pybind11/embed\.h|pybind11/eval\.h|nvrtc\.h|"
                                           r"nvJitLink\.h)$"), "includes a dynamic-loading or JIT header"),
    ("foreign-code", "text", re.compile(
        r"\b(dlopen|dlmopen|dlsym|dlvsym|LoadLibrary\w*|GetProcAddress|cdll|CDLL)\b|"
        r"\bPy(Import|Run|Eval)_\w+|\bPy_CompileString\w*|\bPyObject_(GetAttr|SetAttr|GenericGetAttr)\w*|"
        r"\bmodule_?\s*::\s*import\b|\b(py|pybind11)\s*::\s*(eval|exec|eval_file|globals)\b|\.attr\s*\(|"
        r"\bnvrtc\w+|\bnvJitLink\w+|\bcuModuleLoadData\w*|\bcuLinkCreate\w*"),
     "loads code at run time or reaches Python from C++"),
    ("monkeypatch", "text", re.compile(
        r"\bTORCH_LIBRARY(_IMPL|_FRAGMENT)?\s*\(\s*(aten|prims?|c10d|_c10d_functional)\b|\bc10\s*::\s*Dispatcher\b|"
        r"\bregisterFallback\b|\b(mprotect|mremap|process_vm_readv|process_vm_writev|ptrace|dl_iterate_phdr)\b|"
        r"--wrap\b|\b__libc_\w+"), "overrides operators or patches the process's code or memory"),
    ("narrow-numerics", "text", NARROW_TEXT, "uses a number format narrower than bf16"),
]
CPP_ONLY_RULES = [  # not applied to source text inside Python strings
    ("dynamic-name", "text", re.compile(r"##"), "token pasting builds identifiers the audit cannot read"),
]
_INCLUDE = re.compile(r"(?m)^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*(.*)$")
_ALLOW = re.compile(r"audit:\s*allow\b(?P<body>.*)$")

PY_SUFFIX = (".py",)
YML_SUFFIX = (".yml", ".yaml")
CPP_SUFFIX = (".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp", ".cxx", ".hxx", ".hh", ".inl", ".ipp", ".tcc",
              ".ptx", ".s", ".S")
DOC_SUFFIX = (".md", ".txt", ".rst")
DOC_NAMES = ("LICENSE", "LICENCE", "README", "NOTICE", "AUTHORS", ".gitignore")


# ---------------------------------------------------------------------------------------------------------------
# The report.

@dataclasses.dataclass
class Finding:
    file: str           # relative to the solution directory (or the file's name, for a one-file solution)
    line: int           # 1-based; 0 for a whole file
    rule: str
    reason: str
    text: str = ""      # the source line
    allowance: str = ""  # for findings in Report.allowed: the allowance comment's reason


@dataclasses.dataclass
class Report:
    path: str
    files: list
    findings: list
    allowed: list
    warnings: list      # unused allowances: listed, not failures

    @property
    def ok(self):
        return not self.findings

    def to_json(self):
        return {"solution": self.path, "ok": self.ok, "files": self.files,
                "findings": [dataclasses.asdict(f) for f in self.findings],
                "allowed": [dataclasses.asdict(f) for f in self.allowed],
                "warnings": [dataclasses.asdict(f) for f in self.warnings], "rules": RULES}


class UsageError(ValueError):
    """The path is not a solution (a directory with solution.py, or a .py file)."""


class _Unit:
    """One file's findings and allowance comments."""

    def __init__(self, rel, text=""):
        self.rel, self.lines = rel, text.splitlines()
        self.findings, self.comments = [], []   # comments: (line, text) of every comment, for allowances
        self.seen = set()

    def add(self, line, rule, reason):
        if (line, rule) not in self.seen:       # one finding per rule and line
            self.seen.add((line, rule))
            text = self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""
            self.findings.append(Finding(self.rel, line, rule, reason, text))


# ---------------------------------------------------------------------------------------------------------------
# Dotted names: normalising re-exports and looking them up.

def _lookup(q):
    """(entry, rule) of the NAMES entry that decides dotted name q; (None, None) when none does."""
    parts = q.split(".")
    for i in range(len(parts), 0, -1):
        p = ".".join(parts[:i])
        if i == len(parts):
            if p in NAMES:
                return p, NAMES[p]
        elif p + ".*" in NAMES:
            return p + ".*", NAMES[p + ".*"]
        elif p in NAMES:
            return p, NAMES[p]
    return None, None


class _Modules:
    """The solution's own Python modules, for names imported between them (`from . import helper`): each file is
    `sol:N`, with its alias map, so that `helper.torch.load` reads as `torch.load`."""

    def __init__(self, files=(), base=""):
        self.ids = {f: f"sol:{i}" for i, f in enumerate(files)}
        self.shown = {m: os.path.splitext(os.path.relpath(f, base))[0].replace(os.sep, ".")
                      for f, m in self.ids.items()}
        self.aliases = {}           # sol:N -> that file's alias map
        self.module_values = set()  # dotted names known to be modules (plain imports, the solution's modules)

    def relative(self, file, level, module, name):
        """The dotted name `from <level dots><module> import <name>` binds in `file`."""
        base = os.path.dirname(file)
        for _ in range(level - 1):
            base = os.path.dirname(base)
        target = os.path.join(base, *module.split(".")) if module else base
        for sub in (os.path.join(target, name + ".py"), os.path.join(target, name, "__init__.py")):
            if sub in self.ids:
                return self.ids[sub]
        for mod in (target + ".py", os.path.join(target, "__init__.py")):
            if mod in self.ids:
                return f"{self.ids[mod]}.{name}"
        return "sol:?." + name      # not a Python file of the solution (a compiled module is reported anyway)

    def show(self, q):
        head = q.split(".")[0]
        return q.replace(head, self.shown[head], 1) if head in self.shown else q


_MODULES = _Modules()     # the solution being audited (audit() sets it)


def _expand(q, depth=0):
    """The dotted names q stands for: private spellings rewritten (`posix.system` -> `os.system`), re-exports of
    the project's and the solution's modules followed (`spec.os` -> `os`, `helper.torch` -> `torch`)."""
    parts = q.split(".")
    head, rest = parts[0], parts[2:]
    if depth > 8:
        return {q}
    if head in MODULE_ALIASES:
        return _expand(".".join([MODULE_ALIASES[head]] + parts[1:]), depth + 1)
    if head in PROJECT and len(parts) > 1 and parts[1] in _project(head).aliases:
        return _expand(".".join([_project(head).aliases[parts[1]]] + rest), depth + 1)
    if head in _MODULES.aliases and len(parts) > 1 and parts[1] in _MODULES.aliases[head]:
        return {e for t in _MODULES.aliases[head][parts[1]] for e in _expand(".".join([t] + rest), depth + 1)}
    return {q}


def _verdict(q, suffixes_from=1):
    """(rule, reason) for dotted name q, or None: q itself, then the tails of q that start at a sensitive module
    name (`torch.os.system` is `os.system`)."""
    parts = q.split(".")
    candidates = [q] + [".".join(parts[i:]) for i in range(suffixes_from, len(parts)) if parts[i] in SENSITIVE]
    whole = _expand(q)
    for c in (e for c in candidates for e in sorted(_expand(c))):
        head = c.split(".")
        if head[0] in PROJECT:
            if len(head) > 1 and head[1] in _project(head[0]).tainted:
                rule, where = _project(head[0]).tainted[head[1]]
                return rule, f"`{'.'.join(head[:2])}` {PHRASE[rule]} ({where})"
            continue
        if head[0].startswith("sol:"):
            continue        # the solution's own functions and classes: audited where they are defined
        entry, rule = _lookup(c)
        if rule:
            shown = f"`{_MODULES.show(q)}`" if c == q else f"`{_MODULES.show(q)}` (`{c}`)"
            return rule, f"{shown} {PHRASE[rule]}"
        if entry is not None and c in whole:
            return None      # explicitly allowed (os.path.join): its tails are not read again
    return None


# ---------------------------------------------------------------------------------------------------------------
# Python: the syntax-tree visitor.

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _inside(scope, child, grandchild):
    """Whether `child` (a direct child of `scope`, with `grandchild` below it) is evaluated in scope's namespace:
    a function's body (not its decorators or defaults), a lambda's body, all of a comprehension but its first
    iterable."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return any(child is s for s in scope.body)
    if isinstance(scope, ast.Lambda):
        return child is scope.body
    if isinstance(scope, _COMPS):
        return child is not scope.generators[0] or grandchild is not child.iter
    return False


def _bound_names(scope):
    """The names a function, lambda or comprehension binds in its own namespace (global names excluded)."""
    names, declared_global = set(), set()
    if isinstance(scope, _COMPS):
        for g in scope.generators:
            names |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        return names
    a = scope.args
    names |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
    if isinstance(scope, ast.Lambda):
        return names
    todo = list(scope.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            todo += node.decorator_list + (node.bases + [k.value for k in node.keywords]
                                           if isinstance(node, ast.ClassDef) else
                                           node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if isinstance(node, ast.Lambda):
            todo += node.args.defaults + [d for d in node.args.kw_defaults if d]
            continue
        if isinstance(node, _COMPS):   # only a walrus inside binds here
            names |= {n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)}
            todo.append(node.generators[0].iter)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.Global):
            declared_global |= set(node.names)
        todo += list(ast.iter_child_nodes(node))
    return names - declared_global


def _root(node):
    """The innermost object of `a.b[c].d()` -style expressions."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _const_str(node):
    """The value of a string expression built from constants only (`"fo" + "pen"`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _const_str(node.left), _const_str(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)
    return None


def _looks_like_source(s):
    return ";" in s or "{" in s or "#include" in s or "#define" in s


class _Python(ast.NodeVisitor):
    """Report a Python file's findings into a unit. In project mode (spec.py, reference.py) it also records which
    top-level function each finding is in and which module-level names each function uses."""

    def __init__(self, unit, tree, project=False, file=None):
        self.unit, self.tree, self.project, self.file = unit, tree, project, file
        self.parent, self.locals_of, self.skip = {}, {}, set()
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
            body = getattr(node, "body", None)
            if isinstance(body, list):   # docstrings and bare string statements are prose, not values
                self.skip |= {id(s.value) for s in body
                              if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}
        self.aliases = self._aliases()
        self.by_function, self.uses = {}, {}   # project mode

    # --- names ---------------------------------------------------------------------------------------------
    def is_local(self, name, node):
        """Whether `name` at `node` is bound by an enclosing function (so never falls through to builtins)."""
        grandchild, child, scope = None, node, self.parent.get(node)
        while scope is not None:
            if isinstance(scope, _SCOPES) and _inside(scope, child, grandchild):
                if id(scope) not in self.locals_of:
                    self.locals_of[id(scope)] = _bound_names(scope)
                if name in self.locals_of[id(scope)]:
                    return True
            grandchild, child, scope = child, scope, self.parent.get(scope)
        return False

    def _aliases(self):
        """name -> dotted names it may stand for: imports, then `x = <dotted>` assignments, to a fixed point."""
        aliases, pairs = {}, []
        self.module_values = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    aliases.setdefault(name, set()).add(a.name if a.asname else name)
                    self.module_values |= {a.name} if a.asname else {name, a.name}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        aliases.setdefault(a.asname or a.name, set()).add(f"{node.module}.{a.name}")
            elif isinstance(node, ast.ImportFrom) and self.file:     # the solution's own modules
                for a in node.names:
                    target = _MODULES.relative(self.file, node.level, node.module, a.name)
                    aliases.setdefault(a.asname or a.name, set()).add(target)
                    if target.count(".") == 0:
                        self.module_values.add(target)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                for t in getattr(node, "targets", None) or [node.target]:
                    pairs += self._pairs(t, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                    and isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
                pairs += [(node.target, v) for v in node.iter.elts]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                positional = a.posonlyargs + a.args
                pairs += [(ast.Name(p.arg), d) for p, d in zip(positional[len(positional) - len(a.defaults):],
                                                                  a.defaults)]
                pairs += [(ast.Name(p.arg), d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        self.aliases = aliases
        changed = True
        while changed:
            changed = False
            for target, value in pairs:
                if isinstance(target, ast.Name):
                    new = self.qualify(value) - aliases.get(target.id, set())
                    if new:
                        aliases.setdefault(target.id, set()).update(new)
                        changed = True
        return aliases

    def _pairs(self, target, value):
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            return [p for t, v in zip(target.elts, value.elts) for p in self._pairs(t, v)]
        return [(target, value)] if isinstance(target, ast.Name) else []

    def qualify(self, node):
        """The dotted names an expression may stand for (empty when it is not a module or a module's member)."""
        if isinstance(node, ast.Name):
            out = set(self.aliases.get(node.id, ()))
            if node.id in BUILTIN_NAMES and (node not in self.parent or not self.is_local(node.id, node)):
                out.add("builtins." + node.id)
            return out
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.qualify(node.value)}
        if isinstance(node, ast.Call) and self._is_builtin(node.func, "getattr") and len(node.args) >= 2:
            name = _const_str(node.args[1])
            if name is not None:
                return {f"{q}.{name}" for q in self.qualify(node.args[0])}
        return set()

    def is_module(self, node):
        """Whether an expression is (known to be) a module."""
        known = self.module_values | _MODULES.module_values
        return any(e in known for q in self.qualify(node) for e in _expand(q))

    def module_as_value(self, node):
        """A module used as a value (an argument, an attribute or class attribute, a container element, a return
        value) escapes the name tracking; plain aliases (`t = torch` in a function or module) are followed."""
        p = self.parent.get(node)
        g = self.parent.get(p)
        if isinstance(p, ast.Call):
            ok = node is p.func or (p.args and node is p.args[0] and (self._is_builtin(p.func, "getattr")
                                                                      or self._is_builtin(p.func, "hasattr")))
        elif isinstance(p, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            targets = getattr(p, "targets", None) or [p.target]
            ok = all(isinstance(n, ast.Name) for t in targets for n in ([t] if isinstance(t, ast.Name) else
                                                                        getattr(t, "elts", [t]))) \
                and not isinstance(g, ast.ClassDef)
        elif isinstance(p, (ast.Tuple, ast.List)):
            ok = (isinstance(g, (ast.For, ast.AsyncFor, ast.comprehension)) and p is g.iter
                  and isinstance(g.target, ast.Name)) or \
                 (isinstance(g, ast.Assign) and p is g.value and not isinstance(self.parent.get(g), ast.ClassDef)
                  and all(isinstance(t, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in t.elts)
                          for t in g.targets))
        else:
            ok = isinstance(p, (ast.Compare, ast.arguments, ast.Expr))
        if not ok and self.is_module(node):
            self.add(node, "dynamic-name", f"the module `{_MODULES.show(ast.unparse(node))}` used as a value: the "
                                           f"audit cannot follow it further")

    def _is_builtin(self, node, name):
        return isinstance(node, ast.Name) and node.id == name and f"builtins.{name}" in self.qualify(node)

    # --- reporting -----------------------------------------------------------------------------------------
    def add(self, node, rule, reason):
        line = getattr(node, "lineno", 1)
        self.unit.add(line, rule, reason)
        if self.project:
            top = self._top(node)
            if top:
                self.by_function.setdefault(top, []).append((rule, f"{os.path.basename(self.unit.rel)}:{line}: "
                                                                   f"{reason}"))

    def _top(self, node):
        while node in self.parent and not isinstance(self.parent[node], ast.Module):
            node = self.parent[node]
        return node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None

    def check_dotted(self, node, quals):
        for q in sorted(quals):
            v = _verdict(q)
            if v:
                self.add(node, *v)
                return True
        return False

    def check_identifier(self, node, name):
        if name and NARROW_PY.search(name):
            self.add(node, "narrow-numerics", f"`{name}` names a number format narrower than bf16")

    def check_store(self, node, target, how="assigns"):
        """A store into an attribute or item of another module's object is a monkeypatch."""
        root = _root(target)
        shown = ast.unparse(target)[:80]
        if isinstance(root, ast.Name):
            quals = self.qualify(root)
            if quals:
                self.add(node, "monkeypatch", f"{how} `{shown}`, state of `{_MODULES.show(sorted(quals)[0])}`")
        elif not isinstance(root, ast.Name):
            self.add(node, "monkeypatch", f"{how} `{shown}` through an expression the audit cannot trace")

    def check_string(self, node, s):
        if len(s) > BIG_CONSTANT:
            self.add(node, "unaudited-file", f"a {len(s)}-character constant is data the audit cannot read")
        if NARROW_TEXT.search(s):
            self.add(node, "narrow-numerics", f"the string {s[:40]!r} names a number format narrower than bf16")
        rule = ATTRS.get(s) or NAME_RULES.get(s)
        if rule:
            self.add(node, rule, f"the string {s!r} names `{s}`, which {PHRASE[rule]}")
        if _looks_like_source(s):
            for line, rule, reason, _ in _scan_cpp(s, CPP_RULES)[0]:
                if rule != "narrow-numerics":
                    self.unit.add(node.lineno + line - 1, rule, f"source text in a string {reason}")
                    if self.project and self._top(node):
                        self.by_function.setdefault(self._top(node), []).append((rule, reason))

    # --- visitors ------------------------------------------------------------------------------------------
    def visit_Import(self, node):
        for a in node.names:
            self.check_identifier(node, a.asname)
            self._import(node, a.name)

    def visit_ImportFrom(self, node):
        module = "." * node.level + (node.module or "")
        for a in node.names:
            self.check_identifier(node, a.asname or a.name)
            if a.name == "*":
                self.add(node, "dynamic-name", f"`from {module} import *` binds names the audit cannot see")
            if not node.level:   # the solution's own modules are audited themselves, and followed by aliases
                self._import(node, node.module if a.name == "*" else f"{node.module}.{a.name}")

    def _import(self, node, dotted):
        self.check_identifier(node, dotted)
        top = dotted.split(".")[0]
        if top in HARNESS:
            self.add(node, "harness-import", f"imports `{dotted}`, part of the harness")
        else:
            v = _verdict(dotted)
            if v:
                self.add(node, *v)

    def visit_Name(self, node):
        self.check_identifier(node, node.id)
        if node.id in NAME_RULES:
            rule = NAME_RULES[node.id]
            self.add(node, rule, f"`{node.id}` {PHRASE[rule]}")
        if isinstance(node.ctx, ast.Load):
            self.check_dotted(node, self.qualify(node))
            self.module_as_value(node)
        if self.project and isinstance(node.ctx, ast.Load):
            top = self._top(node)
            if top:
                self.uses.setdefault(top, set()).add(node.id)

    def visit_Attribute(self, node):
        chain, root = [], node          # the whole chain is judged here, at its outermost attribute
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        chain.reverse()
        for attr in chain:
            self.check_identifier(node, attr)
            if attr in ATTRS:
                self.add(node, ATTRS[attr], f"`.{attr}` {PHRASE[ATTRS[attr]]}")
            elif ATTR_PATTERN.match(attr):
                self.add(node, "monkeypatch", f"`.{attr}` switches torch's dispatcher")
        found = self.check_dotted(node, self.qualify(node))
        if not found:                   # `self.os.environ`, `f().os.system`: the tails from a module name on
            head = [root.id] if isinstance(root, ast.Name) else []
            dotted = ".".join(head + chain)
            v = _verdict(dotted, suffixes_from=1 if head else 0)
            if v and not self.qualify(root):
                self.add(node, *v)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node, node, "assigns" if isinstance(node.ctx, ast.Store) else "deletes")
        else:
            self.module_as_value(node)
        if isinstance(root, ast.Name):
            self.check_identifier(root, root.id)
            if root.id in NAME_RULES:
                self.add(root, NAME_RULES[root.id], f"`{root.id}` {PHRASE[NAME_RULES[root.id]]}")
            if self.project:
                top = self._top(node)
                if top:
                    self.uses.setdefault(top, set()).add(root.id)
        else:
            self.visit(root)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node, node, "assigns" if isinstance(node.ctx, ast.Store) else "deletes")
        self.generic_visit(node)

    def visit_Call(self, node):
        f = node.func
        if self._is_builtin(f, "getattr"):
            name = _const_str(node.args[1]) if len(node.args) >= 2 else None
            if name is None:
                self.add(node, "dynamic-name", "getattr with a name computed at run time")
            else:
                self.check_dotted(node, self.qualify(node))
                if name in ATTRS:
                    self.add(node, ATTRS[name], f"getattr of `{name}` {PHRASE[ATTRS[name]]}")
            self._visit_args(node)
            return
        if self._is_builtin(f, "setattr") or self._is_builtin(f, "delattr"):
            if node.args:
                self.check_store(node, node.args[0], f"calls {f.id} on")
            self._visit_args(node)
            return
        if isinstance(f, ast.Attribute) and f.attr in MUTATORS and isinstance(f.value, (ast.Attribute, ast.Subscript)):
            quals = self.qualify(_root(f.value))
            if quals:
                self.add(node, "monkeypatch", f"`{ast.unparse(f)[:80]}` mutates state of "
                                              f"`{_MODULES.show(sorted(quals)[0])}`")
        self.generic_visit(node)

    def _visit_args(self, node):
        for a in node.args + node.keywords:
            self.visit(a)

    def _visit_def(self, node):
        self.check_identifier(node, node.name)
        if node.name in DEF_RULES:
            rule = DEF_RULES[node.name]
            self.add(node, rule, f"defines `{node.name}`, which {PHRASE[rule]}")
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_def

    def visit_ClassDef(self, node):
        self.check_identifier(node, node.name)
        self.generic_visit(node)

    def visit_arg(self, node):
        self.check_identifier(node, node.arg)
        self.generic_visit(node)

    def visit_keyword(self, node):
        self.check_identifier(node, node.arg)
        self.generic_visit(node)

    def visit_Constant(self, node):
        if id(node) in self.skip:
            return
        if isinstance(node.value, str):
            self.check_string(node, node.value)
        elif isinstance(node.value, bytes):
            self.check_string(node, node.value.decode("latin-1"))

    def visit_BinOp(self, node):
        s = _const_str(node)
        if s is not None and not (isinstance(self.parent.get(node), ast.BinOp) and _const_str(self.parent[node])):
            self.check_string(node, s)    # the whole of "fo" + "pen"
        self.generic_visit(node)

    def visit_JoinedStr(self, node):
        s = _const_str(node)
        if s is not None:
            self.check_string(node, s)
        else:
            self.generic_visit(node)


def _python_comments(data):
    """(line, text) of every comment of a Python source (tokenize: never inside strings)."""
    out = []
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        pass
    return out


def _decode_python(data):
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def _parse_python(unit, data, project=False, file=None):
    """The visitor of a Python source, its aliases resolved but not yet visited; None when it does not parse."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        unit.add(getattr(e, "lineno", None) or 1, "unaudited-file",
                 f"does not parse, so it cannot be audited: {type(e).__name__}: {e}")
        return None
    unit.comments += _python_comments(data)
    try:
        return _Python(unit, tree, project, file)
    except RecursionError:
        unit.add(1, "unaudited-file", "nested too deeply for the audit to read it all")
        return None


# ---------------------------------------------------------------------------------------------------------------
# The repository modules a solution may import: their functions that do what a solution may not are banned
# through them too (`spec.load_reference` reads the references).

@dataclasses.dataclass
class _ProjectModule:
    aliases: dict       # module-level import name -> dotted module name
    tainted: dict       # function name -> (rule, where)


_PROJECT_CACHE = {}


def _project(name):
    if name in _PROJECT_CACHE:
        return _PROJECT_CACHE[name]
    _PROJECT_CACHE[name] = _ProjectModule({}, {})     # a cycle sees an empty module, not a recursion
    path = os.path.join(ROOT, f"{name}.py")
    with open(path, "rb") as f:
        data = f.read()
    unit = _Unit(f"{name}.py", _decode_python(data))
    visitor = _parse_python(unit, data, project=True)
    module = _ProjectModule({}, {})
    if visitor is not None:
        visitor.visit(visitor.tree)
        for stmt in visitor.tree.body:
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    module.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
                for a in stmt.names:
                    module.aliases[a.asname or a.name] = f"{stmt.module}.{a.name}"
        # Harness code may set torch flags inside a restoring context (reference.fp32_exact), or pass modules
        # around: what taints a function is what it does (files, environment, processes ...), not its style.
        for fn, found in visitor.by_function.items():
            found = [(r, w) for r, w in found if r not in ("monkeypatch", "dynamic-name")]
            if found:
                module.tainted[fn] = found[0]
        functions = {s.name for s in visitor.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        changed = True
        while changed:      # a function that calls a tainted one is tainted
            changed = False
            for fn in functions - set(module.tainted):
                callee = next((u for u in sorted(visitor.uses.get(fn, ())) if u in module.tainted), None)
                if callee:
                    module.tainted[fn] = (module.tainted[callee][0], f"through `{callee}`: {module.tainted[callee][1]}")
                    changed = True
    _PROJECT_CACHE[name] = module
    return module


# ---------------------------------------------------------------------------------------------------------------
# C/C++/CUDA: text, comments blanked.

def _strip_cpp(text):
    """(code, line_of, comments): the text with line splices joined and comments blanked (string literals kept),
    the original line of every character of code, and (line, text) of every comment.

    A `//` comment ends at the first splice as well as at the newline, so the audit never takes for a comment what
    a compiler might read as code."""
    chars, line_of, splice = [], [], set()
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "\r" and j + 1 < n and text[j + 1] == "\n":
                j += 1
            if j < n and text[j] == "\n":
                line += 1
                i = j + 1
                splice.add(len(chars))
                continue
        chars.append(c)
        line_of.append(line)
        if c == "\n":
            line += 1
        i += 1
    code, comments = chars, []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        nxt = code[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = i + 2
            while j < n and code[j] != "\n" and j not in splice:
                j += 1
            comments.append((line_of[i], "".join(code[i:j])))
            for k in range(i, j):
                code[k] = " "
            i = j
        elif c == "/" and nxt == "*":
            j = i + 2
            while j < n and not (code[j] == "*" and j + 1 < n and code[j + 1] == "/"):
                j += 1
            end = min(j + 2, n)
            start = i
            for k in range(i, end + 1):      # one comment entry per line it covers
                if k == end or code[k] == "\n":
                    comments.append((line_of[start], "".join(code[start:k])))
                    start = k + 1
            for k in range(i, end):
                if code[k] != "\n":
                    code[k] = " "
            i = end
        elif c == '"':
            raw = re.search(r"(?:^|[^\w])(?:u8|u|U|L)?R$", "".join(code[max(0, i - 5):i]))
            if raw:
                k = i + 1
                while k < n and k - i <= 17 and code[k] not in "(\n":
                    k += 1
                delim = ")" + "".join(code[i + 1:k]) + '"'
                end = "".join(code).find(delim, k)
                i = n if end < 0 else end + len(delim)
            else:
                j = i + 1
                while j < n and code[j] not in '"\n':
                    j += 2 if code[j] == "\\" else 1
                i = j + 1
        elif c == "'":
            prev = code[i - 1] if i else ""
            if prev.isalnum() and nxt.isalnum():     # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and code[j] not in "'\n":
                j += 2 if code[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return "".join(code), line_of, comments


def _scan_cpp(text, rules):
    """([(line, rule, reason, match)], comments, includes): rule matches over C/C++ text; includes are
    (line, kind, name) with kind '"', '<' or '' (computed)."""
    code, line_of, comments = _strip_cpp(text)
    hits, includes = [], []

    def at(pos):
        return line_of[pos] if pos < len(line_of) else (line_of[-1] if line_of else 1)

    for m in _INCLUDE.finditer(code):
        directive, arg = m.group(1), m.group(2).strip()
        line = at(m.start())
        q = re.match(r'"([^"]*)"|<([^>]*)>', arg)
        if directive == "embed":
            hits.append((line, "file-io", "embeds a file at build time", arg))
        if q is None:
            hits.append((line, "dynamic-name", f"#{directive} of a computed name `{arg[:40]}`", arg))
            continue
        name = q.group(1) if q.group(1) is not None else q.group(2)
        includes.append((line, '"' if q.group(1) is not None else "<", name))
        for rule, kind, rx, reason in rules:
            if kind == "include" and rx.search(name):
                hits.append((line, rule, f"{reason} <{name}>", name))
    for rule, kind, rx, reason in rules:
        if kind == "text":
            for m in rx.finditer(code):
                hits.append((at(m.start()), rule, f"{reason}: `{m.group(0).strip()[:40]}`", m.group(0)))
    return hits, comments, includes


def _yaml_comments(text):
    """(code, comments): YAML text with `#` comments blanked (a `#` at a line's start or after a space, outside
    quotes), and (line, text) of each comment."""
    out, comments = [], []
    for number, line in enumerate(text.splitlines(), 1):
        quote, cut = None, None
        for k, c in enumerate(line):
            if quote:
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c == "#" and (k == 0 or line[k - 1] in " \t"):
                cut = k
                break
        if cut is not None:
            comments.append((number, line[cut:]))
            line = line[:cut]
        out.append(line)
    return "\n".join(out), comments


_FLAG_OUTSIDE = re.compile(r"(^|[\s,=])(-include|-imacros|--pre-include|-fplugin|-specs|-B|-L|--library-path|"
                           r"-Wl,|-Xlinker|--linker-options|-ccbin|--compiler-bindir|-trigraphs|@)")


# ---------------------------------------------------------------------------------------------------------------
# The whole solution.

def _is_inside(path, base):
    path, base = os.path.realpath(path), os.path.realpath(base)
    return path == base or path.startswith(base + os.sep)


def _check_pyc(unit, pyc, source):
    """A .pyc the import system would load instead of its source must be that source, compiled."""
    try:
        with open(pyc, "rb") as f:
            data = f.read()
        with open(source, "rb") as f:
            src = f.read()
    except OSError as e:
        unit.add(0, "unaudited-file", f"cannot read: {e}")
        return
    parts = os.path.basename(pyc).split(".")
    tag = parts[1] if len(parts) >= 3 else ""
    flags = int.from_bytes(data[4:8], "little") if len(data) >= 16 else -1
    st = os.stat(source)
    stamped = flags == 0 and int.from_bytes(data[8:12], "little") == (int(st.st_mtime) & 0xFFFFFFFF) \
        and int.from_bytes(data[12:16], "little") == (st.st_size & 0xFFFFFFFF)
    if flags == 0 and not stamped:
        return                   # stale: the import system compiles the source again
    if tag != sys.implementation.cache_tag or data[:4] != importlib.util.MAGIC_NUMBER:
        unit.add(0, "unaudited-file", f"bytecode for {tag or 'another Python'} that this audit cannot compare with "
                                      f"its source: delete __pycache__")
        return
    optimize = int(parts[2][4:]) if len(parts) == 4 and parts[2].startswith("opt-") else 0
    try:
        code = marshal.loads(data[16:])
        same = code == compile(src, source, "exec", dont_inherit=True, optimize=optimize)
    except Exception:     # noqa: BLE001 - any failure to compare is a failure to verify
        same = False
    if not same:
        unit.add(0, "unaudited-file", "bytecode that differs from its source would be imported instead of it")


def _is_solution(path):
    return (os.path.isdir(path) and os.path.isfile(os.path.join(path, "solution.py"))) or \
        (os.path.isfile(path) and path.endswith(".py"))


def _files(path, base, unit_for):
    """Every file of the solution by kind: (python, yml, cpp, pyc, other), `other` being neither a source the
    audit reads nor documentation. A superset of loader.source_files, the harness's own list."""
    if os.path.isdir(path):
        everything = []

        def unlisted(error):
            unit_for(error.filename).add(0, "unaudited-file", f"cannot be listed: {error.strerror}")

        for root, dirs, files in os.walk(path, onerror=unlisted):
            # Hidden folders are skipped as loader.source_files skips them: nothing in them can be imported, and
            # what is #include'd or listed in solution.yml from them is followed.
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for d in list(dirs):
                if os.path.islink(os.path.join(root, d)):
                    unit_for(os.path.join(root, d)).add(0, "unaudited-file",
                                                        "a link to a directory, whose files the audit does not read")
                    dirs.remove(d)
            everything += [os.path.join(root, f) for f in files]
        everything = sorted(set(everything) | set(loader.source_files(path)))
    else:
        cache = os.path.join(base, "__pycache__")
        stem = os.path.splitext(os.path.basename(path))[0]
        cached = os.listdir(cache) if os.path.isdir(cache) else []
        everything = [path] + sorted(os.path.join(cache, f) for f in cached if f.startswith(stem + "."))
    python, yml, cpp, pyc, other = [], [], [], [], []
    for f in everything:
        name = os.path.basename(f)
        if os.path.basename(os.path.dirname(f)) == "__pycache__" and name.endswith(".pyc"):
            pyc.append(f)
        elif name.endswith(PY_SUFFIX):
            python.append(f)
        elif name.endswith(YML_SUFFIX):
            yml.append(f)
        elif name.endswith(CPP_SUFFIX):
            cpp.append(f)
        elif not (name.endswith(DOC_SUFFIX) or name in DOC_NAMES):   # `README.<abi>.so` imports as README
            other.append(f)
    return python, yml, cpp, pyc, other


def audit(path):
    """Audit every source of the solution at `path` (a directory with solution.py, or a .py file)."""
    given = os.fspath(path)
    path = os.path.abspath(given)
    if not _is_solution(path):
        raise UsageError(f"{given}: not a solution (a directory with solution.py, or a .py file)")
    base = path if os.path.isdir(path) else os.path.dirname(path)
    units = {}

    def unit_for(abs_path, text=""):
        rel = os.path.relpath(abs_path, base)
        if rel not in units:
            units[rel] = _Unit(rel, text)
        elif text and not units[rel].lines:
            units[rel].lines = text.splitlines()
        return units[rel]

    python, yml, cpp, pyc, other = _files(path, base, unit_for)

    def read(f):
        try:
            with open(f, "rb") as fh:
                data = fh.read()
            if len(data) > BIG_FILE:
                unit_for(f).add(0, "unaudited-file", f"{len(data)} bytes: a source this large is data, not code")
            return data
        except OSError as e:
            unit_for(f).add(0, "unaudited-file", f"cannot read: {e}")
            return None

    include_dirs = [base]
    for f in yml:
        data = read(f)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        unit = unit_for(f, text)
        code, unit.comments = _yaml_comments(text)
        for line, rule, reason, _ in _scan_cpp(code, CPP_RULES)[0]:
            unit.add(line, rule, f"build setting {reason}")
        if os.path.basename(f) in ("solution.yml", "solution.yaml"):
            include_dirs += _check_manifest(unit, code, os.path.dirname(f), base, cpp)

    queue, done = list(cpp), set()
    while queue:
        f = queue.pop(0)
        if f in done:
            continue
        done.add(f)
        if f in other:
            other.remove(f)
        data = read(f)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        unit = unit_for(f, text)
        hits, unit.comments, includes = _scan_cpp(text, CPP_RULES + CPP_ONLY_RULES)
        for line, rule, reason, _ in hits:
            unit.add(line, rule, reason)
        for line, kind, name in includes:
            found = _resolve_include(unit, line, kind, name, os.path.dirname(f), include_dirs, base)
            if found and found not in done:
                queue.append(found)

    global _MODULES
    _MODULES = _Modules(python, base)
    try:
        visitors = []
        for f in python:
            data = read(f)
            visitor = _parse_python(unit_for(f, _decode_python(data)), data, file=f) if data is not None else None
            if visitor is not None:
                _MODULES.aliases[_MODULES.ids[f]] = visitor.aliases
                _MODULES.module_values |= visitor.module_values | {_MODULES.ids[f]}
                visitors.append(visitor)
        for visitor in visitors:
            try:
                visitor.visit(visitor.tree)
            except RecursionError:
                visitor.unit.add(1, "unaudited-file", "nested too deeply for the audit to read it all")
    finally:
        _MODULES = _Modules()

    for f in pyc:
        stem = os.path.basename(f).split(".")[0]
        source = os.path.join(os.path.dirname(os.path.dirname(f)), stem + ".py")
        if os.path.isfile(source):      # without its source a cached .pyc is never imported
            _check_pyc(unit_for(f), f, source)

    for f in other:
        unit_for(f).add(0, "unaudited-file", "neither a source the audit reads nor documentation: a compiled module "
                                             "or data file could be imported or embedded unaudited")

    findings, allowed, warnings = [], [], []
    for rel in sorted(units):
        _apply_allowances(units[rel], findings, allowed, warnings)
    key = (lambda f: (f.file, f.line, f.rule))
    return Report(given, sorted(units), sorted(findings, key=key), sorted(allowed, key=key),
                  sorted(warnings, key=key))


def _check_manifest(unit, code, folder, base, cpp):
    """solution.yml's sources and flags must stay inside the solution; returns its -I folders inside it."""
    import yaml
    try:
        manifest = yaml.safe_load(code) or {}
    except yaml.YAMLError as e:
        unit.add(1, "unaudited-file", f"not valid YAML, so it cannot be audited: {e}")
        return []
    if not isinstance(manifest, dict):
        return []

    def line_of(value):
        for k, line in enumerate(unit.lines, 1):
            if str(value) in line:
                return k
        return 1

    include_dirs = []
    sources = manifest.get("sources") or []
    for source in sources if isinstance(sources, list) else [sources]:
        full = os.path.normpath(os.path.join(folder, str(source)))
        if not _is_inside(full, base):
            unit.add(line_of(source), "unaudited-file", f"source `{source}` lies outside the solution")
        elif os.path.isfile(full) and full not in cpp:
            cpp.append(full)
    for key in ("cflags", "cuda_cflags", "ldflags"):
        flags = manifest.get(key) or []
        for flag in flags if isinstance(flags, list) else [flags]:
            flag = str(flag)
            if _FLAG_OUTSIDE.search(flag) or re.search(r"(^|[\s,=]|-I)(/|\.\.)", flag):
                unit.add(line_of(flag), "unaudited-file", f"{key} `{flag}` reaches files outside the solution")
            elif flag.startswith("-I"):
                include_dirs.append(os.path.normpath(os.path.join(folder, flag[2:].strip())))
    return include_dirs


def _resolve_include(unit, line, kind, name, folder, include_dirs, base):
    """The solution file an #include names (to audit it too), or None; one reaching outside is a finding."""
    if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
        full = os.path.normpath(os.path.join(folder, name))
        if os.path.isabs(name) or not _is_inside(full, base):
            unit.add(line, "unaudited-file", f"includes `{name}`, outside the solution")
            return None
    candidates = ([os.path.join(folder, name)] if kind == '"' else []) + [os.path.join(d, name) for d in include_dirs]
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(c):
            if not _is_inside(c, base):
                unit.add(line, "unaudited-file", f"includes `{name}`, outside the solution")
                return None
            return c
    return None


def _apply_allowances(unit, findings, allowed, warnings):
    allowances = {}      # line -> [(rules, reason)]
    for line, comment in unit.comments:
        m = _ALLOW.search(comment)
        if not m:
            continue
        body = m.group("body").strip().rstrip("*/").strip()
        rules_text, sep, reason = body.partition("--")
        rules = [r for r in re.split(r"[,\s]+", rules_text.strip()) if r]
        reason = reason.strip()
        unknown = [r for r in rules if r not in RULES or r == "allowance"]
        if not rules or unknown:
            unit.add(line, "allowance", f"allowance names no rule: {', '.join(unknown) or '(none)'} "
                                        f"(`audit: allow RULE -- reason`; rules: python audit.py --rules)")
            continue
        if not reason:
            unit.add(line, "allowance", f"allowance for {', '.join(rules)} without a reason "
                                        f"(`audit: allow {rules[0]} -- why this is fine`)")
            continue
        allowances.setdefault(line, []).append([rules, reason, set()])
    for f in unit.findings:
        match = next((a for a in allowances.get(f.line, []) if f.rule in a[0] and f.rule != "allowance"), None)
        if match:
            match[2].add(f.rule)
            allowed.append(dataclasses.replace(f, allowance=match[1]))
        else:
            findings.append(f)
    for line, entries in allowances.items():
        for rules, reason, used in entries:
            for r in rules:
                if r not in used:
                    text = unit.lines[line - 1].strip()[:160] if 0 < line <= len(unit.lines) else ""
                    warnings.append(Finding(unit.rel, line, "allowance", f"unused: no `{r}` finding on this line",
                                            text, reason))


# ---------------------------------------------------------------------------------------------------------------
# Printing and the command line.

def _where(report, f):
    base = report.path if os.path.isdir(report.path) else os.path.dirname(report.path)
    return f"{os.path.join(base, f.file) if base else f.file}:{f.line}"


def format_report(report):
    out = [f"audit {report.path}: {len(report.findings)} finding(s), {len(report.allowed)} allowed, "
           f"{len(report.warnings)} warning(s) in {len(report.files)} file(s)"]
    sections = (("findings", report.findings, False), ("allowances used", report.allowed, True),
                ("warnings", report.warnings, True))
    for title, items, with_reason in sections:
        if not items:
            continue
        out.append(f"\n{title}:")
        for f in items:
            out.append(f"  {_where(report, f)}: {f.rule}: {f.reason}")
            if with_reason and f.allowance:
                out.append(f"      allowed: {f.allowance}")
            if f.text:
                out.append(f"      | {f.text}")
    out.append("\n" + ("clean" if report.ok else "NOT CLEAN: fix the findings, or allow a reviewed false positive "
                                                  "with `# audit: allow RULE -- reason` on its line"))
    return "\n".join(out)


def format_rules():
    width = max(map(len, RULES))
    return "\n".join(f"{name:<{width}}  {why}" for name, why in RULES.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description="Static audit of a solution's sources (see the module docstring).")
    parser.add_argument("solution", nargs="?", help="a directory with solution.py, or a .py file")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH ('-': stdout)")
    parser.add_argument("--rules", action="store_true", help="print the rules and why each exists, then exit")
    args = parser.parse_args(argv)
    if args.rules:
        print(format_rules())
        return 0
    if not args.solution:
        parser.print_usage(sys.stderr)
        print("audit.py: error: a solution path is required", file=sys.stderr)
        return 2
    try:
        report = audit(args.solution)
    except UsageError as e:
        print(f"audit.py: error: {e}", file=sys.stderr)
        return 2
    if args.json == "-":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(format_report(report))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report.to_json(), f, indent=2)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
