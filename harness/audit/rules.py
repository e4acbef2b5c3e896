"""audit.py's rules: one table, one row per rule (why it exists, how a finding names it, the Python names and
attributes it bans, its C/C++ patterns), the names that are fine, a few rules' parameters beyond their rows, and the
lookups derived from the table.

A Python dotted name is decided by the longest entry that covers it (see lookup): an exact entry, else `prefix.*`
(members of prefix not listed), else `prefix` itself (a banned module bans its members). ALLOWED lists the names that
are fine, so that a wider entry does not catch them.

Beside the table: what each rule's finding does at the gate (harness/audit/verdicts.py), the modules the audit
knows by name (harness/audit/module_names.py), the narrow-numerics rule's dtypes, operations and constants
(harness/audit/arithmetic.py), and the regexes the table shares with the checks (harness/audit/patterns.py).
"""
import dataclasses
import re

import spec
from harness.audit.patterns import CPP_NARROW_DTYPES, CPP_ROUNDING, NARROW_TEXT, calls


@dataclasses.dataclass(frozen=True)
class Cpp:
    kind: str                   # "include": the header name of #include lines; "text": the code, comments blanked
    regex: re.Pattern
    reason: str
    in_strings: bool = True     # also applied to C/C++ source inside Python strings


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    reason: str                 # why the rule exists (`python audit.py --rules`)
    phrase: str = ""            # how a finding names what the rule forbids
    names: tuple = ()           # Python dotted names: modules, members, `prefix.*`
    attributes: tuple = ()      # attribute names that are findings on any object (and as exact string constants)
    bare_names: tuple = ()      # identifiers that are findings wherever they appear (`__builtins__`)
    definitions: tuple = ()     # names whose definition (def) is a finding (`__del__`)
    cpp: tuple = ()             # Cpp patterns over C/C++/CUDA text
    notes: dict = dataclasses.field(default_factory=dict)   # entry -> a phrase more precise than `phrase`


_FILE_IO = spec.RULES["file-io"]

TABLE = (
    Rule("file-io", _FILE_IO["why"], "touches files",
         names=("builtins.open", "builtins.input", "io.*", "os.*", "sys.stdin",
                "os.path.exists", "os.path.lexists", "os.path.isfile", "os.path.isdir", "os.path.islink",
                "os.path.ismount", "os.path.isjunction", "os.path.isdevdrive", "os.path.getsize", "os.path.getmtime",
                "os.path.getatime", "os.path.getctime", "os.path.samefile", "os.path.sameopenfile",
                "os.path.samestat", "os.path.realpath",
                "pathlib", "shutil", "tempfile", "glob", "mmap", "pickle", "shelve", "marshal", "dbm", "sqlite3",
                "fileinput", "filecmp", "zipfile", "tarfile", "gzip", "bz2", "lzma", "linecache", "fcntl", "pwd",
                "grp", "codecs.open", "tokenize.open", "logging.FileHandler", "logging.handlers",
                "logging.basicConfig", "logging.config",
                "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.fromfile",
                "numpy.memmap", "numpy.loadtxt", "numpy.savetxt", "numpy.genfromtxt", "numpy.fromregex",
                "numpy.lib.format", "numpy.lib.npyio", "numpy.DataSource",
                "torch.load", "torch.save", "torch.from_file", "torch.serialization", "torch.package", "torch.hub", "torch.utils.model_zoo",
                "torch.jit.load", "torch.jit.save", "torch.distributed.checkpoint", "torch.distributed.FileStore",
                "torch.utils.tensorboard", "torch.utils.data.datapipes", "torch.export.save", "torch.export.load",
                "torch.onnx", "torch.profiler.tensorboard_trace_handler", "torch.autograd.profiler", "torch.cuda.tunable",
                "torch.cuda.gds", "sys.stdout.*", "sys.stderr.*",
                "triton.runtime.cache", "triton.compile", "triton.compiler.compile", "safetensors", "h5py", "dill", "cloudpickle", "joblib",
                # well-known readers in third-party packages (a static audit cannot list them all)
                "PIL.Image.open", "cv2.imread", "cv2.imwrite", "cv2.VideoCapture", "cv2.VideoWriter", "imageio",
                "torchaudio.load", "torchaudio.save", "pandas.read_csv", "pandas.read_pickle", "pandas.read_parquet",
                "huggingface_hub", "diffusers.utils.load_image", "diffusers.utils.load_video",
                "diffusers.utils.export_to_video", "diffusers.utils.export_to_gif"),
         attributes=("__loader__", "__spec__", "tofile", "from_file", "read_text", "read_bytes", "write_text",
                     "write_bytes", "cuModuleLoad", "from_pretrained", "save_pretrained", "export_chrome_trace",
                     "export_stacks", "export_memory_timeline", "load_config", "save_config", "from_single_file",
                     "push_to_hub", "load_cache_artifacts", "save_cache_artifacts", "load_compiled_function"),
         bare_names=("__loader__", "__spec__"),
         cpp=(Cpp("include", re.compile(_FILE_IO["include"]), "includes a file-access header"),
              Cpp("text", re.compile(_FILE_IO["text"]), "accesses a file (spec.RULES['file-io'])"),
              Cpp("include", re.compile(r"(^|/)(cufile\.h|dirent\.h|sys/stat\.h|sys/sendfile\.h|sys/inotify\.h)$"),
                  "includes a file-access header"),
              Cpp("text", re.compile(r"#\s*embed\b|__has_embed|\bincbin\b"), "embeds a file at build time"),
              Cpp("text", re.compile(calls(
                  r"open|openat|open64|creat|read|write|pread64|pwrite64|close|lseek|unlink|unlinkat|rename|"
                  r"renameat2?|truncate|ftruncate|fallocate|posix_fallocate|mkdir|rmdir|opendir|readdir|stat|lstat|fstat|access|readlink|"
                  r"symlink|chdir|dup[23]?|pipe2?|mkfifo|memfd_create|sendfile|tmpfile|tmpnam|mkstemp|mkdtemp|statx|"
                  r"open_by_handle_at|name_to_handle_at")),
                  "calls a POSIX file function"),
              Cpp("text", re.compile(r"\bcuFile\w*|\bcuModuleLoad\s*\(|\bcu(da)?LibraryLoadFromFile|\bcuLinkAddFile"),
                  "loads a file through CUDA"),
              # libtorch's and the C++ library's readers by other spellings than spec.RULES' names
              Cpp("text", re.compile(r"\bfrom_file\b|\b(Input|Output)Archive\b|\b(load_from|save_to)\b|"
                                     r"\btorch\s*::\s*serialize\b|\bcaffe2\s*::\s*serialize\b|\bFileAdapter\b|"
                                     r"\bbasic_(i|o|io)?fstream\b|\bbasic_filebuf\b|\bstd\s*::\s*filesystem\b|\bFILE\s*\*"),
                  "reads or writes files through libtorch or the C++ library"))),
    Rule("network", "a solution talks to no other machine or process: a connection could fetch answers or report to "
                    "an accomplice", "opens connections",
         names=("socket", "ssl", "select", "selectors", "urllib", "urllib3", "http", "requests", "httpx", "aiohttp",
                "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib", "socketserver", "xmlrpc",
                "websocket", "websockets", "grpc", "zmq", "paramiko", "torch.distributed.rpc",
                "torch.distributed.TCPStore", "torch.distributed.init_process_group", "torch.distributed.rendezvous",
                "torch.distributed.distributed_c10d.init_process_group", "torch.distributed.rendezvous.rendezvous",
                "torch.distributed.elastic.rendezvous"),
         cpp=(Cpp("include", re.compile(r"(^|/)(sys/socket\.h|netinet/.*|arpa/inet\.h|netdb\.h|sys/un\.h|curl/.*)$"),
                  "includes a network header"),
              Cpp("text", re.compile(calls(r"socket|getaddrinfo|gethostbyname|inet_pton|inet_addr") + r"|\bcurl_\w+"),
                  "opens connections"))),
    Rule("process", "work outside the calling thread (processes, threads, signal and exit hooks, finalizers, load-time "
                    "constructors) can escape the timer, outlive run() or forge a rank's result",
         "starts processes or threads, or acts outside the call",
         names=("subprocess", "multiprocessing", "threading", "_thread", "concurrent", "asyncio", "signal", "atexit",
                "pty", "psutil", "sh", "pexpect", "ray", "dask", "webbrowser", "_xxsubinterpreters", "_interpreters",
                "interpreters", "weakref.finalize", "weakref.ref", "weakref.proxy", "weakref.WeakMethod", "builtins.exit", "builtins.quit", "sys.exit",
                "torch.multiprocessing", "torch.jit.fork", "torch.jit._fork", "torch.distributed.elastic",
                "torch.distributed.launcher", "torch.distributed.run", "torch.distributed.launch",
                "torch.utils.data.DataLoader",
                "os.system", "os.popen", "os.fork", "os.forkpty", "os.execl", "os.execle", "os.execlp", "os.execlpe",
                "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle", "os.spawnlp",
                "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.posix_spawn",
                "os.posix_spawnp", "os.kill", "os.killpg", "os._exit", "os.abort", "os.wait", "os.wait3", "os.wait4",
                "os.waitpid", "os.waitid", "os.register_at_fork", "os.nice", "os.setsid", "os.setpgid",
                "os.pidfd_open", "os.startfile", "os.sched_setaffinity", "torch.futures"),
         attributes=("then", "add_done_callback"),    # a future's callback runs on another thread
         definitions=("__del__",),
         cpp=(Cpp("include", re.compile(r"(^|/)(thread|future|pthread\.h|unistd\.h|spawn\.h|signal\.h|csignal|"
                                        r"sys/wait\.h|sys/syscall\.h|sys/ptrace\.h)$"),
                  "includes a process or thread header"),
              Cpp("text", re.compile(
                  r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_\w+|" + calls(
                      r"system|popen|fork|vfork|clone3?|execl|execle|execlp|execv|execve|execveat|execvp|execvpe|fexecve|posix_spawnp?|"
                      r"kill|killpg|signal|sigaction|atexit|at_quick_exit|on_exit|daemon|_exit|_Exit|quick_exit") +
                  r"|\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|"
                  r"__attribute__\s*\(\([^;{}]*?\b_*(constructor|destructor)_*\b|"
                  r"\[\[[^\]]*?\bgnu\s*::\s*_*(constructor|destructor)_*\b|"
                  r"#[ \t]*define[ \t]+\w+[^\n]*\b_*(constructor|destructor)_*\b|"
                  r"\b(at|c10)\s*::\s*(launch|intraop_launch\w*|get_thread_pool|\w*ThreadPool\w*)\b|"
                  r"\bstd\s*::\s*packaged_task\b|"
                  r"\.(init_array|fini_array|ctors|dtors)\b"),
                  "starts processes or threads, or runs code outside the call"))),
    Rule("environment", "environment variables and argv are the harness's channel, not an input: seeds, paths and "
                        "flags must not steer a solution", "reads or changes the environment",
         names=("os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv",
                "os.path.expanduser", "os.path.expandvars", "sys.argv", "sys.orig_argv", "getpass", "dotenv"),
         cpp=(Cpp("text", re.compile(r"\b(getenv|secure_getenv|setenv|putenv|unsetenv|clearenv|environ|__environ)\b"),
                  "reads or changes the environment"),)),
    Rule("foreign-code", "code the audit cannot read (ctypes, dlopen, importlib, exec/eval/compile of text, TorchScript "
                         "compiled from text, C++ built or Python run from C++ at run time, a module the audit does "
                         "not know, which may do any of these) would run unaudited, and a tensor made from a raw "
                         "address (the array-interface protocols) reads memory no check can see",
         "runs code the audit cannot read",
         names=("ctypes", "cffi", "_cffi_backend", "cppyy", "importlib", "imp", "pkgutil", "runpy", "zipimport",
                "code", "codeop", "site", "distutils", "setuptools", "py_compile", "compileall", "timeit", "doctest",
                "types.CodeType", "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__",
                "torch.ops.load_library", "torch.classes.load_library", "torch.utils.cpp_extension",
                "numpy.ctypeslib", "torch.cuda.memory.CUDAPluggableAllocator", "torch.cuda.CUDAPluggableAllocator",
                "torch.cuda.memory.change_current_allocator", "torch.cuda.change_current_allocator", "sys.path",
                "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache", "pydoc", "torch.jit", "torch.fx",
                "typing.get_type_hints", "typing.ForwardRef", "typing.evaluate_forward_ref",
                "functools.singledispatch", "functools.singledispatchmethod", "diffusers.*", "torch.ops",
                "torch.utils.benchmark", "triton.language.inline_asm_elementwise", "torch.utils.collect_env",
                # torch's tool boxes, allowed name by name (ALLOWED): file batons, trace observers, data loaders
                "torch.utils.*", "torch.profiler.*", "diffusers.AutoencoderKLWan.*",
                # torch's loaders of compiled artifacts and objects unpickle what they are given: any code
                "torch.compiler.*", "torch.export.*", "torch.distributed.broadcast_object_list",
                "torch.distributed.all_gather_object", "torch.distributed.gather_object",
                "torch.distributed.scatter_object_list", "torch.distributed.send_object_list",
                "torch.distributed.recv_object_list", "torch.distributed.distributed_c10d.broadcast_object_list",
                "torch.distributed.distributed_c10d.all_gather_object", "torch.distributed.distributed_c10d.gather_object",
                "torch.distributed.distributed_c10d.scatter_object_list",
                "torch.distributed.distributed_c10d.send_object_list",
                "torch.distributed.distributed_c10d.recv_object_list"),
         attributes=("load_library", "__import__", "__array_interface__", "__cuda_array_interface__",
                     "__array_struct__", "inline_asm_elementwise"),
         definitions=("__array_interface__", "__cuda_array_interface__", "__array_struct__"),
         cpp=(Cpp("include", re.compile(r"(^|/)(dlfcn\.h|windows\.h|pybind11/embed\.h|pybind11/eval\.h|nvrtc\.h|"
                                        r"nvJitLink\.h)$"), "includes a dynamic-loading or JIT header"),
              Cpp("text", re.compile(
                  r"\b(dlopen|dlmopen|dlsym|dlvsym|LoadLibrary\w*|GetProcAddress|cdll|CDLL)\b|"
                  r"\bPy(Import|Run|Eval)_\w+|\bPy_CompileString\w*|\bPyObject_(GetAttr|SetAttr|GenericGetAttr)\w*|"
                  r"\bmodule_?\s*::\s*import\b|\b(py|pybind11)\s*::\s*(eval|exec|eval_file|globals)\b|\.attr\s*\(|"
                  r"\bnvrtc\w+|\bnvJitLink\w+|\bcuModuleLoadData\w*|\bcuLinkCreate\w*|\btorch\s*::\s*jit\b|"
                  r"\bCompilationUnit\b"),
                  "loads code at run time or reaches Python from C++"),
              # A binding needs pybind11's PYBIND11_MODULE, `m.def`, argument and GIL helpers, or the C API's module
              # definition and conversions of numbers and text; anything else of either (`PySys_GetObject`,
              # `PyObject_Call`, `py::getattr`, a type's slots `ob_type->tp_call`) or of torch's (`THPVariable_Wrap`)
              # reaches Python objects, and through them runs any Python
              Cpp("text", re.compile(
                  r"\b(?!(PyObject|PyMethodDef|PyModuleDef|PyModuleDef_HEAD_INIT|PyMODINIT_FUNC|PyModule_Create2?|"
                  r"PyArg_ParseTuple(AndKeywords)?|Py_RETURN_NONE|Py_ssize_t|Py(Long|Float)_(From|As)\w+|"
                  r"PyUnicode_FromString|Py_BuildValue|PyInit_\w+|PyErr_SetString|PyExc_\w+)\b)_?Py[A-Z_]\w*|"
                  r"\b(ob_type|ob_refcnt|tp_\w+)\b|\bTHP\w+|\btorch\s*::\s*python\b|"
                  r"\b(py|pybind11)\s*::\s*(?!(arg|arg_v|module_?|return_value_policy|gil_scoped_release|"
                  r"gil_scoped_acquire|call_guard|kw_only|pos_only)\b)\w+|[.>]\s*import\s*\(|"
                  r"\bnamespace\s+(?!py\b)\w+\s*=\s*(::\s*)?pybind11\b|\busing\s+(namespace\s+)?(py|pybind11)\b"),
                  "reaches Python objects from C++ (beyond a binding's module definition and number conversions)"),
              # `asm(".globl f\n f: jmp open@PLT")`: a call or jump to a symbol from assembly, which no rule reads
              Cpp("text", re.compile(
                  r"@PLT\b|@GOT\w*|\.globl\b|\.type\s+\w+\s*,\s*[@%]function|"
                  r"\bj(mpq?|n?[abceglopsz]|n?[abgl]e|p[eo]|[er]?cxz)\s+[*%$]*[A-Za-z_\[(]|"
                  r"\.(intel|att)_syntax\b|\.code(16|32|64)\b|"
                  r"\b(__asm__|__asm|asm)\b[^;]{0,40}\(\s*(\"([^\"\\\n]|\\.){0,2000}\"\s*)*?"
                  r"\"([^\"\\\n]|\\.){0,2000}?\b(call[lq]?|ret[lq]?|push[lq]?|pop[lq]?|lea[lq]?|clc|stc|xchg[lq]?|"
                  r"mov[bwlq]?|cmov\w*|jmp)\s+[*%$A-Za-z_\[(\d-]|"
                  # x86 registers and symbol immediates: host assembly, which no task needs (PTX names none)
                  r"%%?(r[abcd]x|r[sd]i|r[sb]p|rip|e[abcd]x|e[sd]i|e[sb]p|[abcd][lh]|[sd]il|[sb]pl|[xyz]mm\d+|r1[0-5][dwb]?|"
                  r"[cdefgs]s)\b|"
                  r"\bmovabs[qlwb]?\b|\.(byte|word|long|quad|incbin|ascii|asciz|octa)\b"),
                  "calls or jumps from assembly, or host assembly at all (what it calls is hidden)"))),
    Rule("monkeypatch", "changing another module's state (torch, time, builtins, spec, operator kernels, torch's "
                        "private bindings torch._C) can fake timings or checks and outlives the call",
         "changes another module's state",
         names=("builtins", "builtins.setattr", "builtins.delattr", "sys.modules", "sys.addaudithook",
                "sys.displayhook", "sys.excepthook", "sys.unraisablehook", "sys.breakpointhook",
                "torch.library.Library", "torch.library.impl", "torch.library._impl", "torch.library.register_kernel",
                "torch.library.fallthrough_kernel", "torch.overrides", "torch.utils._python_dispatch",
                "torch.set_default_dtype", "torch.set_default_device", "torch.set_default_tensor_type",
                "torch.set_float32_matmul_precision", "torch.set_flush_denormal", "torch.use_deterministic_algorithms",
                "torch._ops", "torch._library", "torch._C", "unittest", "mock", "pytest", "operator.setitem",
                "operator.delitem"),
         attributes=("__builtins__", "__setattr__", "__delattr__", "__torch_function__", "__torch_dispatch__",
                     "py_impl", "py_kernels", "_C"),
         bare_names=("__builtins__",),
         definitions=("__torch_function__", "__torch_dispatch__"),
         cpp=(Cpp("text", re.compile(
             r"\bTORCH_LIBRARY(_IMPL|_FRAGMENT)?\s*\(\s*(aten|prims?|c10d|_c10d_functional)\b|"
             r"\bDispatcher\b|\bregisterFallback\b|\bfindSchema\w*|\bfindOp\b|\bLibrary\s*::\s*(IMPL|DEF|FRAGMENT)\b|"
             r"\btorch\s*::\s*Library\b|\bDispatchKey\s*::|\bTORCH_LIBRARY\w*\s*\(\s*_\s*[,)]|\.\s*fallback\s*\(|"
             r"\b(mprotect|mremap|process_vm_readv|process_vm_writev|ptrace|dl_iterate_phdr)\b|--wrap\b|\b__libc_\w+"),
             "overrides operators or patches the process's code or memory"),),
         notes={"torch._C": "reaches torch's private C bindings", "_C": "reaches private C bindings (torch._C)"}),
    Rule("state", "run() keeps nothing between calls: a result kept in a module-level variable, a global, a mutable "
                  "default argument, a function's attribute or a memo could replay an earlier call's answer",
         "keeps state between calls",
         names=("functools.cache", "functools.lru_cache", "functools.cached_property", "sysv_ipc", "posix_ipc"),
         # Memory that outlives the process (System V and POSIX IPC, kernel keyrings): a later process could replay.
         cpp=(Cpp("include", re.compile(r"(^|/)(sys/ipc\.h|sys/shm\.h|sys/sem\.h|sys/msg\.h|mqueue\.h|keyutils\.h)$"),
                  "includes an IPC header (memory that outlives the process)"),
              Cpp("text", re.compile(calls(r"shmget|shmat|shm_open|semget|msgget|mq_open|add_key|keyctl|request_key|"
                                           r"ftok")),
                  "keeps memory that outlives the process (System V or POSIX IPC, a keyring)"))),
    Rule("harness-import", "solutions import spec and reference only: the harness (bench, loader, audit, ci, bounds, "
                           "data, harness, tests) is the judge, not a library", "is the harness"),
    Rule("introspection", "frames, the garbage collector and namespaces-as-dicts reach the harness's objects (the "
                          "reference among them) past the interface", "reaches interpreter internals",
         names=("gc", "inspect", "traceback", "dis", "tracemalloc", "faulthandler", "pdb", "bdb", "trace", "cProfile",
                "profile", "sys.*", "builtins.globals", "builtins.locals", "builtins.vars", "builtins.breakpoint"),
         attributes=("__globals__", "__code__", "__closure__", "cell_contents", "__subclasses__", "__self__",
                     "__dict__", "__traceback__", "f_back", "f_locals", "f_globals", "f_builtins", "f_code",
                     "tb_frame", "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code")),
    Rule("dynamic-name", "a name built at run time (getattr of a computed string, a format string's attribute "
                         "fields, `import *`, C++ token pasting, a computed #include) hides what is called from a "
                         "static check", "names its target at run time",
         names=("builtins.getattr", "operator.attrgetter", "operator.methodcaller", "string.Formatter", "_string"),
         attributes=("__getattribute__",),
         cpp=(Cpp("text", re.compile(r"##"), "token pasting builds identifiers the audit cannot read",
                  in_strings=False),
              # `int sys_o(const char*, int, ...) __asm__("open");`: a declaration bound to another symbol
              Cpp("text", re.compile(r"(?:(?<!\belse)(?<!\bdo)(?<=\w)|(?<=[)\]]))\s*\b(?:__asm__|__asm|asm)\s*\(\s*"
                                     r"(?:u8|u|U|L)?\"[\w.$@]+\"\s*\)\s*(?=[;,={]|__attribute__|\[\[)"),
                  "an asm label binds a declaration to another symbol (what is called is hidden)", in_strings=False),
              # The rules name libtorch's and the C++ library's members qualified (`at::launch`, `c10::Dispatcher`,
              # `std::async`): a using-directive, a namespace alias or a macro of a namespace makes them bare
              Cpp("text", re.compile(r"(?m)\busing\s+namespace\s+(::\s*)?(at|c10|torch|caffe2|std|aten)\s*;|"
                                     r"\bnamespace\s+\w+\s*=\s*(::\s*)?(at|c10|torch|caffe2|std|aten)\s*;|"
                                     r"\busing\s+(::\s*)?(at|c10|caffe2)\s*::\s*(?!(Tensor|TensorOptions|IntArrayRef|"
                                     r"ScalarType|Scalar|Device|DeviceType|Half|BFloat16|optional|nullopt)\s*;)|"
                                     r"^[ \t]*#[ \t]*define[ \t]+\w+(\([^)\n]*\))?[ \t]+(::\s*)?(at|c10|torch|caffe2|std|"
                                     r"aten)[ \t]*$"),
                  "names libtorch's or the C++ library's members unqualified (a using-directive, alias or macro "
                  "of their namespace), which the rules read qualified", in_strings=False),
              # `#define SCRIPT jit`, `#define NS(x) at::x`: a name the rules read, made of a macro's text
              Cpp("text", re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+\w+[ \t]+(?!__)(?![A-Z0-9_]+\s*$)"
                                     r"(?!(inline|static|const|constexpr|volatile|extern|unsigned|signed|int|long|"
                                     r"short|float|double|void|bool|char|auto|true|false|nullptr)\s*$)[A-Za-z_]\w*[ \t]*$|"
                                     r"^[ \t]*#[ \t]*define[ \t]+\w+\([ \t]*(?P<p>\w+)[^)]*\)[^\n]*::[ \t]*(?P=p)\b"),
                  "a macro whose text is a bare identifier or a qualified parameter renames what the rules read",
                  in_strings=False),
              # `#define LP (` then `open LP p, 0)`: a call whose parenthesis the rules never see
              Cpp("text", re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+\w+(?:\([^)\n]*\))?[ \t]+\(+[ \t]*$"),
                  "a macro that is only an opening parenthesis hides the calls it opens", in_strings=False))),
    Rule("narrow-numerics", "the task's numerics are bf16 weights and activations with fp32 accumulation, nothing "
                            "narrower: fp8/fp6/fp4, MX/NV block formats, int8/int4 casts and quantized matmuls, and "
                            "quantize/dequantize arithmetic (rounding values to a coarse grid) are narrower",
         "is narrower than bf16",
         names=("numpy", "torch.from_numpy", "torch.ao", "torch.quantization", "torchao", "bitsandbytes", "torch.nn.quantized",
                "torch.nn.quantizable", "torch.nn.intrinsic", "torch.nn.qat", "torch.round", "torch.round_",
                "torch.frexp", "torch.ldexp", "torch.ldexp_", "torch.special.round", "numpy.round", "numpy.around",
                "numpy.rint", "numpy.frexp", "numpy.ldexp", "math.frexp", "math.ldexp", "torch.bucketize",
                "torch.searchsorted", "numpy.digitize", "numpy.searchsorted", "torch.floor_divide", "torch.remainder",
                "torch.fmod", "torch.utils._dtype_abbrs"),
         attributes=("round", "round_", "__round__", "frexp", "ldexp", "ldexp_", "rint", "nearbyint", "char", "byte",
                     "frac", "frac_",
                     "floor_divide", "floor_divide_", "remainder", "remainder_", "fmod", "fmod_"),
         cpp=(Cpp("text", NARROW_TEXT, "uses a number format narrower than bf16"),
              Cpp("text", CPP_NARROW_DTYPES, "uses an 8-bit integer dtype (or a narrower one)"),
              Cpp("text", CPP_ROUNDING, "rounds values to integers (quantize/dequantize)"),
              Cpp("text", re.compile(r"(?i)quantize"), "quantizes (libtorch's quantized tensors)"),
              # The sums are fp32: a 16-bit accumulator fragment, an mma whose result type (the first after the
              # shape and layouts) is f16/bf16, or arithmetic intrinsics of 16-bit floats
              Cpp("text", re.compile(
                  r"\bfragment\s*<\s*(\w+\s*::\s*)*accumulator\b[^;>]*\b(half|__half|__nv_bfloat16|nv_bfloat16|"
                  r"bfloat16|bfloat16_t|half_t)\b|"
                  r"\b(w?gmma\.mma_async|mma|tcgen05\.mma)(\.\w+)*?\.m\d+n\d+k\d+(\.(row|col))*\.(f16|bf16)\b|"
                  r"\b__h(add|sub|mul|fma|div|neg)\w*|\bh2(div|exp|log|rcp|sqrt)\b"),
                  "accumulates or computes in 16-bit floats (the task's sums are fp32)")),
         notes={**dict.fromkeys(("round", "round_", "__round__", "rint", "nearbyint", "torch.round", "torch.round_",
                                 "torch.special.round", "numpy.round", "numpy.around", "numpy.rint"),
                                "rounds to a coarse grid (quantize/dequantize), narrower than bf16"),
                **dict.fromkeys(("frexp", "ldexp", "ldexp_", "torch.frexp", "torch.ldexp", "torch.ldexp_",
                                 "numpy.frexp", "numpy.ldexp", "math.frexp", "math.ldexp"),
                                "splits mantissa from exponent (quantize/dequantize), narrower than bf16"),
                **dict.fromkeys(("torch.bucketize", "torch.searchsorted", "numpy.digitize", "numpy.searchsorted"),
                                "maps values to a codebook (quantize), narrower than bf16"),
                **dict.fromkeys(("torch.floor_divide", "torch.remainder", "torch.fmod", "floor_divide",
                                 "floor_divide_", "remainder", "remainder_", "fmod", "fmod_"),
                                "floors or takes the remainder of floats (rounds to a grid), narrower than bf16"),
                "torch.utils._dtype_abbrs": "a table of every dtype, fp8's among them, narrower than bf16",
                "numpy": "has dtypes and type codes ('b', 'i1') narrower than bf16 that no list of names covers; a "
                         "decode needs no numpy",
                "torch.from_numpy": "takes numpy's dtypes ('b', 'i1': int8), narrower than bf16",
                "char": "casts to int8, narrower than bf16", "byte": "casts to uint8, narrower than bf16",
                **dict.fromkeys(("frac", "frac_"), "splits off the fraction (x - x.frac() truncates), narrower than "
                                                   "bf16")}),
    Rule("private-name", "a library's private names (a leading underscore: `torch._int_mm`, "
                         "`torch.ops.aten._cast_Char`, `torch._utils`) and Python's object machinery called by its "
                         "dunder names (`x.__getattr__(name)`, `__reduce__`) are doors no list of public names "
                         "covers: a solution uses the libraries' public API", "reaches a private name"),
    Rule("unaudited-file", "every file of a solution must be a source the audit reads: compiled modules, bytecode "
                           "that differs from its source, sources outside the solution, too large or that do not "
                           "parse would load unaudited", "is not audited"),
    Rule("data-file", "a file that is neither a source, documentation nor compiled code, documentation beyond a few "
                      "pages, a constant of more than 256 KiB: data, where run() may read nothing but its arguments",
         "is data"),
    Rule("allowance", "an allowance silences a reviewed false positive only with its reason; a malformed one, or one "
                      "naming no rule, is itself a finding"),
)

# The names that are fine, so that a wider entry above does not catch them.
ALLOWED = (
    "os", "os.path", "sys", "io", "builtins.*", "io.BytesIO", "io.StringIO",
    "os.sep", "os.linesep", "os.name", "os.curdir", "os.pardir", "os.extsep", "os.altsep", "os.pathsep",
    "os.devnull", "os.cpu_count", "os.process_cpu_count", "os.sched_getaffinity", "os.getpid", "os.fspath",
    "os.fsencode", "os.fsdecode", "os.PathLike", "os.strerror", "os.urandom",
    "sys.version", "sys.version_info", "sys.hexversion", "sys.implementation", "sys.platform",
    "sys.byteorder", "sys.maxsize", "sys.maxunicode", "sys.float_info", "sys.int_info", "sys.hash_info",
    "sys.float_repr_style", "sys.stdout", "sys.stderr", "sys.getrecursionlimit", "sys.setrecursionlimit",
    "sys.getsizeof", "sys.getrefcount", "sys.getdefaultencoding", "sys.getfilesystemencoding",
    "sys.intern", "sys.is_finalizing", "sys.executable", "sys.exc_info", "sys.exception", "sys.flags",
    "diffusers.AutoencoderKLWan", "torch.profiler.record_function", "sys.stdout.write", "sys.stdout.flush",
    "sys.stderr.write", "sys.stderr.flush", "torch.compiler.disable", "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling", "torch.compiler.cudagraph_mark_step_begin", "torch.compiler.allow_in_graph",
    "torch.compiler.reset")     # of diffusers only the model (its loaders import and get names given as text)

# Parameters of rules beyond their rows. private-name: the dunder names a solution may use (defining and calling its
# own classes' methods, and names of things); the libraries whose other private names are findings are
# module_names.LIBRARIES.
DUNDERS = {"__init__", "__call__", "__name__", "__qualname__", "__doc__", "__module__", "__class__", "__len__",
           "__iter__", "__next__", "__enter__", "__exit__", "__getitem__", "__contains__", "__file__", "__all__",
           "__version__", "__future__", "__main__", "__repr__", "__str__", "__eq__", "__hash__", "__post_init__"}
# foreign-code: torch.compile's backends by name, torch's own compilers (a function of the solution's would get the
# graph to rewrite).
COMPILE_BACKENDS = ("inductor", "cudagraphs", "eager", "aot_eager")
# state and monkeypatch: methods that change the object they are called on (besides tensors' in-place `name_`
# methods).
MUTATORS = {"update", "clear", "pop", "popitem", "setdefault", "append", "extend", "insert", "remove", "discard",
            "__setitem__", "__delitem__"}

# ---------------------------------------------------------------------------------------------------------------
# Derived lookups.

RULES = {r.name: r.reason for r in TABLE}                      # name -> why, in table order
PHRASE = {r.name: r.phrase for r in TABLE if r.phrase}
NAMES = {**{n: None for n in ALLOWED}, **{n: r.name for r in TABLE for n in r.names}}
# Calls of the table's names that touch files only through these keywords (or **kwargs): logging.basicConfig without
# `filename` gives the root logger a handler of sys.stderr, as print writes there.
FILE_KEYWORDS = {"logging.basicConfig": ("filename", "filemode")}
ATTRS = {a: r.name for r in TABLE for a in r.attributes}
RULE_MODULES = {n.split(".")[0] for n in NAMES}               # modules whose members the table decides
NAME_RULES = {n: r.name for r in TABLE for n in r.bare_names}
DEF_RULES = {n: r.name for r in TABLE for n in r.definitions}
NOTES = {(r.name, entry): note for r in TABLE for entry, note in r.notes.items()}
# (rule, kind, regex, reason) over C/C++ text; CPP_ONLY_RULES are not applied to source text in Python strings.
CPP_RULES = [(r.name, c.kind, c.regex, c.reason) for r in TABLE for c in r.cpp if c.in_strings]
CPP_ONLY_RULES = [(r.name, c.kind, c.regex, c.reason) for r in TABLE for c in r.cpp if not c.in_strings]


def lookup(q):
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


def phrase(rule, entry=None):
    """How a finding of `rule` names what it forbids: the entry's own note, else the rule's phrase."""
    return NOTES.get((rule, entry)) or PHRASE[rule]
