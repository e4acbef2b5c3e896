"""audit.py (and harness/audit/rules, verdicts, names, python_rules, cpp, files behind it): every rule fires on a
small cheat and stays quiet on its legitimate near-miss; the adversarial review's cases with a phrase of their reasons;
allowances; the report, JSON and exit codes. Solutions are written into tmp_path; nothing is imported or run."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import audit
from fixtures import CHEAT, FIXTURES
from harness.audit import files, verdicts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = "def run(z, weights, rank, world, pg, out):\n    pass\n"


def solution(tmp_path, files):
    """A solution directory holding `files` ({relative path: text or bytes}); solution.py defaults to a stub."""
    d = tmp_path / "sol"
    files = {"solution.py": RUN, **files}
    for rel, content in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(textwrap.dedent(content))
    return d


def audit_py(tmp_path, source):
    return audit.audit(str(solution(tmp_path, {"solution.py": source})))


def audit_cpp(tmp_path, source, name="kernels.cu"):
    return audit.audit(str(solution(tmp_path, {name: source})))


def fired(report):
    return {f.rule for f in report.findings}


# ---------------------------------------------------------------------------------------------------------------
# Python: each case fires its rule (and is a known cheat or a way to one).

PY_FIRES = [
    # a library's private names and Python's machinery by dunder name; modules the audit does not know; TorchScript
    ("private-name", "import torch\nmm = torch._int_mm"),
    ("private-name", "import torch\nc = torch.ops.aten._cast_Char"),
    ("private-name", "import torch\nops = torch.ops.aten\nc = ops._cast_Char"),
    ("private-name", "import torch\nf = torch.ops.aten.__getattr__('x' + 'y')"),
    ("private-name", "import torch\nf = torch._utils._import_dotted_name('os.system')"),
    ("private-name", "from torch._utils import _import_dotted_name"),
    ("private-name", "def f(x):\n    return x.__reduce_ex__(2)"),
    ("private-name", "import torch\nf = getattr(torch, '_int_mm')"),
    ("foreign-code", "import pydoc\nexec_ = pydoc.locate('builtins.exec')"),
    ("foreign-code", "import xml.dom\n"),
    ("foreign-code", "import torch\ncu = torch.jit.CompilationUnit('def f(x):\\n    return x')"),
    ("narrow-numerics", "import torch\nd = [torch.int8][0]"),
    ("narrow-numerics", "import torch\nd = torch.CharStorage.dtype"),
    ("narrow-numerics", "import numpy\nd = numpy.zeros(1, 'b')"),
    ("narrow-numerics", "import torch\ndef f(w, s):\n    q = w / s\n    return q.to(torch.int32)"),
    ("narrow-numerics", "def f(q):\n    return q.trunc()"),
    ("narrow-numerics", "def f(y):\n    return y - y.frac()"),
    ("narrow-numerics", "import torch\ndef f(w):\n    return torch.Tensor.view(w, torch.uint16) & 0xFF00"),
    ("narrow-numerics", "import torch\ndef f(a, b, s):\n    return torch.nn.functional.scaled_mm(a, b, s, s)"),
    ("narrow-numerics", "import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b, out_dtype=tl.float16)"),
    ("dynamic-name", "import triton.language as tl\nd = tl.dtype('fp' + str(8) + 'e4nv')"),
    ("foreign-code", "import torch\nc = torch.ops.aten.to.dtype"),
    ("foreign-code", "import torch\ndef be(gm, x):\n    return gm.forward\nf = torch.compile(abs, backend=be)"),
    ("foreign-code", "import torch.utils.collect_env as c\nc.run('true')"),
    ("foreign-code", "import torch.utils.benchmark as b\nt = b.Timer(stmt='x')"),
    ("foreign-code", "import triton.language as tl\nf = tl.inline_asm_elementwise"),
    ("foreign-code", "class T:\n    @property\n    def __cuda_array_interface__(self):\n        return {}"),
    ("dynamic-name", "import json\ndef f(w):\n    return w.type(json.loads('\"torch.Float\"'))"),
    ("foreign-code", "import typing\ndef f(x: T):\n    pass\nh = typing.get_type_hints(f)"),
    ("foreign-code", "import torch.fx\ng = torch.fx.Graph()"),
    ("foreign-code", "from diffusers.pipelines.pipeline_loading_utils import get_class_obj_and_candidates"),
    ("narrow-numerics", "import torch\nif w.dtype == torch.uint8:\n    pass"),
    # file access: builtins, os, pathlib, numpy, torch, pickle, mmap, tempfile, shutil, glob, and imports of them
    ("file-io", "f = open('/data/ref_f1.pt', 'rb')"),
    ("file-io", "import io\nio.open('x')"),
    ("file-io", "import os\nfd = os.open('x', os.O_RDONLY)"),
    ("file-io", "import os\nos.read(3, 10)"),
    ("file-io", "import os\nos.write(1, b'forged result')"),
    ("file-io", "import os\nos.path.exists('/data/ref_f1.pt')"),
    ("file-io", "import os\nos.listdir('/data')"),
    ("file-io", "import os\nfor x in os.walk('/'):\n    pass"),
    ("file-io", "import os\nos.makedirs('/dev/shm/cache')"),
    ("file-io", "import os\nos.remove('x')"),
    ("file-io", "from pathlib import Path"),
    ("file-io", "import pathlib\npathlib.Path('x').read_bytes()"),
    ("file-io", "def f(p):\n    return p.write_text('cache')"),
    ("file-io", "import numpy as np\nnp.load('x.npy')"),
    ("file-io", "import numpy\nnumpy.save('x', 1)"),
    ("file-io", "import numpy as np\nnp.fromfile('x')"),
    ("file-io", "import numpy as np\nnp.memmap('x')"),
    ("file-io", "import torch\ntorch.load('/data/ref_f1.pt')"),
    ("file-io", "from torch import save"),
    ("file-io", "import torch\ntorch.UntypedStorage.from_file('x')"),
    ("file-io", "import pickle"),
    ("file-io", "import shelve"),
    ("file-io", "from marshal import loads"),
    ("file-io", "import mmap"),
    ("file-io", "import tempfile"),
    ("file-io", "import shutil"),
    ("file-io", "import glob"),
    ("file-io", "import sys\nsys.stdin.read()"),
    ("file-io", "x = __loader__.get_data('/data/ref_f1.pt')"),
    ("file-io", "import posix\nposix.open('x', 0)"),                 # os under another name
    ("file-io", "import spec\nspec.load_reference('f121')"),           # the harness's own loaders, through spec
    ("file-io", "from spec import calibration"),
    ("file-io", "import reference\nreference.spec.load_latents('x')"),
    ("file-io", "import torchvision\ntorchvision.io.read_video('x')"),  # a package's re-export of a banned module
    ("file-io", "from PIL import Image\nImage.open('x.png')"),         # well-known third-party readers
    ("file-io", "def f(model_cls):\n    return model_cls.from_pretrained('x')"),
    # network
    ("network", "import socket"),
    ("network", "import urllib.request"),
    ("network", "from http import client"),
    ("network", "import requests"),
    ("network", "import httpx"),
    ("network", "import aiohttp"),
    ("network", "import ftplib"),
    ("network", "import smtplib"),
    # processes, threads, work that runs later
    ("process", "import subprocess"),
    ("process", "import os\nos.system('nvidia-smi')"),
    ("process", "import os\nos.popen('ls')"),
    ("process", "import os\nos.fork()"),
    ("process", "import os\nos.execv('/bin/sh', [])"),
    ("process", "import os\nos.spawnl(0, 'x')"),
    ("process", "import os\nos.kill(1, 9)"),
    ("process", "import os\nos._exit(0)"),
    ("process", "import multiprocessing"),
    ("process", "import threading"),
    ("process", "import _thread"),
    ("process", "from concurrent.futures import ThreadPoolExecutor"),
    ("process", "import asyncio"),
    ("process", "import signal"),
    ("process", "import atexit"),
    ("process", "import torch.multiprocessing as mp"),
    ("process", "import torch\nfut = torch.jit.fork(len, [])"),
    ("process", "class Later:\n    def __del__(self):\n        pass"),
    ("process", "import torch\nd = torch.utils.data.DataLoader([], num_workers=4)"),
    ("process", "import spec\nspec.os.system('x')"),                   # a re-export through spec
    ("process", "import torch\ntorch.os.system('x')"),                 # ... and through torch
    # environment
    ("environment", "import os\nseed = os.environ['SEED']"),
    ("environment", "import os\nos.environ.get('MASTER_PORT')"),
    ("environment", "from os import environ"),
    ("environment", "import os\nos.getenv('X')"),
    ("environment", "import os\nos.putenv('X', '1')"),
    ("environment", "import os\nos.unsetenv('X')"),
    ("environment", "import sys\nprint(sys.argv)"),
    ("environment", "import spec\nspec.data_dir()"),                   # reads $DATA
    # code the audit cannot read
    ("foreign-code", "import ctypes"),
    ("foreign-code", "from ctypes import CDLL"),
    ("foreign-code", "import cffi"),
    ("foreign-code", "import torch\ntorch.ops.load_library('x.so')"),
    ("foreign-code", "import torch\ntorch.classes.load_library('x.so')"),
    ("foreign-code", "import importlib\nimportlib.import_module('bench')"),
    ("foreign-code", "import importlib.util"),
    ("foreign-code", "m = __import__('os')"),
    ("foreign-code", "exec('import os')"),
    ("foreign-code", "x = eval('1 + 1')"),
    ("foreign-code", "c = compile('x', 'f', 'exec')"),
    ("foreign-code", "from torch.utils.cpp_extension import load_inline"),
    ("foreign-code", "import sys\nsys.path.insert(0, '/tmp')"),
    ("foreign-code", "import numpy as np\nnp.ctypeslib.load_library('x', '.')"),
    ("foreign-code", "import torch\na = torch.cuda.memory.CUDAPluggableAllocator('x.so', 'alloc', 'free')"),
    # another module's state
    ("monkeypatch", "import torch\ntorch.cuda.synchronize = lambda *a: None"),
    ("monkeypatch", "import time\ntime.perf_counter = lambda: 0.0"),
    ("monkeypatch", "import builtins\nbuiltins.print = None"),
    ("monkeypatch", "import torch\ntorch.Tensor.__eq__ = lambda a, b: True"),
    ("monkeypatch", "import spec\nspec.ERROR_FACTOR = 99"),
    ("monkeypatch", "import reference\nreference.decode = None"),
    ("monkeypatch", "import torch.distributed as dist\ndist.barrier = lambda *a, **k: None"),
    ("monkeypatch", "import torch\ntorch.cuda.Event.elapsed_time += 1"),
    ("monkeypatch", "import torch\nsetattr(torch.cuda, 'synchronize', None)"),
    ("monkeypatch", "import time\ndelattr(time, 'perf_counter')"),
    ("monkeypatch", "import time\ndel time.perf_counter"),
    ("monkeypatch", "import sys\nsys.modules['bench'] = None"),
    ("monkeypatch", "__builtins__['open'] = None"),
    ("monkeypatch", "import spec\nspec.__dict__['ERROR_FACTOR'] = 99"),
    ("monkeypatch", "import spec\nspec.CLIPS.update({})"),
    ("monkeypatch", "import torch\nt = torch\nt.cuda.synchronize = None"),     # an alias of a module
    ("monkeypatch", "def run(z, weights, rank, world, pg, out):\n    type(out).__eq__ = None"),
    ("monkeypatch", "import torch\n[torch][0].load = None"),                    # a root the audit cannot trace
    ("monkeypatch", "import torch\nlib = torch.library.Library('aten', 'IMPL')"),
    ("monkeypatch", "import torch\nclass T(torch.Tensor):\n    def __torch_dispatch__(cls, f, t, a, k):\n"
                    "        pass"),
    ("monkeypatch", "import torch\ntorch.set_default_dtype(torch.float16)"),
    ("monkeypatch", "import operator, spec\noperator.setitem(spec.CLIPS, 'f1', {})"),
    ("monkeypatch", "import torch\ntorch.ops.aten.allclose.default.py_impl(None)"),   # an aten op's Python kernel
    ("monkeypatch", "import torch\ntorch._C._dispatch_tls_set_dispatch_key_excluded(1, True)"),
    ("monkeypatch", "import torch\ntorch.backends.cudnn.benchmark = True"),   # global state: allow it with a reason
    ("monkeypatch", "import torch\nstate = torch._C._get_tracing_state()"),    # torch's private bindings
    # state kept between calls (more in REVIEW_FIRES)
    ("state", "_cache = {}\ndef run(z, weights, rank, world, pg, out):\n    _cache[z.shape] = z"),
    # the harness
    ("harness-import", "import bench"),
    ("harness-import", "from loader import load"),
    ("harness-import", "import audit"),
    ("harness-import", "import ci"),
    ("harness-import", "import bounds"),
    ("harness-import", "from data import make"),
    ("harness-import", "from harness.judge import checks"),
    # interpreter internals
    ("introspection", "import gc\ngc.get_objects()"),
    ("introspection", "import inspect"),
    ("introspection", "import sys\nf = sys._getframe(1)"),
    ("introspection", "import sys\nsys.settrace(None)"),
    ("introspection", "import sys\nsys.setprofile(None)"),
    ("introspection", "import traceback\ntraceback.walk_stack(None)"),
    ("introspection", "def f():\n    pass\nc = f.__code__"),
    ("introspection", "def f():\n    pass\ng = f.__globals__"),
    ("introspection", "def f(frame):\n    return frame.f_back.f_locals"),
    ("introspection", "x = object.__subclasses__()"),
    ("introspection", "y = print.__self__"),                        # the builtins module
    ("introspection", "g = globals()"),
    ("introspection", "try:\n    raise ValueError\nexcept ValueError as e:\n    t = e.__traceback__"),
    ("introspection", "import torch\nv = vars(torch)"),
    # names chosen at run time
    ("dynamic-name", "import os\ndef f(name):\n    return getattr(os, name)"),
    ("dynamic-name", "from torch import *"),
    ("dynamic-name", "from spec import *"),
    ("dynamic-name", "from .helper import *"),
    ("dynamic-name", "g = getattr"),
    ("dynamic-name", "import operator\nf = operator.attrgetter('system')"),
    ("dynamic-name", "import torch\ndef f(m):\n    return m\nf(torch)"),          # a module as a value ...
    ("dynamic-name", "import torch\nclass C:\n    t = torch"),                    # ... as a class attribute
    ("dynamic-name", "import os\nclass C:\n    def __init__(self):\n        self.o = os"),
    ("dynamic-name", "import os.path\nmods = [os.path]"),
    # narrower than bf16: identifiers, attributes, strings
    ("narrow-numerics", "import torch\nw = torch.float8_e4m3fn"),
    ("narrow-numerics", "import torch\nw = torch.float8_e5m2"),
    ("narrow-numerics", "import torch\nw = torch.float8_e4m3fnuz"),
    ("narrow-numerics", "import torch\nw = torch.float8_e5m2fnuz"),
    ("narrow-numerics", "import torch\nw = torch.float8_e8m0fnu"),
    ("narrow-numerics", "import torch\nw = torch.float4_e2m1fn_x2"),
    ("narrow-numerics", "import triton.language as tl\nw = tl.float8e4nv"),
    ("narrow-numerics", "import triton.language as tl\nw = tl.float8e5"),
    ("narrow-numerics", "def f(x, fp8e4nv):\n    return x"),
    ("narrow-numerics", "use_nvfp4 = True"),
    ("narrow-numerics", "mxfp8_scale = 1"),
    ("narrow-numerics", "import torch\nw = getattr(torch, 'float8_e4m3fn')"),
    ("narrow-numerics", "DTYPE = 'float8_e5m2'"),
    ("narrow-numerics", "import torch\ny = torch._scaled_mm"),
    ("narrow-numerics", "def q(x, s):\n    return (x / s + 12582912.0 - 12582912.0) * s"),
    ("narrow-numerics", "MAGIC = 1.5 * 2 ** 23"),
    ("narrow-numerics", "MAGIC = 3 << 51"),
    ("foreign-code", "class Span:\n    def __init__(self, p):\n        self.__cuda_array_interface__ = {'data': (p, False)}"),
    ("narrow-numerics", "import torch\nq = torch.qint8"),
    ("narrow-numerics", "import torch.ao.quantization"),
    ("narrow-numerics", "ASM = 'cvt.rn.satfinite.e4m3x2.f32 %0, %1;'"),
    # C++ source inside a Python string is read as C++
    ("file-io", "SRC = 'extern \"C\" void k() { FILE* f = fopen(\"x\", \"r\"); }'"),
    ("environment", "SRC = '''\n#include <cstdlib>\nvoid k() { getenv(\"X\"); }\n'''"),
    # a Python file that does not parse cannot be audited
    ("unaudited-file", "def run(:\n"),
    # `match` patterns read attributes and items by name; a submodule reached by attribute is a module all the same
    ("dynamic-name", "def f(x):\n    match x:\n        case object(int8=i8):\n            return i8"),
    ("dynamic-name", "def f(d):\n    match d:\n        case {'open': o}:\n            return o"),
    ("dynamic-name", "import torch\ndef f(m):\n    return m\nf(torch.nn.functional)"),
    ("foreign-code", "def f(m, v):\n    return m.torch.ops.aten._cast_Char(v)"),
    ("foreign-code", "import torch\nu = (t := torch).jit.CompilationUnit('def f(x): return x')"),
    ("file-io", "import torch\nf = torch.utils.model_zoo.load_url"),
    # logging.config reads files and turns text into any object; a logger's filters run on every record
    ("file-io", "import logging.config\nx = logging.config.BaseConfigurator({}).resolve('builtins.exec')"),
    ("monkeypatch", "import logging\nlogging.getLogger('x').filters.append(1)"),
    ("foreign-code", "import codecs\nd = codecs.lookup('rot13')"),
    # torch's tool boxes name by name: file batons, trace observers, data loaders by their module
    ("foreign-code", "import torch.utils.file_baton\nb = torch.utils.file_baton.FileBaton('x')"),
    ("foreign-code", "import torch\no = torch.profiler.ExecutionTraceObserver()"),
    ("foreign-code", "from torch.utils.data.dataloader import DataLoader"),
    ("foreign-code", "from diffusers import AutoencoderKLWan\nc = AutoencoderKLWan.load_config('x')"),
    ("file-io", "def f(vae):\n    vae.save_config('x')"),
    ("file-io", "import torch\ntorch.cuda.tunable.write_file('x')"),
    ("process", "import weakref\ndef f(x, g):\n    return weakref.ref(x, g)"),
    ("foreign-code", "import torch\nf = torch.compile(abs, options={'trace.debug_dir': 'x'})"),
    ("foreign-code", "import torch\nkw = {'backend': 'x'}\nf = torch.compile(abs, **kw)"),
    # torch's loaders of compiled artifacts and objects unpickle any code; the streams' buffers open files
    ("foreign-code", "import torch\ntorch.compiler.load_cache_artifacts(b'x')"),
    ("foreign-code", "import torch\nf = torch.compiler.load_compiled_function(None)"),
    ("foreign-code", "import torch.distributed as dist\ndef f(x):\n    dist.broadcast_object_list(x)"),
    ("file-io", "import sys\nF = type(sys.stdout.buffer)"),
    ("file-io", "import sys\ndef f(s):\n    return s\nf(sys.stderr)"),
    ("file-io", "import sys\ndef print(*a, file=None):\n    return type(file.buffer)\nF = print(file=sys.stdout)"),
    ("foreign-code", "import torch.distributed.distributed_c10d as c\ndef f(x):\n    c.broadcast_object_list(x)"),
    ("file-io", "import torch\ng = torch.cuda.gds.GdsFile('x', 0)"),
    ("narrow-numerics", "import triton.language as tl\ndef k(a, s):\n    return tl.dot_scaled(a, s, 'e4m3', a, s, 'e4m3')"),
]


@pytest.mark.parametrize("rule, source", PY_FIRES)
def test_python_rule_fires(tmp_path, rule, source):
    report = audit_py(tmp_path, source + "\n")
    assert rule in fired(report), f"{rule} did not fire on:\n{source}\n{audit.format_report(report)}"
    assert not report.ok or rule not in audit.FAILS       # a review note passes; a failing rule's finding fails


# Evasions that name a banned thing indirectly.
@pytest.mark.parametrize("source", [
    "o = open\no('x')",                                              # an alias of a builtin
    "import torch as t\nl = t.load\nl('x')",                         # an alias of a member
    "import torch\ng = getattr(torch, 'lo' + 'ad')",                 # getattr of a constant expression
    "[o('p') for o in [open]]",                                      # a comprehension over the builtin
    "[open(p) for open in [open]]",                                  # shadowing inside, builtin outside
    "def f(o=open):\n    return o('x')",                             # a default argument
    "if False:\n    open = None\nopen('x')",                        # a module-level binding may not happen
    "ｏｐｅｎ('x')",                                                  # NFKC-normalised identifier
])
def test_python_indirect_file_access_fires(tmp_path, source):
    assert "file-io" in fired(audit_py(tmp_path, source + "\n"))


PY_QUIET = [
    "V_BYTES = 512 << 20\nBIG = 1 << 40\nN = 2 ** 22 + 1.5 * 2 ** 22",          # sizes, not rounders
    '"""Decodes with fp8? No: bf16. torch.load, open() and os.environ are only words here."""',
    "# fp8, torch.load('x'), open('x'), import pickle: comments are not code",
    "def f():\n    'a bare string statement mentioning float8_e4m3fn'\n    return 1",
    "open_frames = 3\nreopen = open_frames + 1",                       # names that merely contain `open`
    "class C:\n    def read_cache(self):\n        return self.cache\n    def open(self):\n        return 1\n"
    "c = C()\nc.read_cache()\nc.open()",                               # methods on the solution's own objects
    "def f(x):\n    return x.open(), x.read(), x.write, x.mmap_mode, x.load, x.save",
    "import torch\nx = torch.zeros(1, dtype=torch.float16).to(torch.bfloat16).to(torch.float32)",
    "import torch\nx = torch.float64\ny = torch.int16\nz = torch.int64",
    "import torch\nf = torch.compile(abs, backend='inductor', dynamic=True)",
    "class C:\n    def __init__(self):\n        super().__init__()\n        self._rows = 1\n    def f(self):\n"
    "        return self._rows, self.__class__.__name__",
    "import reference\np = reference._path('decoder.conv_in')",     # the project's own names: audited there
    "import torch.nn.functional as F\nimport torch\ny = F.pad(torch.zeros(2), (1, 1))",
    "import os\np = os.path.join(os.path.dirname(__file__), 'kernels.cu')\nn = os.cpu_count()",
    "from spec import WEIGHTS, weight_list, TINY\nimport spec\nn = spec.frames(5)\nw = spec.weight_list(TINY)",
    "import reference\ndef run(z, weights, rank, world, pg, out):\n    reference.run(z, weights, rank, world, pg, out)",
    "import torch\ntorch.cuda.synchronize()\ntorch.cuda.current_stream().synchronize()",
    "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\ntorch.cuda.set_stream(s)\n"
    "e = torch.cuda.ExternalStream(0)",
    "def f(input, compile, exec):\n    return input.shape, compile, exec",  # parameters shadow builtins
    "def f():\n    open = 3\n    return open",
    "x = [open for open in range(3) if open > 1]",                     # comprehension-local in its first `if`
    "import torch\ny = getattr(torch, 'bfloat16')\nz = getattr(y, 'itemsize', None)",
    "x = {}\nx['a'] = 1\nclass C:\n    pass\nC.attr = 2\ndef f(out, cache):\n    out[0] = 1\n"
    "    cache.value = 2\n    out.view(-1)[0] = 3",                     # stores into the solution's own state
    "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
    "    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n    tl.store(x_ptr, x.to(tl.bfloat16))",
    "from diffusers import AutoencoderKLWan",                            # third-party packages are fine
    "from . import kernels\nfrom .kernels import launch",                # the solution's own modules
    "import torch\ny = torch.compile(lambda x: x)\nm = torch.nn.Conv2d(1, 1, 1).eval()",
    "import torch.distributed as dist\ndef run(z, weights, rank, world, pg, out):\n"
    "    dist.all_reduce(z, group=pg)\n    dist.barrier(group=pg)",
    "import sys\nprint('x', file=sys.stderr)\nv = sys.version_info",
    "msg = 'cannot open the file named in os.environ: use float16'",     # prose strings name no format
    "import math, functools, dataclasses, itertools, collections, typing, contextlib\n",
    "x = [i for i in range(3)]\ny = {k: v for k, v in zip('ab', 'cd')}\nz = lambda a: a",
    "import triton.language as tl\ndef f(m):\n    return m.to(tl.int1)",     # Triton's boolean, not a 1-bit int
    "import torch\nt = torch\nx = t.zeros(1)\nfor m in (torch,):\n    pass\nok = torch is not None\n"
    "isinstance(x, torch.Tensor)\nhasattr(torch, 'compile')",                # plain aliases are followed
    "import torch\ndef f(m):\n    return m.load_state_dict({}, strict=False, assign=True)",
    "import torch\ndef f(m):\n    with torch.profiler.record_function('decoder'):\n        return m",
    "import sys\nfrom sys import stderr\nprint('x', file=sys.stderr)\nprint('y', file=stderr)\nsys.stderr.write('z')\n"
    "sys.stdout.flush()",
    "import torch\n@torch.compiler.disable\ndef f(x):\n    return x",
    "def f(world):\n    match world:\n        case 1 | 2:\n            return 0\n        case _:\n            return 1",
]


@pytest.mark.parametrize("source", PY_QUIET)
def test_python_near_miss_is_quiet(tmp_path, source):
    report = audit_py(tmp_path, source + "\n")
    assert report.ok, audit.format_report(report)


# ---------------------------------------------------------------------------------------------------------------
# C/C++/CUDA: text with comments blanked.

CPP_FIRES = [
    ("file-io", "#include <fstream>\n"),
    ("file-io", "#include <fcntl.h>\n"),
    ("file-io", "#include <sys/mman.h>\n"),
    ("file-io", "#include <filesystem>\n"),
    ("file-io", "void f() { FILE* p = fopen(\"/data/ref_f1.pt\", \"rb\"); }\n"),
    ("file-io", "void f() { std::ifstream in(\"x\"); }\n"),
    ("file-io", "void f(int fd) { posix_fallocate(fd, 0, 1L << 31); fallocate(fd, 0, 0, 1L << 31); }\n"),
    ("file-io", "void f() { auto t = torch::load(\"x\"); }\n"),
    ("file-io", "void f() { int fd = ::open(\"x\", 0); }\n"),
    ("file-io", "void f() { void* p = mmap(0, 1, 0, 0, 0, 0); }\n"),
    ("file-io", "extern \"C\" long write(int, const void*, unsigned long);\nvoid f() { write(3, \"ok\", 2); }\n"),
    ("file-io", "static const char ref[] = {\n#embed \"/data/ref_f1.pt\"\n};\n"),
    ("file-io", "void f() { FILE* p = fo\\\npen(\"x\", \"r\"); }\n"),   # a line splice inside an identifier
    ("file-io", "void f() { std::rename(\"a\", \"b\"); }\n"),
    ("process", "#include <thread>\nvoid f() { std::thread t([] {}); }\n"),
    ("process", "void f() { system(\"ls\"); }\n"),
    ("process", "void f() { pthread_create(0, 0, 0, 0); }\n"),
    ("process", "__attribute__((constructor)) void early() {}\n"),
    ("process", "__attribute__((section(\".init_array\"))) void (*early)() = f;\n"),
    ("process", "void f() { std::system(\"ls\"); }\n"),
    ("environment", "void f() { const char* s = std::getenv(\"SEED\"); }\n"),
    ("state", "#include <sys/shm.h>\n"),
    ("state", "void f() { int id = shmget(1, 4096, 01600); }\n"),
    ("state", "void f() { int fd = shm_open(\"/k\", 66, 0600); }\n"),
    ("state", "void f() { add_key(\"user\", \"k\", p, n, -4); }\n"),
    ("network", "#include <sys/socket.h>\n"),
    ("network", "void f() { int s = socket(2, 1, 0); }\n"),
    ("foreign-code", "#include <dlfcn.h>\nvoid f() { dlopen(\"libx.so\", 1); }\n"),
    ("foreign-code", "void f() { auto os = py::module_::import(\"os\"); }\n"),
    ("foreign-code", "void f() { PyRun_SimpleString(\"import os\"); }\n"),
    ("foreign-code", "void f(py::object o) { o.attr(\"__class__\"); }\n"),
    ("monkeypatch", "TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl(\"allclose\", &f); }\n"),
    ("monkeypatch", "void f() { mprotect(0, 4096, 7); }\n"),
    ("narrow-numerics", "#include <cuda_fp8.h>\n"),
    ("narrow-numerics", "#include <cuda_fp4.h>\n"),
    ("narrow-numerics", "__device__ __nv_fp8_e4m3 x;\n"),
    ("narrow-numerics", "__device__ __nv_fp4_e2m1 x;\n"),
    ("narrow-numerics", "auto t = at::kFloat8_e4m3fn;\n"),
    ("narrow-numerics", "auto t = c10::ScalarType::Float8_e5m2;\n"),
    ("narrow-numerics", "asm volatile(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1;\" : \"=h\"(r) : \"f\"(a));\n"),
    ("narrow-numerics", "asm volatile(\"tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1;\");\n"),
    ("narrow-numerics", "asm volatile(\"mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 ...\");\n"),
    ("narrow-numerics", "using T = cutlass::float_e4m3_t;\n"),
    ("narrow-numerics", "asm(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 ...\");\n"),
    ("dynamic-name", "#define CAT(a, b) a##b\nvoid f() { CAT(fo, pen)(\"x\", \"r\"); }\n"),
    ("dynamic-name", "#include HEADER_FROM_A_MACRO\n"),
    ("unaudited-file", "#include \"../../data/ref.h\"\n"),
    ("unaudited-file", "#include </etc/passwd>\n"),
    # a name the rules ban, called under another: an asm label (its symbol split over literals, joined as the
    # compiler joins them), its address, a value, a using-declaration, a macro, a bracket hidden in a macro
    ("dynamic-name", 'extern "C" int sys_o(const char*, int, ...) __asm__("op" "en");\n'),
    ("dynamic-name", 'extern "C" long rd(int, void*, unsigned long) asm("re" "ad");\n'),
    ("process", 'long f(long n) { long r; asm volatile("sys" "call" : "=a"(r) : "a"(n)); return r; }\n'),
    ("process", "void f() { auto pf = &fork; pf(); }\n"),
    ("process", "int (*g())() { return fork; }\n"),
    ("process", "namespace x { using ::execv; }\n"),
    ("file-io", "#define OPEN open\nint f() { return OPEN(\"x\", 0); }\n"),
    ("dynamic-name", "#define LP (\nint f() { return open LP \"x\", 0); }\n"),
    # 8-bit numbers by any spelling: glibc's, GCC's machine mode, a ScalarType by number, a byte cast
    ("narrow-numerics", "__int8_t q;\n"),
    ("narrow-numerics", "typedef int i8 __attribute__((mode(QI)));\n"),
    ("narrow-numerics", "auto f(at::Tensor w) { return w.to(static_cast<c10::ScalarType>(1)); }\n"),
    ("narrow-numerics", "float r(float x, float s) { char c = (char)(x / s); return c * s; }\n"),
    ("narrow-numerics", "float r(float x, float s) { return roundevenf(x / s) * s; }\n"),
    ("narrow-numerics", 'asm("dp" "4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));\n'),
    # a header name holds no comment (`<none/*>`); a number holds its separators (`.1'x`): neither hides code
    ("narrow-numerics", "#if __has_include(<none/*>)\n#endif\nfloat r(float v, float s) { return (char)(v / s) * s; }\n"
                        "int z = 1 */**/ 2;\n"),
    ("narrow-numerics", "#define IGNORE(...)\nIGNORE(a.1'x' /* ')\nfloat r(float v, float s) { return (char)(v / s) * s; }"
                        "\nint z = 1 */**/ 2;\n"),
    # a `<` on a #define line opens no header name; `$` and non-ASCII characters belong to the identifier before `R"`
    ("narrow-numerics", "#define Q8(v, s) (1 < /* x > // */ 2 ? (char)(v / s) * s : 0)\n"),
    ("narrow-numerics", 'const char* a = x$R"(q"; const char* b = "/*";\nfloat r(float v, float s) { return (char)(v / s) * s; }\n'
                        "// */\n"),
    ("narrow-numerics", 'const char* a = x\u00a8R"(q"; const char* b = "/*";\n'
                        "float r(float v, float s) { return (char)(v / s) * s; }\n// */\n"),
    ("file-io", "template <int (*F)(const char*, int, ...)> int opener(const char* p) { return F(p, 0); }\n"
                "int f(const char* p) { return opener<open>(p); }\n"),
    ("file-io", "auto f() { return +read; }\n"),
    ("process", "using ForkT = int(); ForkT* f{fork};\n"),
    ("narrow-numerics", "int_least8_t q; std::byte b;\n"),
    # read as C++17 reads it (no trigraphs; `L'a"'` a character literal) as well as with trigraphs: a string that
    # one reading ends early opens no comment that hides code from the rules
    ("file-io", 'const char* a = "??/"; const char* b = "/*";\nint f() { return open("x", 0); }\nconst char* c = "*/";\n'),
    ("file-io", 'int k = L\'a"\'; const char* d = "/*";\nint f() { return open("x", 0); }\nconst char* e = "*/";\n'),
    # Python reached from C++ beyond a binding's module definition; libtorch's and the C++ library's file readers;
    # ATen's thread pool; load-time code by any attribute spelling; calls from assembly; 16-bit accumulation
    ("foreign-code", 'PyObject* f() { return PySys_GetObject("modules"); }\n'),
    ("foreign-code", 'PyObject* f(PyObject* o, PyObject* a) { return o->ob_type->tp_call(o, a, nullptr); }\n'),
    ("foreign-code", 'py::object f(py::object m) { return py::getattr(m, "system"); }\n'),
    ("foreign-code", 'namespace q = pybind11;\n'),
    ("foreign-code", 'void f(pybind11::module_& m) { m.import("os"); }\n'),
    ("file-io", 'at::Tensor f() { return at::from_file("x", c10::nullopt, 4); }\n'),
    ("file-io", 'void f(at::Tensor t) { torch::serialize::OutputArchive a; a.write("t", t); a.save_to("x"); }\n'),
    ("file-io", 'std::basic_ifstream<char> f("x");\n'),
    ("process", 'void f(at::Tensor o, at::Tensor s) { at::launch([=]() mutable { o.copy_(s); }); }\n'),
    ("process", '__attribute__((used, constructor)) static void first() {}\n'),
    ("process", '__attribute__((__constructor__)) static void second() {}\n'),
    ("process", '[[gnu::__destructor__]] static void third() {}\n'),
    ("foreign-code", 'asm(".text\\n.globl wan_o\\nwan_o:\\n jmp open@PLT\\n");\n'),
    ("foreign-code", 'void f() { asm volatile("nop; call open"); }\n'),
    ("foreign-code", 'void f() { asm volatile("jmp open"); }\n'),
    ("narrow-numerics", "wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc;\n"),
    ("narrow-numerics", 'asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2};");\n'),
    ("narrow-numerics", 'asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {%0}, %1, %2;");\n'),
    ("narrow-numerics", "__device__ half2 f(half2 a, half2 s) { return __hfma2(a, a, s); }\n"),
    # host assembly by a register; libtorch's namespaces made bare; the dispatcher; TorchScript from C++
    ("foreign-code", 'int f(const char* c) { int r; asm volatile("movabs $system+0, %%rax\\n\\tcall *%%rax" : "=a"(r) '
                     ': "D"(c)); return r; }\n'),
    ("dynamic-name", "using namespace at;\nvoid f() { launch([]() {}); }\n"),
    ("dynamic-name", "namespace A = ::c10;\n"),
    ("dynamic-name", "#define NS at\nvoid f() { NS::launch([]() {}); }\n"),
    ("monkeypatch", 'void f() { auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::x", ""); }\n'),
    ("foreign-code", 'int64_t f(const std::string& s) { return torch::jit::compile(s)->run_method("f").toInt(); }\n'),
    ("process", "#define AT_LOAD constructor\n__attribute__((AT_LOAD)) static void f() {}\n"),
    ("foreign-code", 'asm(".intel_syntax noprefix\\n clc\\n jnb system\\n .att_syntax");\n'),
    ("foreign-code", 'void f() { asm volatile("jmp *(%%r12)"); }\n'),
    ("monkeypatch", 'static torch::Library lib(torch::Library::IMPL, "x", c10::DispatchKey::CPU, "f.cpp", 1);\n'),
    ("monkeypatch", "TORCH_LIBRARY_IMPL(_, CPU, m) { m.fallback(f); }\n"),
    ("dynamic-name", "#define SCRIPT jit\nint64_t f(const std::string& s) { return torch::SCRIPT::compile(s); }\n"),
    ("dynamic-name", "#define NS(x) at::x\nvoid f() { NS(launch)([]() {}); }\n"),
]


@pytest.mark.parametrize("rule, source", CPP_FIRES)
def test_cpp_rule_fires(tmp_path, rule, source):
    report = audit_cpp(tmp_path, source)
    assert rule in fired(report), f"{rule} did not fire on:\n{source}\n{audit.format_report(report)}"


def test_spec_file_io_rule_is_used_verbatim():
    import re
    import spec
    rules = {(r, kind, rx.pattern) for r, kind, rx, _ in audit.CPP_RULES}
    assert ("file-io", "include", spec.RULES["file-io"]["include"]) in rules
    assert ("file-io", "text", spec.RULES["file-io"]["text"]) in rules
    assert audit.RULES["file-io"] == spec.RULES["file-io"]["why"]
    assert re.search(spec.RULES["file-io"]["text"], "fread(")


CPP_QUIET = [
    "// fopen, getenv, system(), __nv_fp8_e4m3 and e4m3 in a comment\n"
    "/* std::thread, dlopen,\n   #include <fstream> */\n",
    "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cstdio>\n#include <torch/extension.h>\n",
    "__global__ void k(const float4* __restrict__ x, float4* y) { float4 v = x[threadIdx.x]; y[0] = v; }\n",
    "void f() { int n = 1'000'000; printf(\"%d\\n\", n); fprintf(stderr, \"error\\n\"); }\n",
    "void f(Reader& r, Writer* w) { r.read(1); w->write(2); r.open_frames(); auto g = std::bind(f, 1); }\n",
    "void f(cudaStream_t s) { cudaStreamSynchronize(s); cudaMemcpyAsync(0, 0, 0, cudaMemcpyDeviceToDevice, s); }\n",
    "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7};\");\n",
    "TORCH_LIBRARY(wan_vae, m) { m.def(\"decode(Tensor z) -> Tensor\"); }\n"
    "TORCH_LIBRARY_IMPL(wan_vae, CUDA, m) { m.impl(\"decode\", &decode); }\n",
    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"go\", &go, \"launch\"); }\n",
    "const char* s = \"http://x // not a comment\"; int bf16_tiles = 4; using T = __nv_bfloat16;\n",
    "#define CHECK(x) do { if (!(x)) { printf(#x); } } while (0)\n",
    "at::Tensor f(const at::Tensor& x) { auto y = at::clone(x); return x.clone().contiguous(); }\n",
    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"go\", &go, py::arg(\"x\"), "
    "py::call_guard<py::gil_scoped_release>()); }\n",
    "static PyObject* f(PyObject*, PyObject* a) { Py_ssize_t n; if (!PyArg_ParseTuple(a, \"n\", &n)) return nullptr;"
    " return PyLong_FromSsize_t(n); }\n",
    "__device__ float f(__nv_bfloat16 a) { return __bfloat162float(a); }\n"
    "wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;\n",
    "asm volatile(\"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0}, %1, %2;\");\n"
    "asm volatile(\"ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];\");\n",
    "void f(int* jb, int n) { for (int je = 0; je < n; ++je) jb[je] = je; }\n",
    "using torch::Tensor;\nnamespace F = torch::nn::functional;\nusing namespace torch::indexing;\n",
    "#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x \" must be on CUDA\")\n"
    "#define DIV_UP(a, b) (((a) + (b) - 1) / (b))\n#define HD __host__ __device__\n#define WARP 32\n"
    "#define TILE TILE_M\n__device__ void f(float* x) { asm volatile(\"bar.sync 0;\"); }\n",
]


def test_cpp_quiet_near_the_new_rules(tmp_path):
    """Pointers to bytes, asm statements, names that merely contain a banned one, index arithmetic."""
    report = audit_cpp(tmp_path, 'void f(void* p, int n) { char* c = (char*)p; auto d = static_cast<char*>(p);\n'
                                 '  asm volatile("cp.async.commit_group;"); int reader = n; g(reader, &reader);\n'
                                 '  if (n < 0) asm("trap;"); extern __shared__ unsigned char smem[]; }\n'
                                 'std::vector<at::ScalarType> types(2, at::kFloat);\n#define LOOP_END }\n'
                                 '#include <cuda_bf16.h>\n#if __has_include(<cuda_fp16.h>)\n#endif\n'
                                 '#define LT(a, b) ((a) < (b)) /* true when b > a;\n   unlike fopen(), no file */\n')
    assert not report.findings, audit.format_report(report)


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
def test_the_compiler_reads_no_code_that_the_audit_reads_as_a_comment(monkeypatch):
    """compiler_disagrees asks the compiler to strip the comments and fails a file where the compiler reads code on
    a line that the audit blanked; code the audit reads and the compiler does not (a `//` comment continued by a
    splice) is no disagreement."""
    from harness.audit import cpp
    honest = ('#pragma once\n#include "kern.h"  // local\n/* block\n   comment */\nint big = 1\'000\'000;\n'
              'char c = \'\\\'\', d = \'"\'; const char* s = "a \\" // b /* c";\nauto r = R"x(raw "/* y */" )x";\n'
              'wchar_t w = L\'x\'; auto z = u8"z"; int a; // note \\\nint continued;\n')
    assert cpp.compiler_disagrees(honest) is None
    assert "line directive" in cpp.compiler_disagrees('#line 40 "x.cu"\nint a;\n')
    real = cpp._strip

    def hides(text, trigraphs):      # an audit that took `int big` for a comment
        code, line_of, comments, spliced, blanked = real(text, trigraphs)
        k = spliced.index("int big")
        return code, line_of, comments, spliced, blanked | set(range(k, k + 7))
    monkeypatch.setattr(cpp, "_strip", hides)
    assert "reads code on line 5" in cpp.compiler_disagrees(honest)


def test_comment_tricks(tmp_path):
    # "/*" inside a string opens no comment, so the fopen after it is code.
    report = audit_cpp(tmp_path, 'const char* s = "/*"; FILE* f = fopen("x", "r"); // */\n')
    assert "file-io" in fired(report)
    # A // comment continued by a line splice is blanked up to the splice only: what follows is read as code.
    report = audit_cpp(tmp_path, "int a; // note \\\nvoid f() { getenv(\"X\"); }\n")
    assert "environment" in fired(report)
    # Raw strings: their text is kept (PTX), a // inside them is not a comment.
    report = audit_cpp(tmp_path, 'auto s = R"(x" // )"; void f() { system("ls"); }\n')
    assert "process" in fired(report)


def test_the_solutions_own_modules_are_followed(tmp_path):
    d = solution(tmp_path, {"helper.py": "import torch\nt = torch\n", "pkg/__init__.py": "",
                            "pkg/io_utils.py": "from .. import helper\n", "solution.py": """\
        from . import helper
        from .helper import torch as T
        from .pkg import io_utils
        def run(z, weights, rank, world, pg, out):
            helper.torch.load("a")
            T.save(out, "b")
            helper.t.load("c")
            io_utils.helper.t.jit.load("d")
            helper.torch.zeros(1)
        """})
    report = audit.audit(str(d))
    assert [(f.file, f.line, f.rule) for f in report.findings] == [("solution.py", n, "file-io") for n in (5, 6, 7, 8)]
    assert "`helper.torch.load` (`torch.load`)" in report.findings[0].reason


def test_headers_are_followed_whatever_their_suffix(tmp_path):
    d = solution(tmp_path, {"k.cu": '#include "detail/impl.inc"\n', "detail/impl.inc": "void f() { fopen(0, 0); }\n"})
    report = audit.audit(str(d))
    assert [(f.file, f.rule) for f in report.findings] == [(os.path.join("detail", "impl.inc"), "file-io")]


def test_includes_through_folders_the_audit_does_not_model_are_followed(tmp_path):
    """A compiler finds `grid.txt` through `-isystem inc` (or nvcc's own folders), which the audit does not resolve:
    every file of the solution whose path ends with an included name is read as C++, documentation and hidden
    folders too."""
    d = solution(tmp_path, {"solution.yml": "extension: ext\nsources: [k.cpp]\ncflags: [-isystem, inc, -iquote, .q]\n",
                            "k.cpp": "#include <grid.txt>\n#include \"notes/README.md\"\n",
                            "inc/grid.txt": "auto q = w.round();\n",
                            ".q/notes/README.md": "float q = std::clamp(v, -127.f, 127.f);\n",
                            "README.md": "Rounds with `x.round()`; not included, so documentation.\n"})
    report = audit.audit(str(d))
    assert sorted((f.file, f.rule) for f in report.findings) == [
        (os.path.join(".q", "notes", "README.md"), "narrow-numerics"),
        (os.path.join("inc", "grid.txt"), "narrow-numerics")], audit.format_report(report)



@pytest.mark.parametrize("spelling", [b'%:include "notes.txt"\n', b'int pad;\r#include "notes.txt"\r',
                                      b'\xef\xbb\xbf#include "notes.txt"\n', b'#\x0cinclude "notes.txt"\n',
                                      b'\x0c#include "notes.txt"\n', b'#\x0binclude "notes.txt"\n',
                                      b'??=include "notes.txt"\n', b'#/* a\n */include "notes.txt"\n',
                                      b'#inc\\\r\nlude "notes.txt"\n'])
def test_every_spelling_of_an_include_is_followed(tmp_path, spelling):
    """The compiler's spellings of `#include` (a digraph, CR line ends, a byte order mark, form feed or vertical tab
    around `#`, a trigraph, a comment across lines, a splice after CR LF): every C++ scan reads the text as the
    compiler's first phases leave it, so notes.txt is read as C++ (tests/cheats/includes_by_digraph)."""
    d = solution(tmp_path, {"solution.yml": "extension: ext\nsources: [k.cpp]\n", "k.cpp": spelling,
                            "notes.txt": "static inline int8_t code_of(float x) { return (int8_t)x; }\n"})
    report = audit.audit(str(d))
    assert [(f.file, f.rule) for f in report.findings] == [("notes.txt", "narrow-numerics")], \
        audit.format_report(report)


def test_digraphs_and_trigraphs_keep_literals_and_lines():
    from harness.audit import cpp
    code, line_of, _ = cpp.strip_cpp('auto s = "%:<%";\r\nint a<:2:> = <%1, 2%>;\rstd::vector<::std::string> v;\n')
    assert code.splitlines() == ['auto s = "%:<%";', "int a[ 2 ] = { 1, 2 };", "std::vector<::std::string> v;"]
    assert [line_of[code.index(w)] for w in ("auto", "int", "std")] == [1, 2, 3]

# ---------------------------------------------------------------------------------------------------------------
# The adversarial review's rules: each case names its rule and a phrase of the finding's reason.

REVIEW_FIRES = [
    # narrow numerics: int8/uint8 casts and dtypes, quantization APIs
    ("narrow-numerics", "dtype `torch.int8`", "import torch\ndef run(z, weights, rank, world, pg, out):\n"
                                              "    w = [t.to(torch.int8) for t in weights]"),
    ("narrow-numerics", "casts to int8", "def f(x):\n    return x.char()"),
    ("narrow-numerics", "casts to uint8", "def f(x):\n    return x.byte()"),
    ("narrow-numerics", "dtype `torch.uint8`", "import torch\nq = torch.empty(8, dtype=torch.uint8)"),
    ("narrow-numerics", "dtype `torch.int8`", "import torch\nI8 = torch.int8\ndef f(x):\n    return x.to(I8)"),
    ("narrow-numerics", "dtype `torch.int8`", "from torch import int8\ndef f(x):\n    return x.view(int8)"),
    ("narrow-numerics", "dtype `triton.language.int8`", "import triton.language as tl\ndef k(v):\n"
                                                        "    return v.to(tl.int8)"),
    ("narrow-numerics", "dtype `uint8`", "def f(a):\n    return a.astype('uint8')"),
    ("narrow-numerics", "narrower than bf16", "import torch\ndef f(x):\n"
                                              "    return torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)"),
    ("narrow-numerics", "narrower than bf16", "import torch\ndef f(x, s, z):\n"
                                              "    return torch.quantize_per_channel(x, s, z, 0, torch.qint8)"),
    ("narrow-numerics", "narrower than bf16", "import torch.ao.quantization as q"),
    ("narrow-numerics", "narrower than bf16", "import torch\ndef f(a, b):\n    return torch._int_mm(a, b)"),
    ("narrow-numerics", "narrower than bf16", "import torch\ndef f(x):\n"
                                              "    return torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -8, 7)"),
    ("narrow-numerics", "narrower than bf16", "def f(q):\n    return q.dequantize()"),
    # narrow numerics: quantize/dequantize arithmetic, rounding to a coarse grid
    ("narrow-numerics", "rounds to a coarse grid", "import torch\ndef f(x, s):\n    return torch.round(x / s) * s"),
    ("narrow-numerics", "quantize/dequantize", "def f(x, s):\n    return (x / s).round().clamp(-128, 127) * s"),
    ("narrow-numerics", "rounds to a coarse grid", "def f(x, s):\n    return (x / s).round() * s"),
    ("narrow-numerics", "rounds to a coarse grid", "def f(w):\n    w.round_()"),
    ("narrow-numerics", "rounds to a coarse grid", "def f(w):\n    return w.__round__()"),
    ("narrow-numerics", "narrower than bf16", "import torch\ndef f(x):\n    return x.type(torch.cuda.CharTensor)"),
    ("narrow-numerics", "narrower than bf16", "import triton.language as tl\ndef k(v, s):\n"
                                              "    return tl.extra.cuda.libdevice.float2int_rn(v / s)"),
    ("narrow-numerics", "rounds to a coarse grid", "from torch import round as r\ndef f(x):\n    return r(x)"),
    ("narrow-numerics", "rounds to a coarse grid", "import numpy as np\ndef f(a):\n    return np.rint(a * 16) / 16"),
    ("narrow-numerics", "rounds to a coarse grid", "import triton.language as tl\ndef k(v, s):\n"
                                                   "    return tl.extra.cuda.libdevice.rint(v / s) * s"),
    ("narrow-numerics", "mantissa from exponent", "import torch\ndef f(x):\n    m, e = torch.frexp(x)\n"
                                                  "    return m, e"),
    ("narrow-numerics", "mantissa from exponent", "import torch\ndef f(m, e):\n    return torch.ldexp(m, e)"),
    ("narrow-numerics", "with a scale rounds to a coarse grid", "import torch\ndef f(x, s):\n"
                                                                "    return torch.floor(x / s) * s"),
    ("narrow-numerics", "with a scale rounds to a coarse grid", "def f(x):\n    return (x * 16).floor() / 16"),
    ("narrow-numerics", "with a scale rounds to a coarse grid", "def f(x, s):\n    return x.div(s).floor().mul(s)"),
    ("narrow-numerics", "with a scale rounds to a coarse grid", "import torch\ndef f(x, s):\n"
                                                                "    return torch.trunc(x) * s"),
    ("narrow-numerics", "integer cast of a quotient", "import torch\ndef f(x, s):\n"
                                                      "    return (x / s).to(torch.int32).to(torch.bfloat16) * s"),
    ("narrow-numerics", "integer cast of a quotient", "def f(x, s):\n    return (x / s).long() * s"),
    ("narrow-numerics", "rounded division scaled back", "import torch\ndef f(x, s):\n"
                                                        "    return torch.div(x, s, rounding_mode='floor') * s"),
    ("narrow-numerics", "narrow format's range", "import torch\ndef f(x, s):\n"
                                                 "    return torch.clamp(x * s, -127, 127)"),
    ("narrow-numerics", "narrow format's range", "def f(x):\n    return x.clamp(min=-128, max=127)"),
    ("narrow-numerics", "narrow format's range", "def f(x):\n    return x.clamp_(0, 255)"),
    ("narrow-numerics", "narrow format's range", "import numpy as np\ndef f(a):\n    return np.clip(a, -448.0, 448.0)"),
    ("narrow-numerics", "narrow format's range", "def f(x):\n    return x.clamp(max=127)"),
    ("narrow-numerics", "narrow format's range", "def f(x):\n    return x.clamp_min(-128).clamp_max(127)"),
    ("narrow-numerics", "rounds values to integers", "SRC = '__global__ void k(float* x) { x[0] = rintf(x[0]); }'"),
    ("file-io", "touches files", "from torch.utils.data.datapipes.iter import FileOpener"),
    ("narrow-numerics", "floors a float", "def f(w, s):\n    return (w / s + 0.5) // 1 * s"),
    ("narrow-numerics", "integer cast of a quotient", "def f(w, inv, s):\n    return (w.float() * inv).int().float() * s"),
    ("narrow-numerics", "remainder of floats", "import torch\ndef f(w, s):\n    return torch.floor_divide(w, 1) * s"),
    ("narrow-numerics", "remainder of floats", "import torch\ndef f(w, s):\n    return w - torch.remainder(w, s)"),
    ("narrow-numerics", "remainder of floats", "def f(w, s):\n    return w - w.fmod(s)"),
    ("narrow-numerics", "every dtype", "import torch\nT = torch.utils._dtype_abbrs.dtype_abbrs"),
    ("narrow-numerics", "floors a float", "def f(w, s):\n    q = w / s\n    return (q - q % 1.0) * s"),
    ("narrow-numerics", "codebook", "import torch\ndef f(w, grid):\n    return grid[torch.bucketize(w, grid)]"),
    ("narrow-numerics", "codebook", "import torch\ndef f(w, g):\n    return g[torch.searchsorted(g, w)]"),
    ("narrow-numerics", "reinterprets a tensor's bits", "import torch\ndef f(w):\n"
                                                        "    return (w.view(torch.int16) & -16).view(torch.bfloat16)"),
    ("narrow-numerics", "reinterprets a tensor's bits", "import torch\ndef f(w):\n    return w.view(dtype=torch.int32)"),
    # reflection through format strings
    ("dynamic-name", "reads attributes or items by name", "def f(x):\n    return '{0.__class__}'.format(x)"),
    ("introspection", "reads `.__globals__`", "def f(g):\n    return '{0.__globals__[os]}'.format(g)"),
    ("dynamic-name", "reads attributes or items by name", "def f(d):\n    return '{x[key]}'.format_map(d)"),
    ("dynamic-name", "reads attributes or items by name", "def f(x):\n    return str.format('{0.shape}', x)"),
    ("dynamic-name", "reads attributes or items by name", "def f(x):\n    return '{0:{1.__doc__}}'.format(1, x)"),
    ("dynamic-name", "format string the audit cannot read", "def f(template, x):\n    return template.format(x)"),
    ("dynamic-name", "`string.Formatter`", "import string\ndef f(x):\n"
                                           "    return string.Formatter().get_field('0.__class__', [x], {})"),
    ("dynamic-name", "`string.Formatter`", "from string import Formatter"),
    # types named by values: type(x), x.__class__
    ("monkeypatch", "state of `torch.Tensor`", "def run(z, weights, rank, world, pg, out):\n"
                                               "    T = type(weights[0])\n    T.contiguous = lambda self: self"),
    ("monkeypatch", "state of `torch.Tensor`", "def run(z, weights, rank, world, pg, out):\n"
                                               "    setattr(type(z), 'clone', None)"),
    ("monkeypatch", "state of `torch.Tensor`", "def run(z, weights, rank, world, pg, out):\n"
                                               "    K = out.__class__\n    K.copy_ = None"),
    ("monkeypatch", "state of `torch.Tensor`", "def run(z, weights, rank, world, pg, out):\n"
                                               "    out.__class__.copy_ = None"),
    ("monkeypatch", "state of `torch.Tensor`", "import torch\nT = type(torch.zeros(1))\ndef f():\n"
                                               "    T.add = None"),
    ("monkeypatch", "state of `type(x)`", "def f(x):\n    T = type(x)\n    delattr(T, 'y')"),
    # every member of torch._C
    ("monkeypatch", "private C bindings", "import torch\ndef f(x):\n    return torch._C._nn.gelu(x)"),
    ("monkeypatch", "private C bindings", "from torch import _C"),
    ("monkeypatch", "private C bindings", "import torch._C as C"),
    ("monkeypatch", "private C bindings", "from torch._C import _get_tracing_state"),
    ("monkeypatch", "private C bindings", "import torch\nC = getattr(torch, '_C')"),
    ("monkeypatch", "private C bindings", "import torch\nt = torch\nf = t._C._set_grad_enabled"),
    # state kept between calls: module-level objects, globals, mutable defaults, function attributes, memos
    ("state", "module-level `_cache` keeps state", "_cache = {}\ndef run(z, weights, rank, world, pg, out):\n"
                                                   "    key = tuple(z.shape)\n    if key not in _cache:\n"
                                                   "        _cache[key] = z.clone()\n    out.copy_(_cache[key])"),
    ("state", "rebinds the global `LAST`", "LAST = None\ndef run(z, weights, rank, world, pg, out):\n"
                                           "    global LAST\n    LAST = out.clone()"),
    ("state", "rebinds the global `CALLS`", "CALLS = 0\ndef run(z, weights, rank, world, pg, out):\n"
                                            "    global CALLS\n    CALLS += 1"),
    ("state", "default value of `memo`", "def run(z, weights, rank, world, pg, out, memo={}):\n"
                                         "    memo[z.shape] = out"),
    ("state", "default value of `seen`", "def run(z, weights, rank, world, pg, out, *, seen=[]):\n"
                                         "    seen.append(z)"),
    ("state", "module-level `run` keeps state", "def run(z, weights, rank, world, pg, out):\n    run.cache = out"),
    ("state", "module-level `_seen` keeps state", "_seen = []\ndef run(z, weights, rank, world, pg, out):\n"
                                                  "    _seen.append(z)"),
    ("state", "module-level `_buf` keeps state", "import torch\n_buf = torch.zeros(8)\ndef f(x):\n"
                                                 "    _buf.copy_(x)"),
    ("state", "module-level `Plan` keeps state", "class Plan:\n    table = {}\ndef f(k, v):\n"
                                                 "    Plan.table[k] = v"),
    ("state", "module-level `_cache` keeps state", "_cache = {}\ndef f(k):\n    del _cache[k]"),
    ("state", "module-level `_box` keeps state", "_box = type('Box', (), {})()\ndef f(v):\n"
                                                 "    setattr(_box, 'v', v)"),
    ("state", "module-level `_cache` keeps state", "_cache = {}\nput = lambda k, v: _cache.__setitem__(k, v)"),
    ("state", "`functools.lru_cache` keeps state", "import functools\n@functools.lru_cache\ndef decode(key):\n"
                                                   "    return key"),
    ("state", "`functools.cache` keeps state", "from functools import cache"),
]


@pytest.mark.parametrize("rule, phrase, source", REVIEW_FIRES)
def test_review_rule_fires_with_its_reason(tmp_path, rule, phrase, source):
    report = audit_py(tmp_path, source + "\n")
    reasons = [f.reason for f in report.findings if f.rule == rule]
    assert any(phrase in r for r in reasons), f"{rule} / {phrase!r} not found for:\n{source}\n" \
                                              f"{audit.format_report(report)}"


REVIEW_QUIET = [
    # Python's round/floor on numbers, index arithmetic, grid sizes: not tensor rounding
    "n = round(7 / 2)\nimport math\nm = math.floor(10 / 3) * 2\nc = math.ceil(1000 / 128)\n"
    "def grid(h, w):\n    return (h + 15) // 16 * 16, round(w / 8) * 8, int(h / 2)",
    # the baseline's Triton index arithmetic
    "import triton.language as tl\ndef k(x, xx, X, cols):\n    pid = tl.program_id(0).to(tl.int64)\n"
    "    b = pid // 4\n    px = x + cols[:, None].to(tl.int64) * xx + (X // 2).to(tl.int64)\n"
    "    return px, x.to(tl.float32).to(tl.bfloat16)",
    # the task's own clamp, rounding-free casts, floor without a scale, a floor division left unscaled
    "import torch\ndef f(x, idx, w):\n    y = torch.clamp(x, min=-1.0, max=1.0) + x.clamp(-1, 1) + x.clamp(min=0)\n"
    "    z = x.to(torch.bfloat16).to(torch.float32).floor()\n    return torch.div(idx, w, rounding_mode='floor')",
    "import torch\ny = torch.int32\nz = torch.iinfo\nb = torch.bool",
    "def f(x, v):\n    return x.clamp_min(1e-12), v.clamp_max(1.0), x.clamp_min(0)",
    # integer index arithmetic: modulo and floor division by other numbers, dtype views among floats
    "import torch\ndef f(i, W, x):\n    return i % W, i // 2, (i + 1) % 2, x.view(torch.bfloat16), x.view(-1, 4)",
    "import torch\ndef f(n, s):\n    return (torch.arange(n) * s).long(), (torch.arange(n) * s).long() + 1",
    # format strings without attribute or index fields; f-strings are ordinary code
    "MSG = '{} frames of {}x{}'\ndef f(n, h, w, x):\n    return MSG.format(n, h, w) + '{:.3f} {0:>{1}}'.format(1.0, 3)"
    " + f'{x.shape}' + '%(a)s' % {'a': 1}",
    # type(x) as a value, not a store target
    "def f(x, y):\n    T = type(x)\n    return T(1), isinstance(y, type(x)), x.__class__.__name__",
    # state that does not outlive a call: locals, instances, closures, parameters, module-level set-up at import
    "_TABLE = {}\n_TABLE['a'] = 1\nclass Dec:\n    def __init__(self):\n        self.caches = {}\n"
    "    def put(self, k, v):\n        self.caches[k] = v\n"
    "def run(z, weights, rank, world, pg, out, flag=None, sizes=(1, 2)):\n    caches = {}\n    caches['x'] = z\n"
    "    d = Dec()\n    d.put(1, z)\n    out.copy_(z)\n    out[0] = 1\n    def inner():\n        caches['y'] = 1\n"
    "    inner()\n    _cache = []\n    _cache.append(1)\n    return _TABLE.get('a')",
    "import torch\nCL3 = torch.channels_last_3d\nimport torch.nn.functional as F\n"
    "def f(x):\n    return F.relu_(x.contiguous(memory_format=CL3))",
]


@pytest.mark.parametrize("source", REVIEW_QUIET)
def test_review_near_miss_is_quiet(tmp_path, source):
    report = audit_py(tmp_path, source + "\n")
    assert report.ok, audit.format_report(report)


REVIEW_CPP_FIRES = [
    ("rounds values to integers", "__device__ float q(float x, float s) { return roundf(x / s) * s; }\n"),
    ("rounds values to integers", "__device__ int q(float x) { return __float2int_rn(x); }\n"),
    ("rounds values to integers", "asm(\"cvt.rni.s32.f32 %0, %1;\" : \"=r\"(q) : \"f\"(x));\n"),
    ("rounds values to integers", "float m = std::frexp(x, &e);\n"),
    ("8-bit integer dtype", "auto t = torch::kInt8;\n"),
    ("8-bit integer dtype", "auto t = at::kByte;\n"),
    ("8-bit integer dtype", "auto t = c10::ScalarType::QInt8;\n"),
    # libtorch's rounding, the function and the method forms (hostile-h13/evil/cpp_round: `torch::round(f / scale)`
    # passed), and the other spellings of C's and CUDA's
    ("rounds values to integers", "auto q = torch::round(f / scale).clamp(-127, 127).mul(scale);\n"),
    ("rounds values to integers", "at::Tensor q(const at::Tensor& w, double s) { return at::round(w / s) * s; }\n"),
    ("rounds values to integers", "auto q = f.div(scale).round().mul(scale);\n"),
    ("rounds values to integers", "void f(at::Tensor* w) { w->round_(); }\n"),
    ("rounds values to integers", "auto r = &at::Tensor::round;\n"),
    ("rounds values to integers", "using std::trunc;\n"),
    ("rounds values to integers", "auto q = (w / s).trunc() * s;\n"),
    ("rounds values to integers", "auto q = w - w.fmod(s);\n"),
    ("rounds values to integers", "auto q = w - torch::remainder(w, s);\n"),
    ("rounds values to integers", "auto i = torch::bucketize(w, grid);\n"),
    ("rounds values to integers", "__device__ float q(float x) { return __builtin_rintf(x); }\n"),
    ("rounds values to integers", "__device__ float q(float x) { return __nv_nearbyintf(x); }\n"),
    ("rounds values to integers", "auto v = _mm256_round_ps(x, 0);\n"),
    ("rounds values to integers", "#define SNAP round\nfloat f(float x) { return SNAP(x); }\n"),
    # floor/ceil with a scale (Python's rule): libtorch's forms always, the scalar ones floored and scaled back
    ("with a scale rounds to a coarse grid", "auto q = (w / s).floor().mul(s);\n"),
    ("with a scale rounds to a coarse grid", "auto q = torch::floor(w * 16) / 16;\n"),
    ("with a scale rounds to a coarse grid", "auto q = w.div(s).ceil_();\n"),
    ("with a scale rounds to a coarse grid", "__device__ float q(float x, float s) {\n"
                                             "    return floorf(x / s + 0.5f) * s;\n}\n"),
    # clamps to a narrow format's range, in every form
    ("narrow format's range", "auto q = w.clamp(-127, 127);\n"),
    ("narrow format's range", "w.clamp_(-128, 127);\n"),
    ("narrow format's range", "auto q = torch::clamp(w, 0, 255);\n"),
    ("narrow format's range", "auto q = w.clamp_max(127);\n"),
    ("narrow format's range", "auto q = w.clamp(c10::nullopt, 127.0);\n"),
    ("narrow format's range", "float q = std::clamp(v, -127.f, 127.f);\n"),
    ("narrow format's range", "__device__ float q(float v) { return fminf(fmaxf(v, -127.f), 127.f); }\n"),
    ("narrow format's range", "float q = std::max(-128.0f, std::min(v, 127.0f));\n"),
    # narrow dtypes by any spelling, and casts that round
    ("8-bit integer dtype", "using namespace torch;\nauto q = w.to(kChar);\n"),
    ("8-bit integer dtype", "auto q = w.to(torch::kInt8);\n"),
    ("8-bit integer dtype", "__global__ void k(signed char* q) {}\n"),
    ("8-bit integer dtype", "__global__ void k(char4* q) {}\n"),
    ("8-bit integer dtype", "auto q = w.data_ptr<c10::qint8>();\n"),
    ("16- or 32-bit integer type", "auto q = (w / s).to(torch::kInt16).to(torch::kBFloat16) * s;\n"),
    ("16- or 32-bit integer type", "auto q = w.to(at::kInt);\n"),
    ("integer cast of a quotient", "auto q = (w / s).to(torch::kLong).to(torch::kFloat) * s;\n"),
    ("reinterprets a tensor's bits", "auto q = w.view(torch::kInt16).bitwise_and(-16).view(torch::kBFloat16);\n"),
    ("rounded division scaled back", "auto q = at::div(w, s, \"floor\").mul(s);\n"),
    ("added and subtracted rounds", "__device__ float q(float x) { return (x + 12582912.f) - 12582912.f; }\n"),
    ("added and subtracted rounds", "__device__ float q(float x) { return (x + 0x1.8p23f) - 0x1.8p23f; }\n"),
    ("added and subtracted rounds", "__device__ float q(float x) { float m = __int_as_float(0x4b400000); "
                                    "return x + m - m; }\n"),
    ("quantizes", "at::Tensor f(const at::Tensor& q) { return q.dequantize(); }\n"),
]


@pytest.mark.parametrize("phrase, source", REVIEW_CPP_FIRES)
def test_review_cpp_narrow_numerics(tmp_path, phrase, source):
    report = audit_cpp(tmp_path, source)
    assert any(f.rule == "narrow-numerics" and phrase in f.reason for f in report.findings), \
        audit.format_report(report)


REVIEW_CPP_QUIET = [
    # integer and index arithmetic: floor/ceil on scalars not scaled back (Python's math.floor), integer division
    "int n = (a + b - 1) / b; float y = floorf(x); double c = std::ceil(n / 2.0);\n"
    "auto t = torch::kBFloat16; auto u = at::kFloat;\n",
    "__device__ int src(int dst, float scale, int n) { return min((int)floorf((dst + 0.5f) * scale), n - 1); }\n",
    "int64_t padded(int64_t n) { return static_cast<int64_t>(std::ceil(n / 64.0)) * 64 + (int)ceilf(n / 8.f) * 8; }\n",
    "__global__ void k(int H) { int y = min(max((int)threadIdx.x - 1, 0), H - 1); int t = min(max(y, 0), 15); }\n",
    "auto i = at::div(at::arange(n), 2, \"floor\"); auto j = at::arange(n, opts).to(torch::kLong);\n",
    # the task's own clamps and epsilons, unscaled floors, casts among floats, views of shape
    "auto y = x.clamp(-1, 1); auto r = v.clamp_min(1e-6).rsqrt(); auto z = std::clamp(v, -1.0f, 1.0f);\n"
    "__device__ float c(float v) { return fminf(fmaxf(v, -1.f), 1.f); }\n",
    "auto y = x.floor(); auto b = x.to(torch::kBFloat16).to(at::kFloat); auto v = x.view({-1, 4});\n",
    "auto h = __float2bfloat16_rn(v); auto p = __floats2bfloat162_rn(a, b); auto f = __bfloat162float(h);\n",
    # names that are not rounding: a loop's rounds, a remainder count, chrono, a size of 8 Mi, launch bounds
    "for (int round = 0; round < 4; ++round) {} int remainder = n % 4; bool ok = a && round_trip;\n"
    "#define N_ROUNDS 4\nauto ms = std::chrono::round<std::chrono::milliseconds>(d);\n",
    "const int64_t kChunk = 8388608; int threads = std::min(n, 128); float m = std::numeric_limits<float>::max();\n",
    "auto y = torch::upsample_nearest3d(x, {t, h, w}); namespace F = torch::nn::functional;\n",
]



def test_cpp_numerics_in_python_strings(tmp_path):
    """C++ handed to a compiler as a Python string is read by the same rules, the arithmetic among them."""
    report = audit_py(tmp_path, "SRC = 'torch::Tensor q(torch::Tensor w) { return w.clamp(-128, 127); }'\n")
    assert any("source text in a string" in f.reason and "narrow format's range" in f.reason
               for f in report.findings), audit.format_report(report)


def test_review_reasons_name_the_task_rules():
    assert "bf16 weights and activations with fp32 accumulation, nothing narrower" in audit.RULES["narrow-numerics"]
    assert "run() keeps nothing between calls" in audit.RULES["state"]
    assert "format string" in audit.RULES["dynamic-name"] and "torch._C" in audit.RULES["monkeypatch"]


# Each cheat's rules that must fire: tests/fixtures.py's `audit` of the cheats.
@pytest.mark.parametrize("cheat, rule", [(f.name, rule) for f in FIXTURES if f.kind == CHEAT and f.audit
                                         for rule in f.audit])
def test_cheats_the_rules_catch(cheat, rule):
    assert rule in fired(audit.audit(os.path.join(ROOT, "tests", "cheats", cheat)))


def test_a_waived_note_is_listed_for_the_reviewer():
    """tests/cheats/waives_its_audit.py allows its own narrow-numerics note: silenced, and listed with its reason
    (the gate prints it as `allowed by the solution`); --strict fails the notes, not the allowed ones."""
    report = audit.audit(os.path.join(ROOT, "tests", "cheats", "waives_its_audit.py"))
    assert report.ok and not report.findings
    assert [(a.rule, a.allowance) for a in report.allowed] == [("narrow-numerics", "bf16")]


def test_an_int8_grid_in_libtorchs_cpp_is_narrow_numerics():
    """tests/cheats/rounds_in_cpp: the grid is rounded in an .inl that ext.cpp includes, by `Tensor::round` and
    `clamp(-127, 127)`; its Python is clean, so the C++ rules alone stop it."""
    report = audit.audit(os.path.join(ROOT, "tests", "cheats", "rounds_in_cpp"))
    assert [(f.file, f.line, f.rule) for f in report.findings] == [("grid.inl", 10, "narrow-numerics")], \
        audit.format_report(report)
    assert "rounds values to integers" in report.findings[0].reason


def test_code_hidden_behind_a_trigraph_reading_is_read():
    """tests/cheats/hides_behind_a_literal: to a reading with trigraphs, `"??/"` runs on and a `/*` after it hides
    the int8 rounding; C++17's reading (no trigraphs), which the audit makes too, reads it."""
    report = audit.audit(os.path.join(ROOT, "tests", "cheats", "hides_behind_a_literal"))
    assert [(f.file, f.line, f.rule) for f in report.findings] == [("ext.cpp", 18, "narrow-numerics")], \
        audit.format_report(report)


def test_an_alias_of_itself_terminates(tmp_path):
    # `t = t.nn` made the alias fixed point grow one attribute per pass, for ever; dotted names are capped.
    d = solution(tmp_path, {"solution.py": "import torch\nt = torch\nt = t.nn\nt.load('x')\n"})
    p = subprocess.run([sys.executable, "audit.py", str(d)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "solution.py:4: file-io: `torch.load`" in p.stdout, p.stdout


def test_reference_functions_that_keep_state_are_banned_through_it(tmp_path):
    report = audit_py(tmp_path, "import reference\ndef run(z, weights, rank, world, pg, out):\n"
                                "    reference.set_scopes(True)\n")
    assert [(f.line, f.rule) for f in report.findings] == [(3, "state")]
    assert "`reference.set_scopes` keeps state between calls" in report.findings[0].reason


# ---------------------------------------------------------------------------------------------------------------
# solution.yml and the files of a solution.

def test_manifest(tmp_path):
    d = solution(tmp_path, {"k.cu": "void f() {}\n", "solution.yml": """\
        extension: ext
        sources: [k.cu, ../elsewhere.cu]
        cflags: [-O3, -DOPENER=fopen, -include /etc/evil.h]
        cuda_cflags: [-O3, --use_fast_math, -Iinclude, -I/opt/other]
        """})
    found = {(f.line, f.rule) for f in audit.audit(str(d)).findings}
    assert found == {(2, "unaudited-file"), (3, "file-io"), (3, "unaudited-file"), (4, "unaudited-file")}
    clean = solution(tmp_path / "ok", {"k.cu": "void f() {}\n", "solution.yml": """\
        name: fast  # fp8? no: bf16
        language: cuda
        extension: ext
        sources: [k.cu]
        cuda_cflags: [-O3, --use_fast_math, -gencode=arch=compute_90a,code=sm_90a]
        ldflags: [-lcuda]
        """})
    assert audit.audit(str(clean)).ok


@pytest.mark.parametrize("flag", ["-O2 -i''nclude notes.txt", "-DX=$(cat notes.txt)", "-DX=`id`", "-O3;id",
                                  "-DNAME=\\\"x\\\"", "-wrapper", "-wrapper=sh,-c", "-include=notes.txt",
                                  "-Xcompiler=-include,notes.txt", "-Wp,-imacros,notes.txt", "-isystem/usr/include",
                                  "-idirafter/x", "-iquote../up", "--sysroot=/", "-specs=x.specs", "-Bbin",
                                  "-fplugin=./p.so", "-Xpreprocessor", "-Xlinker", "-Wl,-T,x.ld", "-ccbin=gcc",
                                  "--compiler-bindir=x", "--options-file=opts", "@opts", "-Iinclude/../..",
                                  "--include=notes.txt", "--imacros=x.h", "-std=c++14", "-std=gnu11", "-ansi",
                                  "--std", "-Xcompiler=-std=c++11"])
def test_flags_are_plain_tokens_that_read_no_other_file(tmp_path, flag):
    """cpp_extension writes each flag unquoted into build.ninja and ninja runs it through /bin/sh: a flag with blanks
    or shell syntax is a command line of its own (hostile-h15's `-i''nclude "$$(...)"/notes.txt`), and the options
    that run or include other files reach code the audit never read."""
    d = solution(tmp_path, {"k.cu": "void f() {}\n",
                            "solution.yml": "extension: ext\nsources: [k.cu]\ncflags: [" + json.dumps(flag) + "]\n"})
    assert [(f.file, f.rule) for f in audit.audit(str(d)).findings] == [("solution.yml", "unaudited-file")]


def test_honest_flags_are_clean(tmp_path):
    d = solution(tmp_path, {"k.cu": "void f() {}\n", "solution.yml": json.dumps({
        "extension": "ext", "sources": ["k.cu"], "cflags": ["-O3", "-DNAME=1", "-std=c++17", "-std=gnu++20", "-Iinclude"],
        "cuda_cflags": ["-O3", "--use_fast_math", "-lineinfo", "-gencode=arch=compute_90,code=sm_90",
                        "-Xptxas=-v", "--expt-relaxed-constexpr"], "ldflags": ["-lcuda"]})})
    report = audit.audit(str(d))
    assert report.ok, audit.format_report(report)


@pytest.mark.parametrize("manifest", ["solution.yaml", os.path.join("notes", "solution.yml")])
def test_only_the_manifest_the_loader_reads_names_an_extension(tmp_path, manifest):
    """loader.describe reads the top-level solution.yml alone: an `extension: test` in solution.yaml or in a
    subfolder's solution.yml builds nothing, so `import test` is the standard library's (hostile-h15's yaml_ext and
    nested_yml), a foreign module; that YAML is still read by the rules as text."""
    code = "import test.support.import_helper as h\n\n\ndef run(z, weights, rank, world, pg, out):\n    pass\n"
    d = solution(tmp_path, {"solution.py": code, "k.cpp": "void go() {}\n",
                            manifest: "extension: test\nsources: [k.cpp, ../k.cpp]\ncflags: [-DX=fopen]\n"})
    report = audit.audit(str(d))
    assert sorted((f.file, f.rule) for f in report.findings) == sorted([(manifest, "file-io"),
                                                                        ("solution.py", "foreign-code")]), \
        audit.format_report(report)


def test_a_package_beside_a_module_of_its_name_is_the_one_imported(tmp_path):
    """`from . import helper` imports the package helper/ (its __init__.py) before helper.py, as Python does
    (hostile-h15's pkg_shadow); both at once is a finding. A folder without __init__.py loses to the module."""
    code = "from . import helper\n\n\ndef run(z, weights, rank, world, pg, out):\n    helper.lib.load('x')\n"
    d = solution(tmp_path, {"solution.py": code, "helper.py": "import math as lib\n",
                            "helper/__init__.py": "import torch as lib\n"})
    assert sorted((f.file, f.rule) for f in audit.audit(str(d)).findings) == [
        ("helper.py", "unaudited-file"), ("solution.py", "file-io")]
    assert files.Modules([str(d / "helper.py"), str(d / "helper" / "__init__.py")]).relative(
        str(d / "solution.py"), 1, None, "helper") == "sol:1"
    assert files.Modules([str(d / "helper.py"), str(d / "helper" / "x.py")]).relative(
        str(d / "solution.py"), 1, None, "helper") == "sol:0"


def test_the_extension_a_manifest_builds_is_the_solutions_own_module(tmp_path):
    """Importing the extension built from the solution's audited sources is no foreign code; a compiled module the
    manifest does not build from them is."""
    code = "import torch\nimport wan_ext\n\n\ndef run(z, weights, rank, world, pg, out):\n    wan_ext.go(out)\n"
    ok = solution(tmp_path / "ok", {"solution.py": code, "k.cpp": "void go() {}\n",
                                    "solution.yml": "name: e\nlanguage: cpp\nextension: wan_ext\nsources: [k.cpp]\n"})
    assert audit.audit(str(ok)).ok, audit.audit(str(ok)).findings
    for yml in ("name: e\nlanguage: cpp\nextension: other_ext\nsources: [k.cpp]\n", "name: e\nextension: wan_ext\n"):
        bad = solution(tmp_path / str(len(yml)), {"solution.py": code, "k.cpp": "void go() {}\n", "solution.yml": yml})
        assert [f.rule for f in audit.audit(str(bad)).findings] == ["foreign-code"], yml


def test_listed_source_with_any_suffix_is_audited(tmp_path):
    d = solution(tmp_path, {"solution.yml": "extension: ext\nsources: [k.cxx]\n",
                            "k.cxx": "void f() { system(\"x\"); }\n"})
    assert [(f.file, f.rule) for f in audit.audit(str(d)).findings] == [("k.cxx", "process")]


def test_unaudited_files(tmp_path):
    d = solution(tmp_path, {"fast.so": b"\x7fELF", "weights.npy": b"\x93NUMPY", "README.md": "notes",
                            "LICENSE": "x", "docs/notes.txt": "x", ".hidden/anything.bin": b"\0",
                            "README.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"})   # imports as `README`
    report = audit.audit(str(d))
    # a hidden folder's files are a rank's to read too
    assert sorted((f.file, f.rule) for f in report.findings) == [
        (".hidden/anything.bin", "data-file"), ("README.cpython-311-x86_64-linux-gnu.so", "unaudited-file"),
        ("fast.so", "unaudited-file"), ("weights.npy", "data-file")]
    assert sorted(f.file for f in report.failures) == ["README.cpython-311-x86_64-linux-gnu.so", "fast.so"]
    d = solution(tmp_path / "elf", {"kernel.bin": b"\x7fELF\x02\x01"})      # compiled code by its bytes
    assert [(f.file, f.rule) for f in audit.audit(str(d)).findings] == [("kernel.bin", "unaudited-file")]


def test_documentation_is_a_few_pages_wherever_it_lies(tmp_path):
    """Documentation, and sources in hidden folders (read only where included), together at most 256 KiB: more is
    data shipped past the audit, which a rank can read."""
    page = "x" * (100 * 1024)
    d = solution(tmp_path, {"README.md": page, "docs/a.txt": page})
    assert audit.audit(str(d)).ok
    (d / ".docs").mkdir()
    (d / ".docs" / "b.h").write_text(page)
    report = audit.audit(str(d))
    assert [(f.rule, f.reason.split(":")[0]) for f in report.findings] == [
        ("data-file", f"documentation of {3 * len(page)} bytes in 3 file(s)")], audit.format_report(report)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_linked_directory(tmp_path):
    d = solution(tmp_path, {})
    os.symlink("/", d / "root")
    assert fired(audit.audit(str(d))) == {"unaudited-file"}


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_links_anywhere_are_findings_and_never_read(tmp_path):
    """A link in a hidden folder, or a source that is a link (to a file no solution may read, whose lines the audit
    would otherwise print), is a finding; its target is not read."""
    d = solution(tmp_path, {".b/x.txt": "x"})
    secret = tmp_path / "secret.json"
    secret.write_text('{"seed": 123456789}\n')
    os.symlink(tmp_path, d / ".b" / "out")
    os.symlink(secret, d / "leak.py")
    report = audit.audit(str(d))
    assert sorted((f.file, f.rule) for f in report.findings) == [(".b/out", "unaudited-file"),
                                                                ("leak.py", "unaudited-file")]
    assert "123456789" not in json.dumps([vars(f) for f in report.findings], default=str)


def test_what_is_no_regular_file_is_a_finding_and_never_read(tmp_path):
    """A FIFO (which would hang a read), a link to /dev/zero (a read without end), a FIFO as a one-file solution's
    bytecode, and a solution.yml source that is no path (a NUL) are findings, found at once; the twin of the build
    cache (tests/cheats/shares_a_build) is found by its included kern.inl."""
    import signal
    d = solution(tmp_path, {"solution.yml": 'extension: ext\nsources: ["a\\0b.cpp"]\n'})
    os.mkfifo(d / "helper.py")
    os.symlink("/dev/zero", d / "big.py")
    one = tmp_path / "one.py"
    one.write_text(RUN)
    (tmp_path / "__pycache__").mkdir()
    os.mkfifo(tmp_path / "__pycache__" / f"one.{sys.implementation.cache_tag}.pyc")

    def stop(*_):
        raise TimeoutError("the audit still reads")
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    try:
        report, single = audit.audit(str(d)), audit.audit(str(one))
    finally:
        signal.alarm(0)
    assert sorted((f.file, f.rule, f.reason.split(",")[0]) for f in report.findings) == [
        ("big.py", "unaudited-file", "a link"), ("helper.py", "unaudited-file", "a FIFO"),
        ("solution.yml", "unaudited-file", "source 'a\\x00b.cpp' is not a plain path")]
    assert [(f.file, f.reason) for f in single.findings] == [
        (os.path.join("__pycache__", f"one.{sys.implementation.cache_tag}.pyc"),
         "cannot read: a FIFO, expected a regular file")]
    cheats = os.path.join(ROOT, "tests", "cheats", "shares_a_build")
    assert audit.audit(os.path.join(cheats, "honest")).ok
    assert [(f.file, f.rule) for f in audit.audit(os.path.join(cheats, "evil")).findings] == [
        ("kern.inl", "narrow-numerics")]


def test_bytecode_must_match_its_source(tmp_path):
    import importlib._bootstrap_external as bootstrap
    d = solution(tmp_path, {})
    source = d / "solution.py"
    cache = d / "__pycache__"
    cache.mkdir()
    pyc = cache / f"solution.{sys.implementation.cache_tag}.pyc"
    st = os.stat(source)

    def write(text):
        code = compile(text, str(source), "exec", dont_inherit=True)
        pyc.write_bytes(bootstrap._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))

    write(source.read_text())                          # what the import system itself would write
    (cache / f"gone.{sys.implementation.cache_tag}.pyc").write_bytes(b"junk")   # no source: never imported
    assert audit.audit(str(d)).ok
    write("import os\n" + RUN.replace("pass", "os.system('x')"))   # a forged cache with the source's stamp
    report = audit.audit(str(d))
    assert [(f.file, f.rule) for f in report.findings] == [
        (os.path.join("__pycache__", pyc.name), "unaudited-file")]


def test_data_is_not_code(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "BIG_CONSTANT", 100)
    monkeypatch.setattr(files, "BIG_FILE", 1000)
    report = audit_py(tmp_path, "TABLE = " + repr("ab" * 60) + "\n")
    assert [(f.line, f.rule) for f in report.findings] == [(1, "data-file")]
    report = audit_cpp(tmp_path, "const unsigned char ref[] = {" + "0," * 600 + "};\n", name="table.h")
    assert [(f.file, f.line, f.rule) for f in report.findings] == [("table.h", 0, "unaudited-file")]


@pytest.mark.parametrize("source", [
    "x = 1\x00\n",                                              # null bytes
    "x = " + "(" * 300 + "1" + ")" * 300 + "\n",                 # deeper than the parser goes
    "x = " + "-" * 900 + "1\n",                                   # parses, deeper than the visitor goes
])
def test_unreadable_python_fails_closed(tmp_path, source):
    assert fired(audit_py(tmp_path, source)) == {"unaudited-file"}


def test_odd_manifests_do_not_crash(tmp_path):
    d = solution(tmp_path, {"k.cu": "void f() {}\n", "solution.yml": "extension: ext\nsources: ../x.cu\n"})
    assert fired(audit.audit(str(d))) == {"unaudited-file"}
    d = solution(tmp_path / "b", {"solution.yml": "sources: [unclosed\n"})
    assert fired(audit.audit(str(d))) == {"unaudited-file"}
    d = solution(tmp_path / "c", {"k.cu": b"void f() { \xff\xfe fopen(0, 0); }\n"})   # not UTF-8
    assert fired(audit.audit(str(d))) == {"file-io"}


def test_single_file_solution(tmp_path):
    f = tmp_path / "one.py"
    f.write_text("import pickle\n" + RUN)
    report = audit.audit(str(f))
    assert report.files == ["one.py"] and [(x.file, x.line, x.rule) for x in report.findings] == [
        ("one.py", 1, "file-io")]


def test_not_a_solution(tmp_path):
    for bad in (tmp_path, tmp_path / "missing.py", tmp_path / "x.txt"):
        with pytest.raises(audit.UsageError):
            audit.audit(str(bad))


# ---------------------------------------------------------------------------------------------------------------
# The repository's own solutions, and the rules table.

@pytest.mark.parametrize("name", ["reference", "diffusers"])
def test_repository_solutions_are_clean(name):
    report = audit.audit(os.path.join(ROOT, "solutions", name))
    assert report.ok and not report.allowed and not report.warnings, audit.format_report(report)


def test_baseline_is_clean_with_its_one_allowance():
    report = audit.audit(os.path.join(ROOT, "solutions", "baseline"))
    assert report.ok and not report.warnings, audit.format_report(report)
    assert [(a.file, a.rule) for a in report.allowed] == [("kernels.py", "environment")]


def test_every_rule_has_a_reason_and_a_test():
    assert all(isinstance(why, str) and len(why) > 20 for why in audit.RULES.values())
    assert all(r == r.lower() and " " not in r for r in audit.RULES)
    tested = {r for r, _ in PY_FIRES} | {r for r, _ in CPP_FIRES} | {"allowance", "data-file"}   # tests below
    assert tested == set(audit.RULES)


# ---------------------------------------------------------------------------------------------------------------
# Allowances.

def test_allowance_with_reason_silences_and_is_listed(tmp_path):
    report = audit_py(tmp_path, "import torch\n"
                                "import socket  # audit: allow network -- a reviewed import, unused in run\n")
    assert report.ok and not report.findings
    [a] = report.allowed
    assert (a.rule, a.line, a.allowance) == ("network", 2, "a reviewed import, unused in run")


@pytest.mark.parametrize("rule", sorted(verdicts.FAILS))
def test_a_solution_cannot_allow_a_failing_rule(tmp_path, rule):
    """A failing rule's finding fails the gate: a solution's own comment may not waive it."""
    report = audit_py(tmp_path, "import torch\n"
                                f"SCALE = 'e4m3'  # audit: allow {rule} -- a label in a log message\n")
    assert not report.allowed
    assert {f.rule for f in report.findings} >= {"allowance"}
    report = audit_py(tmp_path, f"import pickle  # audit: allow {rule} -- reviewed\n")
    assert not report.ok and "file-io" in {f.rule for f in report.failures} or rule != "file-io"


def test_only_file_io_and_unread_files_fail():
    """The gate fails the task's file-io rule and files the audit cannot read; every other rule is a review note."""
    assert set(verdicts.FAILS) == {"file-io", "unaudited-file"}
    assert set(verdicts.LOOK) == set(audit.RULES) - set(verdicts.FAILS)


def test_honest_patterns_are_review_notes_and_pass(tmp_path):
    """What published decoders and pipelines write: notes a reviewer reads, never failures."""
    source = ("import torch\nimport threading\nfrom concurrent.futures import ThreadPoolExecutor\n"
              "_MODULES = {}\n"
              "def conv(x, cache=None, idx=[0]):\n    idx[0] += 1\n    return x\n"
              "def run(z, weights, rank, world, pg, out):\n"
              "    _MODULES[len(weights)] = weights\n"
              "    with ThreadPoolExecutor(2) as pool:\n        list(pool.map(conv, [z]))\n")
    report = audit_py(tmp_path, source)
    assert report.ok and not report.failures, audit.format_report(report)
    assert {"state", "process"} <= {f.rule for f in report.notes}
    assert all(f.look for f in report.notes)


def test_allowance_without_reason_is_a_finding(tmp_path):
    report = audit_py(tmp_path, "import pickle  # audit: allow file-io\n")
    assert fired(report) == {"file-io", "allowance"} and not report.allowed


def test_allowance_naming_no_rule_is_a_finding(tmp_path):
    for comment in ("# audit: allow fiel-io -- typo", "# audit: allow -- no rule", "# audit: allow allowance -- x"):
        report = audit_py(tmp_path, f"import pickle  {comment}\n")
        assert "allowance" in fired(report) and "file-io" in fired(report), comment


def test_allowance_covers_only_its_rules_and_line(tmp_path):
    report = audit_py(tmp_path, "import os, socket  # audit: allow network -- reviewed\nimport ssl\nos.environ\n")
    assert [(f.line, f.rule) for f in report.findings] == [(2, "network"), (3, "environment")]
    report = audit_py(tmp_path, "import os, socket  # audit: allow environment, network -- reviewed\nos.environ\n")
    assert [(f.line, f.rule) for f in report.findings] == [(2, "environment")]
    assert [(w.line, w.rule) for w in report.warnings] == [(1, "allowance")]
    report = audit_py(tmp_path, "import os, socket; os.environ  # audit: allow environment, network -- reviewed\n")
    assert not report.findings and {a.rule for a in report.allowed} == {"environment", "network"}


def test_unused_allowance_is_a_warning_not_a_failure(tmp_path):
    report = audit_py(tmp_path, "x = 1  # audit: allow network -- nothing here any more\n")
    assert report.ok and [(w.line, w.rule) for w in report.warnings] == [(1, "allowance")]
    assert "unused" in report.warnings[0].reason


def test_allowance_in_a_string_is_not_an_allowance(tmp_path):
    report = audit_py(tmp_path, "import pickle; s = '# audit: allow file-io -- in a string'\n")
    assert "file-io" in fired(report) and not report.allowed


def test_cpp_allowance(tmp_path):
    report = audit_cpp(tmp_path, "#include <sys/socket.h>  // audit: allow network -- a reviewed header\n"
                                 "#include <thread>  /* audit: allow process -- a reviewed pool */\n"
                                 "void f() { getenv(\"X\"); }  // audit: allow environment\n"
                                 "#include <fstream>  // audit: allow file-io -- debug dump, off in run()\n")
    assert {(a.line, a.rule) for a in report.allowed} == {(1, "network"), (2, "process")}
    assert {(f.line, f.rule) for f in report.findings} == {(3, "environment"), (3, "allowance"), (4, "file-io"),
                                                          (4, "allowance")}
    assert [(f.line, f.rule) for f in report.failures] == [(4, "file-io")]


# ---------------------------------------------------------------------------------------------------------------
# The command line: table, JSON, exit codes.

def cli(*args):
    return subprocess.run([sys.executable, "audit.py", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_cli_exit_codes_and_table(tmp_path):
    clean = cli("solutions/reference")
    assert clean.returncode == 0 and "clean" in clean.stdout
    d = solution(tmp_path, {"solution.py": "import socket  # audit: allow network -- reviewed\nimport os\n"
                                           "x = os.environ['SEED']\n"})
    dirty = cli(d)
    assert dirty.returncode == 0 and "passed, with review notes" in dirty.stdout
    assert f"{d}/solution.py:3: environment: `os.environ`" in dirty.stdout
    assert dirty.stdout.index("review notes:") < dirty.stdout.index("allowances used:")
    assert "look at: that no setting of the environment changes the decode" in dirty.stdout
    assert cli(d, "--strict").returncode == 1
    failing = solution(tmp_path / "failing", {"solution.py": "import pickle\n"})
    assert cli(failing).returncode == 1 and "failing findings:" in cli(failing).stdout
    assert "allowed: reviewed" in dirty.stdout
    assert cli(tmp_path / "nothing-here").returncode == 2
    assert cli().returncode == 2
    rules = cli("--rules")
    assert rules.returncode == 0 and all(name in rules.stdout for name in audit.RULES)


def test_cli_json(tmp_path):
    d = solution(tmp_path, {"solution.py": "import socket  # audit: allow network -- reviewed\n"
                                           "import pickle  # audit: allow file-io -- reviewed\n"})
    out = tmp_path / "report.json"
    assert cli(d, "--json", out).returncode == 1
    report = json.loads(out.read_text())
    assert report["ok"] is False and report["files"] == ["solution.py"]
    assert [(f["file"], f["line"], f["rule"]) for f in report["findings"]] == [("solution.py", 2, "allowance"),
                                                                              ("solution.py", 2, "file-io")]
    assert [f["rule"] for f in report["failures"]] == ["file-io"] and report["review"][0]["rule"] == "allowance"
    assert [(f["rule"], f["allowance"]) for f in report["allowed"]] == [("network", "reviewed")]
    assert report["fails"] == ["file-io", "unaudited-file"]
    assert set(report["findings"][0]) == {"file", "line", "rule", "reason", "text", "allowance", "fails", "look"}
    assert report["rules"] == audit.RULES
    stdout = cli("solutions/reference", "--json", "-")
    assert stdout.returncode == 0 and json.loads(stdout.stdout)["ok"] is True


@pytest.mark.parametrize("source", CPP_QUIET + REVIEW_CPP_QUIET)
def test_cpp_near_miss_is_quiet(tmp_path, source):
    report = audit_cpp(tmp_path, source)
    assert report.ok, audit.format_report(report)


@pytest.mark.parametrize("source, flagged", [
    ("acc, k = tl.zeros((16, 16), dtype=tl.float16), 0\n    acc = tl.dot(a, a, acc)", True),
    ("for acc in range(2):\n        acc = tl.dot(a, a, acc)", True),
    ("acc = tl.full((16, 16), 0, tl.bfloat16)\n    acc = tl.dot(a, a, acc=acc)", True),
    ("acc, k = tl.zeros((16, 16), dtype=tl.float32), 0\n    acc = tl.dot(a, a, acc)", False),
    ("acc = tl.zeros((16, 16), tl.float32) + 1.0\n    acc = tl.dot(a, a, acc)\n    acc += tl.dot(a, a)", False),
    # a dtype that a launch may set (a constexpr parameter, whatever its default), a name bound to two dtypes, a dot
    # by another path, a sum of dots in a 16-bit accumulator
    ("acc = tl.zeros((16, 16), dtype=ACC)\n    acc = tl.dot(a, a, acc)", True),
    ("acc = tl.dot(a, a, out_dtype=ACC)", True),
    ("acc = tl.dot(a, a, out_dtype=TWICE)", True),
    ("acc = tl.core.dot(a, a, out_dtype=tl.float16)", True),
    ("acc = tl.zeros((16, 16), dtype=tl.float16)\n    acc += tl.dot(a, a)", True),
    ("acc = tl.zeros((16, 16), dtype=tl.float16)\n    acc = acc + tl.dot(a, a)", True),
    ("acc = tl.zeros((16, 16), dtype=ONCE)\n    acc += tl.dot(a, a)\n    c = tl.dot(a, a).to(tl.bfloat16)", False),
    # sums carried across a loop in 16 bits, through a temporary, without a dot, or through memory
    ("acc = tl.zeros((16, 16), dtype=tl.float32)\n    for i in range(4):\n        t = acc + tl.dot(a, a)\n"
     "        acc = t.to(tl.float16)", True),
    ("acc = tl.zeros((16,), dtype=tl.float16)\n    for i in range(4):\n        acc += tl.sum(a, 1).to(tl.float16)", True),
    ("for i in range(4):\n        tl.store(a_ptr, tl.load(a_ptr) + tl.dot(a, a))", True),
    ("acc = tl.zeros((16,), dtype=tl.float32)\n    for i in range(4):\n        acc, j = (acc + a).to(tl.dtype('fp16')), 0",
     True),
    ("acc = tl.zeros((16,), dtype=tl.float32)\n    for i in range(4):\n        acc: tl.tensor = (acc + a).to(a_ptr.dtype.element_ty)",
     True),
    ("for i in range(4):\n        old = tl.load(a_ptr)\n        tl.store(a_ptr, old + a)", True),
    ("p = a_ptr + 1\n    for i in range(4):\n        tl.store(a_ptr + 1, tl.load(p) + a)", True),
    ("for i in range(4):\n        tl.atomic_add(a_ptr, a)", True),
    ("for i in range(4):\n        x = tl.load(a_ptr + i)\n        tl.store(a_ptr + i, x * 2)", False),
    ("acc = tl.zeros((16, 16), dtype=tl.float32)\n    for i in range(4):\n        b = tl.load(a_ptr + i)\n"
     "        acc += tl.dot(a, b)\n        c = acc.to(tl.bfloat16)\n        tl.store(a_ptr + i, c)", False),
])
def test_a_dot_accumulates_where_its_accumulator_was_made(tmp_path, source, flagged):
    """tl.dot's result takes its accumulator's dtype: each value the accumulator's name gets is traced, tuple
    assignments paired element by element; a loop target or an unpacked call is not traced (a finding); a dtype is
    fp32 only where no launch can make it another."""
    (tmp_path / "solution.py").write_text(
        "import triton\nimport triton.language as tl\nONCE = tl.float32\nTWICE = tl.float32\nTWICE = tl.float16\n\n\n"
        "@triton.jit\ndef k(a_ptr, ACC: tl.constexpr = tl.float32):\n    a = tl.load(a_ptr)\n"
        f"    {source}\n\n\ndef run(z, weights, rank, world, pg, out):\n    pass\n")
    assert ("narrow-numerics" in fired(audit.audit(str(tmp_path)))) == flagged


def test_a_scripts_main_block_is_left_out_unless_the_module_binds_its_name(tmp_path):
    """`if __name__ == "__main__":` never runs in an imported module: its file io is no finding. A module that binds
    `__name__` could run it at import, and an else branch runs there: both are read."""
    block = 'if __name__ == "__main__":\n    open("x.pt", "wb").write(b"")\n'
    run = "def run(z, weights, rank, world, pg, out):\n    out.zero_()\n"
    report = audit_py(tmp_path, run + block)
    assert report.ok and not report.failures and not report.notes, audit.format_report(report)
    for source in ('__name__ = "__main__"\n' + run + block,
                   run + block + "else:\n    open('y.pt')\n",
                   run + "def f():\n    global __name__\n    __name__ = '__main__'\n" + block):
        report = audit_py(tmp_path, source)
        assert not report.ok and {f.rule for f in report.failures} == {"file-io"}, source


def test_logging_set_up_for_stderr_is_no_file_io(tmp_path):
    """logging.basicConfig without `filename` gives the root logger a handler of stderr, as print writes there; with
    it (or through **kwargs, or as a value) it opens a file."""
    run = "def run(z, weights, rank, world, pg, out):\n    out.zero_()\n"
    for line in ("import logging\nlogging.basicConfig(level=logging.INFO)\n",
                 "from logging import basicConfig\nbasicConfig(format='%(message)s')\n"):
        report = audit_py(tmp_path, line + run)
        assert report.ok and not report.failures, audit.format_report(report)
    for line in ("import logging\nlogging.basicConfig(filename='x.log')\n",
                 "from logging import basicConfig as b\nb(**{'filename': 'x.log'})\n",
                 "import logging\nsetup = logging.basicConfig\n"):
        report = audit_py(tmp_path, line + run)
        assert {f.rule for f in report.failures} == {"file-io"}, line
