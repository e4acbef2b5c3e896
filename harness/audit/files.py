"""audit.py's files: which files of a solution are read and as what (Python, C/C++/CUDA, solution.yml, bytecode,
documentation), their text and size limits, the sources and include folders solution.yml and #include name, the
files that are no source at all, and the solution's Python files as modules (`Modules`: `sol:N`, for imports
between them). Every file's findings go to its `findings.Unit`, kept by `Solution`. Files are listed and read through
harness/load/tree.py, as the loader's: what is no regular file is a finding, never read."""
import importlib.util
import io
import marshal
import os
import re
import sys
import tokenize

import yaml

from harness.audit import findings
from harness.load import tree

PY_SUFFIX = (".py",)
YML_SUFFIX = (".yml", ".yaml")
CPP_SUFFIX = (".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp", ".cxx", ".hxx", ".hh", ".inl", ".ipp", ".tcc",
              ".ptx", ".s", ".S")
DOC_SUFFIX = (".md", ".txt", ".rst")
DOC_NAMES = ("LICENSE", "LICENCE", "README", "NOTICE", "AUTHORS", ".gitignore")
BIG_CONSTANT = 256 * 1024      # characters: a longer string or bytes constant is data, not code
BIG_FILE = tree.BIG_FILE       # bytes: a longer source is data, not code (and is read no further)
BIG_SOLUTION = 1024 * 1024     # bytes of all a solution's files: the baseline is 50 KB; more is data shipped
# solution.yml's flags: cpp_extension writes each unquoted into build.ninja, which runs it through /bin/sh, so a flag
# is one token without blanks or shell syntax; options that run, load or include other files are refused (alone,
# after `=` or `,`: `-Xcompiler=-include,x`, `-Wp,-imacros,x`), and so are absolute and parent paths.
_FLAG_SHELL = re.compile(r"[\s$`'\"\\;|&<>()*?\[\]{}~#!]|^$")
_FLAG_OUTSIDE = re.compile(r"(^|[,=])-?(-wrapper|-include|-imacros|--pre-include|-fplugin|--?specs|-B|-L|--library-path|"
                           r"-Wl,|-Xlinker|--linker-options|-Wp,|-Xpreprocessor|-ccbin|--compiler-bindir|--?sysroot|"
                           r"-isysroot|--options-file|-optf|-trigraphs|@)")
_FLAG_PATH = re.compile(r"(^-*[\w+-]*|[,=:])/|\.\.")
# A language standard of C++17 or later (torch's headers need it): an older one, or an ISO C mode, reads trigraphs,
# and the audit's reading of comments and literals would no longer be the compiler's.
_FLAG_STANDARD = re.compile(r"(^|[,=])--?(ansi\b|trigraphs\b|std\b(?!=(c|gnu)\+\+(17|1z|20|2a|23|2b|26|2c)($|,)))")


class UsageError(ValueError):
    """The path is not a solution (a directory with solution.py, or a .py file)."""


def is_solution(path):
    return (os.path.isdir(path) and os.path.isfile(os.path.join(path, "solution.py"))) or \
        (os.path.isfile(path) and path.endswith(".py"))


def is_inside(path, base):
    if "\0" in path:       # no file's name (realpath would raise)
        return False
    path, base = os.path.realpath(path), os.path.realpath(base)
    return path == base or path.startswith(base + os.sep)


class Modules:
    """The solution's own Python modules, for names imported between them (`from . import helper`): each file is
    `sol:N`, with its alias map, so that `helper.torch.load` reads as `torch.load`."""

    def __init__(self, files=(), base="", extensions=()):
        self.ids = {f: f"sol:{i}" for i, f in enumerate(files)}
        self.extensions = set(extensions)   # its compiled modules, built from its audited C++ sources
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
        for sub in (os.path.join(target, name, "__init__.py"), os.path.join(target, name + ".py")):   # as Python:
            if sub in self.ids:                                                        # a package before a module
                return self.ids[sub]
        for mod in (os.path.join(target, "__init__.py"), target + ".py"):
            if mod in self.ids:
                return f"{self.ids[mod]}.{name}"
        return "sol:?." + name      # not a Python file of the solution (a compiled module is reported anyway)

    def show(self, q):
        head = q.split(".")[0]
        return q.replace(head, self.shown[head], 1) if head in self.shown else q


class Solution:
    """The solution at `path` (absolute): its folder, and one Unit per file that has findings or was read."""

    def __init__(self, path):
        self.path = path
        self.base = path if os.path.isdir(path) else os.path.dirname(path)
        self.units = {}
        self.extensions = set()     # the modules its manifest builds from its audited sources (import them freely)

    def unit_for(self, abs_path, text=""):
        rel = os.path.relpath(abs_path, self.base)
        if rel not in self.units:
            self.units[rel] = findings.Unit(rel, text)
        elif text and not self.units[rel].lines:
            self.units[rel].lines = text.splitlines()
        return self.units[rel]

    def read(self, f):
        """The bytes of file f, or None (a finding) when it cannot be read or is over BIG_FILE (read no further)."""
        try:
            data = tree.read(f, BIG_FILE)
        except (tree.NotRegular, OSError) as e:
            self.unit_for(f).add(0, "unaudited-file", f"cannot read: {e.strerror if isinstance(e, OSError) else e}")
            return None
        if len(data) > BIG_FILE:
            self.unit_for(f).add(0, "unaudited-file", f"more than {BIG_FILE} bytes: a source this large is data, "
                                                      f"not code")
            return None
        return data

    def files(self):
        """Every file of the solution by kind: (python, yml, cpp, pyc, other), `other` being neither a source the
        audit reads nor documentation. Listed by the walk that loader's content hash uses (harness/load/tree.py); what
        it refuses (links, FIFOs, devices, sockets, past its caps) is a finding and never read."""
        path = self.path
        if os.path.isdir(path):
            found = tree.walk(path)
            for f, what in found.odd:
                self.unit_for(f).add(0, "unaudited-file", f"{what}, which the audit does not read: expected a "
                                                          f"regular file or a folder")
            for f, why in found.unlisted:
                self.unit_for(f).add(0, "unaudited-file", f"cannot be listed: {why}")
            if found.over:
                self.unit_for(path).add(0, "unaudited-file", f"{found.over}: not every file is audited")
            # Files in hidden folders are audited only where #include'd or listed in solution.yml: nothing in them can
            # be imported (loader's hash covers them all the same). Their ranks can read them all the same, so any
            # other file there is as unaudited as one outside them, and their documentation counts with the rest.
            everything = [f for f in found.files
                          if not any(part.startswith(".") for part in os.path.relpath(f, path).split(os.sep)[:-1])]
            total = sum(os.path.getsize(f) for f in found.files)
            if total > BIG_SOLUTION:
                self.unit_for(path).add(0, "data-file", f"the solution's files hold {total} bytes: more than "
                                                             f"{BIG_SOLUTION // 1024} KiB is data, not code")
            shown = set(everything)
            hidden = [f for f in found.files if f not in shown]
            everything += [f for f in hidden if not f.endswith(CPP_SUFFIX + PY_SUFFIX + YML_SUFFIX)]
            unread = [f for f in hidden if f.endswith(CPP_SUFFIX + PY_SUFFIX + YML_SUFFIX)]
        else:
            cache = os.path.join(self.base, "__pycache__")
            stem = os.path.splitext(os.path.basename(path))[0]
            cached = os.listdir(cache) if os.path.isdir(cache) else []
            everything = [path] + sorted(os.path.join(cache, f) for f in cached if f.startswith(stem + "."))
            unread = []
        python, yml, cpp, pyc, other, docs = [], [], [], [], [], unread
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
            else:
                docs.append(f)
        # A solution's ranks can read its own files: documentation (and sources in hidden folders, read only where
        # included) beyond a few pages is data shipped past the audit
        size = sum(os.path.getsize(f) for f in docs)
        if size > BIG_CONSTANT:
            self.unit_for(max(docs, key=os.path.getsize)).add(
                0, "data-file", f"documentation of {size} bytes in {len(docs)} file(s): more than "
                                     f"{BIG_CONSTANT // 1024} KiB is data, not documentation")
        return python, yml, cpp, pyc, other

    def check_leftovers(self, pyc, other):
        """Bytecode must be its source's; any other file that is neither source nor documentation is a finding."""
        for f in pyc:
            stem = os.path.basename(f).split(".")[0]
            source = os.path.join(os.path.dirname(os.path.dirname(f)), stem + ".py")
            if os.path.isfile(source):      # without its source a cached .pyc is never imported
                check_pyc(self.unit_for(f), f, source)
        for f in other:
            if compiled(f):
                self.unit_for(f).add(0, "unaudited-file", "compiled code, which the audit cannot read, could be "
                                                          "imported or loaded unaudited: delete it (a build's "
                                                          "leftover?); the harness builds the sources that "
                                                          "solution.yml names")
            else:
                self.unit_for(f).add(0, "data-file", "neither a source the audit reads nor documentation")


COMPILED_SUFFIX = (".so", ".pyd", ".dylib", ".dll", ".o", ".a", ".cubin", ".fatbin", ".pyc", ".pyo")
COMPILED_MAGIC = (b"\x7fELF", b"MZ", b"\xca\xfe\xba\xbe", b"\xfe\xed\xfa", b"\xce\xfa\xed\xfe",
                  b"\xcf\xfa\xed\xfe", b"!<arch>")


def compiled(f):
    """Whether file f is compiled code by its name or its first bytes (an ELF, PE, Mach-O or archive file; a
    module's extension, wherever its name puts it: `kern.cpython-312-x86_64-linux-gnu.so`)."""
    name = os.path.basename(f)
    if name.endswith(COMPILED_SUFFIX) or ".so." in name:
        return True
    try:
        head = tree.read(f, 8)[:8]
    except (tree.NotRegular, OSError):
        return True             # unreadable: taken for the worst
    return head.startswith(COMPILED_MAGIC)


def check_pyc(unit, pyc, source):
    """A .pyc the import system would load instead of its source must be that source, compiled."""
    try:
        data, src = tree.read(pyc), tree.read(source)
    except (tree.NotRegular, OSError) as e:
        unit.add(0, "unaudited-file", f"cannot read: {e}")
        return
    if len(data) > tree.BIG_FILE or len(src) > tree.BIG_FILE:
        unit.add(0, "unaudited-file", f"bytecode or its source of more than {tree.BIG_FILE} bytes: not compared")
        return
    parts = os.path.basename(pyc).split(".")
    tag = parts[1] if len(parts) >= 3 else ""
    flags = int.from_bytes(data[4:8], "little") if len(data) >= 16 else -1
    st = os.stat(source)
    stamped = flags == 0 and int.from_bytes(data[8:12], "little") == (int(st.st_mtime) & 0xFFFFFFFF) \
        and int.from_bytes(data[12:16], "little") == (st.st_size & 0xFFFFFFFF)
    if flags == 0 and not stamped:
        return                   # stale: the import system compiles the source again
    if tag != sys.implementation.cache_tag:
        return                   # another interpreter's: the ranks run this one, which never imports it
    if data[:4] != importlib.util.MAGIC_NUMBER:
        unit.add(0, "unaudited-file", "bytecode that this audit cannot compare with its source: delete __pycache__")
        return
    optimize = int(parts[2][4:]) if len(parts) == 4 and parts[2].startswith("opt-") else 0
    try:
        code = marshal.loads(data[16:])
        same = code == compile(src, source, "exec", dont_inherit=True, optimize=optimize)
    except Exception:     # noqa: BLE001 - any failure to compare is a failure to verify
        same = False
    if not same:
        unit.add(0, "unaudited-file", "bytecode that differs from its source would be imported instead of it")


def check_manifest(unit, text, folder, cpp):
    """solution.yml's sources and flags must stay inside the solution (`folder`), each flag one plain token of the
    compiler's options that read no other file; adds its sources to `cpp` and returns (its -I folders, the name of
    the extension it builds from them or None). `text` is parsed as the loader parses it, comments and all."""
    try:
        manifest = yaml.safe_load(text) or {}
    except (yaml.YAMLError, RecursionError, ValueError) as e:
        unit.add(1, "unaudited-file", f"not valid YAML, so it cannot be audited: {e}")
        return [], None
    if not isinstance(manifest, dict):
        return [], None

    def line_of(value):
        for k, line in enumerate(unit.lines, 1):
            if str(value) in line:
                return k
        return 1

    include_dirs = []
    sources = manifest.get("sources") or []
    for source in sources if isinstance(sources, list) else [sources]:
        full = os.path.normpath(os.path.join(folder, str(source)))
        if not (isinstance(source, str) and source.isprintable()):    # loader.describe refuses it too
            unit.add(line_of(source), "unaudited-file", f"source {source!r} is not a plain path")
        elif not is_inside(full, folder):
            unit.add(line_of(source), "unaudited-file", f"source `{source}` lies outside the solution")
        elif os.path.isfile(full) and full not in cpp:
            cpp.append(full)
    for key in ("cflags", "cuda_cflags", "ldflags"):
        flags = manifest.get(key) or []
        for flag in flags if isinstance(flags, list) else [flags]:
            flag = str(flag)
            if _FLAG_SHELL.search(flag):
                unit.add(line_of(flag), "unaudited-file", f"{key} `{flag}` is not one plain token: the build hands "
                                                          f"flags to a shell, which may run or include anything")
            elif _FLAG_STANDARD.search(flag):
                unit.add(line_of(flag), "unaudited-file", f"{key} `{flag}` chooses a language standard before C++17 "
                                                          f"(or C's), which reads trigraphs")
            elif _FLAG_OUTSIDE.search(flag) or _FLAG_PATH.search(flag):
                unit.add(line_of(flag), "unaudited-file", f"{key} `{flag}` reaches files outside the solution")
            elif flag.startswith("-I"):
                include_dirs.append(os.path.normpath(os.path.join(folder, flag[2:].strip())))
    ext = manifest.get("extension")
    return include_dirs, ext if isinstance(ext, str) and ext.isidentifier() and sources else None


def resolve_include(unit, line, kind, name, folder, include_dirs, base):
    """The solution file an #include names (to audit it too), or None; one reaching outside is a finding."""
    if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
        full = os.path.normpath(os.path.join(folder, name))
        if os.path.isabs(name) or not is_inside(full, base):
            unit.add(line, "unaudited-file", f"includes `{name}`, outside the solution")
            return None
    candidates = ([os.path.join(folder, name)] if kind == '"' else []) + [os.path.join(d, name) for d in include_dirs]
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(c):
            if not is_inside(c, base):
                unit.add(line, "unaudited-file", f"includes `{name}`, outside the solution")
                return None
            return c
    return None


def yaml_comments(text):
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


def python_comments(data):
    """(line, text) of every comment of a Python source (tokenize: never inside strings)."""
    out = []
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        pass
    return out


def decode_python(data):
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")
