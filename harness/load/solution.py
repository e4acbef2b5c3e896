"""Load and build a solution (the top-level loader.py re-exports this module's public names).

A solution is a directory holding `solution.py` (and optionally `solution.yml`) or a single `.py` file. It is
imported by file location as a package of its own (`wan_solution_<hash>`), so a directory's other modules are
reachable by relative import (`from . import kernels`), and its `__init__.py`, if any, runs first; the repository
root is importable for `spec` and `reference`. It must export `run(z, weights, rank, world, pg, out)` and may export
`prepare(weights, rank, world, pg)`.

`solution.yml` (all keys optional):

    name: my-solution           # letters, digits, '_', '-', '.' (it names files)
    language: python            # python | triton | cuda | cpp: informative
    extension: my_ext           # build `sources` into this importable module (torch.utils.cpp_extension.load)
    sources: [kernels.cu, bindings.cpp]
    cflags: [-O3]
    cuda_cflags: [-O3, --use_fast_math]

A solution's folder holds regular files and folders only (no links, FIFOs, sockets or devices), within the caps of
harness/load/tree.py. Builds are cached per content (every file and folder of the solution's, hidden ones included, by
path and bytes: a build reads what its sources include, whatever its name) and machine (torch, CUDA and the GPU's
compute capability) under $WAN_BUILD_DIR (default ~/.cache/wan-vae-decode/build). bench.py builds once in a child
process with a time limit before any rank starts, so a build failure is reported once for every rank and no rank
waits on another's build.
"""
import dataclasses
import importlib.machinery
import importlib.util
import inspect
import json
import keyword
import os
import re
import reprlib
import resource
import signal
import subprocess
import sys
import time

from harness.load import tree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))    # the repository's
MANIFEST_MAX = 1 << 16     # bytes of solution.yml
KEYS = ("name", "language", "extension", "sources", "cflags", "cuda_cflags", "ldflags")     # solution.yml's
LIST_MAX, PATH_MAX = 1024, 4096      # entries of a list in solution.yml, characters of each
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")      # a solution's name: a file name and plain text


class SolutionError(Exception):
    """The solution cannot be loaded: the message says which file and what was expected."""


@dataclasses.dataclass
class Solution:
    name: str
    path: str                 # the directory or file given
    entry: str                # the solution.py
    manifest: dict
    content_hash: str
    run: object = None
    prepare: object = None
    module: object = None


def describe(path):
    """The solution's name, entry file, manifest and content hash, without importing it."""
    try:
        return _describe(os.path.abspath(path))
    except tree.Refused as e:      # a file the solution may not hold, or too much of them
        raise SolutionError(str(e)) from e


def _describe(path):
    if os.path.isdir(path):
        found = tree.solution_files(path)
        entry = os.path.join(path, "solution.py")
        if entry not in found.files:
            raise SolutionError(f"{path}: a solution directory needs solution.py")
    elif os.path.lexists(path) and path.endswith(".py"):
        found = tree.solution_files(path)
        entry = path
    else:
        raise SolutionError(f"{path}: expected a directory with solution.py or a .py file")
    manifest = {}
    yml = os.path.join(path, "solution.yml")
    if yml in found.files:
        import yaml
        raw = tree.read_whole(yml, MANIFEST_MAX)
        try:
            manifest = yaml.safe_load(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise SolutionError(f"{yml}: not UTF-8 text ({e.reason} at byte {e.start})") from e
        except (yaml.YAMLError, RecursionError, ValueError) as e:
            raise SolutionError(f"{yml}: not valid YAML: {_shown(str(e))}") from e
        manifest = {} if manifest is None else manifest
        _check_manifest(manifest, yml, path, found.files)
    return Solution(name=manifest.get("name", plain_name(path)), path=path, entry=entry, manifest=manifest,
                    content_hash=tree.content_hash(path, found))


def plain_name(path):
    """A solution's default name: its folder's or file's, each character but letters, digits and `_.-` made `_`
    (a path is the submitter's text: it may hold newlines that would start lines of their own on a console)."""
    path = os.path.abspath(path)
    name = os.path.basename(path.rstrip("/")) if os.path.isdir(path) else os.path.splitext(os.path.basename(path))[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip("._-")[:64] or "solution"


def _shown(value):
    """A bounded repr of a manifest's value for an error message: YAML aliases make a small file a huge value."""
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxstring, r.maxother = 2, 4, 4, 60, 60
    return r.repr(value)


def _check_manifest(manifest, yml, base, files):
    """The manifest's keys and values, which the judge puts into file names, console lines and the compiler's command
    line: known keys, a name of plain characters, an importable extension name, sources that are files of the
    solution's folder, flags as printable strings. `files`: the folder's regular files."""
    if not isinstance(manifest, dict):
        raise SolutionError(f"{yml}: expected a mapping of keys ({', '.join(KEYS)})")
    unknown = [k for k in manifest if k not in KEYS]      # a key of another type (`1: one`) too
    if unknown:
        raise SolutionError(f"{yml}: unknown keys {_shown(unknown)}: expected only {', '.join(KEYS)}")
    name = manifest.get("name")
    if "name" in manifest and not (isinstance(name, str) and NAME.fullmatch(name)):       # `name:` (null) too
        raise SolutionError(f"{yml}: `name` {_shown(name)}: expected 1 to 64 letters, digits, '_', '-' or '.', starting with "
                            f"a letter or a digit")
    language = manifest.get("language")
    if "language" in manifest and not (isinstance(language, str) and NAME.fullmatch(language)):
        raise SolutionError(f"{yml}: `language` {_shown(language)}: expected a word (python, triton, cuda or cpp)")
    ext = manifest.get("extension")
    if "extension" in manifest and not (isinstance(ext, str) and ext.isidentifier() and not keyword.iskeyword(ext)):
        raise SolutionError(f"{yml}: `extension` {_shown(ext)}: expected a Python identifier (the module's name)")
    for key in ("sources", "cflags", "cuda_cflags", "ldflags"):
        value = manifest.get(key, [])
        if not (isinstance(value, list) and len(value) <= LIST_MAX and
                all(isinstance(v, str) and 0 < len(v) <= PATH_MAX and v.isprintable() for v in value)):
            raise SolutionError(f"{yml}: `{key}`: expected a list of strings (at most {LIST_MAX}, each of 1 to "
                                f"{PATH_MAX} printable characters), got {_shown(value)}")
    if manifest.get("sources") and not ext:
        raise SolutionError(f"{yml}: `sources` need `extension`, the module name to build them into")
    for src in manifest.get("sources", []):
        full = os.path.normpath(os.path.join(base, src))
        if os.path.isabs(src) or not full.startswith(base + os.sep):
            raise SolutionError(f"{yml}: source {_shown(src)} is not inside the solution's folder {base}")
        if full not in files:
            raise SolutionError(f"{yml}: source {_shown(src)}: expected a file of the solution's folder")


def _machine_tag():
    import torch
    tag = f"torch{torch.__version__}"
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        tag += f"-cuda{torch.version.cuda}-sm{major}{minor}"
    else:
        tag += "-cpu"
    return tag.replace("+", "_")


def build_dir(solution):
    root = os.environ.get("WAN_BUILD_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "wan-vae-decode", "build")
    return os.path.join(root, f"{solution.name}-{solution.content_hash}-{_machine_tag()}")


def build(solution, verbose=False):
    """Build the manifest's extension (cached); returns the extension module, or None when there is nothing to
    build. Raises SolutionError with the compiler's message on failure."""
    m = solution.manifest
    if not m.get("sources"):
        return None
    built = os.path.join(build_dir(solution), f"{m['extension']}.so")
    loaded = sys.modules.get(m["extension"])
    if loaded is not None:      # reused only if it is this build: another module of the name is not this solution's
        if os.path.realpath(getattr(loaded, "__file__", None) or "/") == os.path.realpath(built):
            return loaded
        raise SolutionError(f"{solution.path}/solution.yml: `extension` {m['extension']!r}: a module of that name "
                            f"is imported already ({getattr(loaded, '__file__', None) or 'built in'}), expected a "
                            f"name of its own")
    if os.path.isfile(built):
        # Built already (the harness builds before any rank starts): import it without cpp_extension, which
        # writes lock files into the build folder, and a rank may not write there.
        import torch  # noqa: F401 (the extension links against torch's libraries)
        spec_ = importlib.util.spec_from_file_location(m["extension"], built)
        module = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(module)
        sys.modules[m["extension"]] = module
        return module
    from torch.utils import cpp_extension
    base = os.path.dirname(solution.entry)
    sources = [os.path.join(base, s) for s in m["sources"]]
    for s in sources:
        if not os.path.isfile(s):
            raise SolutionError(f"{solution.path}/solution.yml lists {s}, which does not exist")
    directory = build_dir(solution)
    os.makedirs(directory, exist_ok=True)
    try:
        module = cpp_extension.load(name=m["extension"], sources=sources, build_directory=directory,
                                    extra_cflags=list(m.get("cflags", [])),
                                    extra_cuda_cflags=list(m.get("cuda_cflags", [])),
                                    extra_ldflags=list(m.get("ldflags", [])), verbose=verbose)
    except Exception as e:  # the compiler's output is in the message
        raise SolutionError(f"{solution.name}: building {m['extension']} failed: {e}") from e
    sys.modules[m["extension"]] = module   # so that solution.py can `import` it by the manifest's name
    return module


def _check_signature(fn, name, arity, entry):
    if not callable(fn):
        raise SolutionError(f"{entry}: `{name}` is not a function")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(required) > arity or (len(positional) < arity and not varargs):
        want = {"run": "run(z, weights, rank, world, pg, out)", "prepare": "prepare(weights, rank, world, pg)"}[name]
        raise SolutionError(f"{entry}: `{name}` takes {len(positional)} positional arguments, expected {want}")


def load(path):
    """Import the solution (building its extension first) and return it with `run` and `prepare` bound."""
    solution = describe(path)
    build(solution)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    package = f"wan_solution_{solution.content_hash}"
    base = os.path.dirname(solution.entry)
    mod_name = f"{package}.solution" if os.path.isdir(solution.path) else package
    sys.modules.pop(mod_name, None)
    running = solution.entry
    try:
        if os.path.isdir(solution.path):
            # A package whose path is the directory, so the solution's own modules import relatively. Its
            # __init__.py, where there is one, runs first, as Python's own import of the package would run it.
            init = os.path.join(base, "__init__.py")
            if os.path.isfile(init):
                pkg_spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[base])
            else:
                pkg_spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
            pkg = importlib.util.module_from_spec(pkg_spec)
            pkg.__path__ = [base]
            sys.modules[package] = pkg
            if pkg_spec.loader is not None:
                running = init
                pkg_spec.loader.exec_module(pkg)
                running = solution.entry
        module = sys.modules.get(mod_name)     # imported by the __init__.py already: one module, not two
        if module is None:
            mod_spec = importlib.util.spec_from_file_location(mod_name, solution.entry)
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[mod_name] = module
            mod_spec.loader.exec_module(module)
    except Exception as e:
        hint = ""
        if isinstance(e, ImportError) and "relative import" in str(e) and not os.path.isdir(solution.path):
            hint = f" (a folder solution is given by its folder: {os.path.dirname(solution.entry)})"
        raise SolutionError(f"{running}: import failed: {type(e).__name__}: {e}{hint}") from e
    if not hasattr(module, "run"):
        near = [n for n in dir(module) if n.lower() in ("run_", "_run", "runn", "rn", "decode", "main", "forward")
                or (n.lower().startswith("run") and n != "run")]
        hint = f" (found {', '.join(near)})" if near else ""
        raise SolutionError(f"{solution.entry}: no `run(z, weights, rank, world, pg, out)`{hint}")
    _check_signature(module.run, "run", 6, solution.entry)
    prepare = getattr(module, "prepare", None)
    if prepare is None:
        near = [n for n in dir(module) if n.lower().startswith(("prep", "_prep")) and n != "prepare"]
        if near:
            raise SolutionError(f"{solution.entry}: found {', '.join(near)} but no `prepare`; misspelt?")
    else:
        _check_signature(prepare, "prepare", 4, solution.entry)
    solution.run, solution.prepare, solution.module = module.run, prepare, module
    return solution


# The build child: confined as a rank is (harness/isolation/seccomp.py, harness/isolation/landlock.py) before torch
# and the compiler run, so that the solution's code that runs at build time (a global constructor in the extension,
# which cpp_extension loads) reads no more than a rank may, writes only the build folder and its own scratch folder,
# holds no capabilities, cannot touch the judge's limits, and leaves no IPC object or network state behind.
_BUILD_CHILD = """import json, os, sys
sys.path.insert(0, {root!r})
from harness.isolation import landlock, seccomp
from harness.load import solution
try:
    d = solution.describe({path!r})
    if {lock!r} is not None:      # before torch (build_dir's machine tag imports it) starts threads
        # What a rank gives up (harness/isolation/seccomp.py): no capabilities, the seccomp filter (no prlimit of the
        # judge), IPC and network namespaces of its own (what it makes there goes with it; nothing to connect to).
        seccomp.confine(net="new", whole=True)
        landlock.lock(read=landlock.allowed_reads(exclude={lock!r}) + [os.path.abspath({path!r})],
                      write=[{build!r}, {scratch!r}], devices=["/dev/null", "/dev/zero", "/dev/urandom"])
    solution.build(d)
except Exception as e:
    print(json.dumps({{"error": str(e)}}))
    sys.exit(1)
"""


def _build_over(build, scratch, logs):
    """Why a build is over its disk cap (disk.BUILD_CAP for its folder, scratch and logs together), or None."""
    from harness.isolation import disk
    used = sum(os.fstat(f.fileno()).st_blocks * 512 for f in logs)
    return disk.over([build] + ([scratch] if scratch else []), cap=disk.BUILD_CAP - used)


def _tail(f, size=1 << 20):
    """The last `size` bytes of a build log (binary) as text: it may be gigabytes; the judge needs its last lines."""
    f.seek(max(0, os.fstat(f.fileno()).st_size - size))
    return f.read(size).decode("utf-8", "replace")


def build_in_child(path, timeout, exclude=None):
    """Build a solution's extension in a child process (a hanging compiler cannot hang the harness); returns None
    or the failure in a few lines: what failed and the compiler's first error. exclude: the folders it must not
    read (the data, the repository), for a child locked down as a rank is, or None (no Landlock: not locked). The
    child gets the platform's environment only (never the judge's), runs in a cgroup of its own where there is one,
    confined as a rank is where it is locked (no capabilities, the seccomp filter, IPC and network namespaces of its
    own), and nothing it starts outlives it."""
    import tempfile

    from harness.isolation import disk, procs
    from harness.isolation.cgroup import Cgroup
    from harness.judge import rank_env
    procs.become_subreaper()         # what it detaches stays below the judge, where it is found
    before = procs.descendants()
    scratch = tempfile.mkdtemp(prefix="wan-build-")
    environ = rank_env.platform_env()
    build = build_dir(describe(path))
    if exclude is not None:
        from harness.isolation.landlock import SandboxError, check_grants
        try:
            check_grants([path, build], exclude, within=[ROOT])
        except SandboxError as e:
            return str(e)
    os.makedirs(build, exist_ok=True)
    # WAN_BUILD_DIR always: the default folder follows HOME, which is the child's scratch (deleted after it).
    environ.update(HOME=scratch, TMPDIR=scratch, PYTHONDONTWRITEBYTECODE="1", WAN_BUILD_DIR=os.path.dirname(build))
    code = _BUILD_CHILD.format(root=ROOT, path=os.path.abspath(path), scratch=scratch, build=build,
                               lock=None if exclude is None else [os.path.realpath(e) for e in exclude])
    jail = Cgroup.make(f"wan-build-{os.getpid()}-{os.path.basename(scratch)}") if exclude is not None else None
    # Files, not pipes: a process the build leaves behind would hold a pipe open, and reading it to the end wait.
    logs = [tempfile.TemporaryFile() for _ in range(2)]
    p = subprocess.Popen([sys.executable, "-c", code], env=environ, stdout=logs[0], stderr=logs[1],
                         stdin=subprocess.DEVNULL, cwd=scratch, start_new_session=True)
    if jail is not None:
        try:
            jail.add(p.pid)
        except OSError:
            jail.remove()
            jail = None
    try:        # each file it writes at most disk.FILE_CAP, as a rank's (its logs too)
        resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (disk.FILE_CAP, disk.FILE_CAP))
    except OSError:
        pass
    deadline, why = time.monotonic() + timeout, None
    try:
        while why is None:
            try:
                p.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                why = _build_over(build, scratch, logs) or \
                    (f"the build took more than {timeout:.0f} s" if time.monotonic() > deadline else None)
        if why:
            p.kill()
            p.wait()
    finally:
        if jail is not None:
            jail.kill()
        for _ in range(5):       # again while any is left: a helper that forks on, or left the cgroup
            left = procs.descendants() - before
            if not left:
                break
            procs.kill(left)
            time.sleep(0.05)
            procs.reap(left)     # re-parented to the judge: a zombie would keep its cgroup from going
        if jail is not None:
            jail.remove()
        disk.remove(scratch)
    # The build folder outlives the run (a cache, and code at build time runs again each run): it stays small.
    why = why or _build_over(build, None, logs) or \
        (f"the build wrote a file of more than {disk.gib(disk.FILE_CAP)}" if p.returncode == -signal.SIGXFSZ else None)
    out, err = [_tail(f) for f in logs]
    for f in logs:
        f.close()
    if why:
        disk.remove(build)
        return why
    p = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    if not p.returncode:
        return None
    try:
        text = json.loads(p.stdout.strip().splitlines()[-1])["error"]
    except (ValueError, IndexError, KeyError):
        text = p.stderr.strip() or "build failed"
    lines = text.splitlines()
    first_error = next((ln.strip() for ln in lines if "error" in ln.lower() and ln is not lines[0]), "")
    return (lines[0][:500] + (f" ... {first_error[:500]}" if first_error else "")) if lines else "build failed"
