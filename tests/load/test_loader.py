"""loader.py: solutions by file or directory, relative imports, clear errors for missing or misspelt entries; a build
cache keyed by every file of the solution; a folder of regular files and folders only, read within caps."""
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

import loader
from harness.load import tree

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # tests/: the fixture folders
CHEATS = os.path.join(TESTS, "cheats")
TWINS = [os.path.join(CHEATS, "shares_a_build", twin) for twin in ("honest", "evil")]


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_file_and_directory_solutions(tmp_path):
    f = write(tmp_path / "one.py", "def run(z, weights, rank, world, pg, out):\n    return 'file'\n")
    s = loader.load(str(f))
    assert s.name == "one" and s.prepare is None and s.run(*[None] * 6) == "file"
    write(tmp_path / "pkg" / "helpers.py", "VALUE = 'relative import works'\n")
    write(tmp_path / "pkg" / "solution.py", "from . import helpers\nimport spec\n"
          "def prepare(weights, rank, world, pg):\n    return weights\n"
          "def run(z, weights, rank, world, pg, out):\n    return helpers.VALUE\n")
    s = loader.load(str(tmp_path / "pkg"))
    assert s.name == "pkg" and s.run(*[None] * 6) == "relative import works" and s.prepare is not None
    # a subpackage of the folder, imported relatively from solution.py and from within itself
    write(tmp_path / "deep" / "ops" / "__init__.py", "from .clamp import clamp\n")
    write(tmp_path / "deep" / "ops" / "clamp.py", "from ..consts import LIMIT\n"
          "def clamp(x):\n    return max(-LIMIT, min(LIMIT, x))\n")
    write(tmp_path / "deep" / "consts.py", "LIMIT = 1\n")
    write(tmp_path / "deep" / "solution.py", "from .ops import clamp\n"
          "def run(z, weights, rank, world, pg, out):\n    return clamp(z)\n")
    assert loader.load(str(tmp_path / "deep")).run(5, *[None] * 5) == 1


@pytest.mark.parametrize("init", ["SCALE = 'set by the package'\n",
                                  "SCALE = 'set by the package'\nfrom .solution import run  # noqa: E402\n"])
def test_a_folders_init_runs_once_before_its_solution(tmp_path, init):
    """A folder with an `__init__.py` is a package: it runs first (once), so solution.py can import what it defines,
    and an `__init__.py` that imports solution.py itself leaves one module, not two."""
    write(tmp_path / "pkg" / "__init__.py", "import itertools\nCOUNT = itertools.count()\n" + init)
    write(tmp_path / "pkg" / "solution.py", "from . import SCALE, COUNT\nLOADS = next(COUNT)\n"
          "def run(z, weights, rank, world, pg, out):\n    return SCALE, LOADS\n")
    assert loader.load(str(tmp_path / "pkg")).run(*[None] * 6) == ("set by the package", 0)


def test_manifest_name_and_content_hash(tmp_path):
    write(tmp_path / "a" / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    write(tmp_path / "a" / "solution.yml", "name: fancy\nlanguage: python\n")
    first = loader.describe(str(tmp_path / "a"))
    assert first.name == "fancy"
    write(tmp_path / "a" / "solution.py", "def run(z, weights, rank, world, pg, out):\n    return 1\n")
    assert loader.describe(str(tmp_path / "a")).content_hash != first.content_hash


@pytest.mark.parametrize("source, message", [
    ("def runn(z, weights, rank, world, pg, out):\n    pass\n", r"no `run\(z, weights, rank, world, pg, out\)` \(found runn\)"),
    ("def run(z, weights, rank, out):\n    pass\n", "`run` takes 4 positional arguments"),
    ("run = 3\n", "`run` is not a function"),
    ("def run(z, weights, rank, world, pg, out):\n    pass\ndef prepare(weights):\n    pass\n",
     "`prepare` takes 1 positional arguments"),
    ("def run(z, weights, rank, world, pg, out):\n    pass\ndef prepar(weights, rank, world, pg):\n    pass\n",
     "found prepar but no `prepare`"),
    ("import not_a_module_anywhere\n", "import failed: ModuleNotFoundError"),
])
def test_clear_errors(tmp_path, source, message):
    f = write(tmp_path / "bad.py", source)
    with pytest.raises(loader.SolutionError, match=message):
        loader.load(str(f))


def test_a_folder_solutions_file_given_alone_names_its_folder(tmp_path):
    """A folder solution's solution.py imports its own modules relatively: given alone, the error names the folder to
    give instead, which loads."""
    write(tmp_path / "sol" / "helper.py", "SCALE = 1\n")
    f = write(tmp_path / "sol" / "solution.py", "from .helper import SCALE\n"
                                               "def run(z, weights, rank, world, pg, out):\n    pass\n")
    with pytest.raises(loader.SolutionError, match=f"given by its folder: {tmp_path / 'sol'}"):
        loader.load(str(f))
    assert loader.load(str(tmp_path / "sol")).run is not None


@pytest.mark.parametrize("line, message", [
    ("name: /tmp/planted", "`name` '/tmp/planted': expected 1 to 64 letters"),
    ("name: ../../x", "`name` '../../x'"),
    ("name: '[/]'", r"`name` '\[/\]'"),
    ("name: .hidden", "`name` '.hidden'"),
    ("name:\n", "`name` None: expected 1 to 64 letters"),          # null: bench crashed joining the names
    ("extension:\n", "`extension` None: expected a Python identifier"),
    ("name: 3", "`name` 3"),
    ("extension: ../x\nsources: [a.cpp]", "`extension` '../x': expected a Python identifier"),
    ("extension: ext\nsources: [../../outside.cpp]", "source '../../outside.cpp' is not inside"),
    ("extension: ext\nsources: [/etc/passwd]", "source '/etc/passwd' is not inside"),
    ("cflags: -O3", "`cflags`: expected a list of strings"),
    ("1: one\nfoo: two", r"unknown keys \[1, 'foo'\]: expected only name, language"),
    ("true: x", r"unknown keys \[True\]"),
    ("language: [cpp]", r"`language` \['cpp'\]: expected a word"),
    ('extension: ext\nsources: ["a\\0b.cpp"]', r"`sources`: expected a list of strings .*printable.*'a\\x00b.cpp'"),
    ('cflags: ["-O3\\n-I/etc"]', "`cflags`: expected a list of strings"),
    ("extension: ext\nsources: [missing.cpp]", "source 'missing.cpp': expected a file of the solution's folder"),
    ("extension: ext\nsources: [.]", "source '.' is not inside"),
])
def test_manifest_values_that_name_files_are_plain(tmp_path, line, message):
    """The judge makes file names (logs, the build folder) and console lines of them: a path or markup is refused
    with the file and the rule."""
    write(tmp_path / "x" / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    write(tmp_path / "x" / "a.cpp", "")
    write(tmp_path / "x" / "solution.yml", line + "\n")
    with pytest.raises(loader.SolutionError, match=f"solution.yml: {message}"):
        loader.describe(str(tmp_path / "x"))


def test_a_manifest_that_would_cost_the_judge_is_refused_plainly(tmp_path):
    """A solution.yml is the submitter's bytes: an alias bomb (a billion strings from a few lines) gives a short error
    at once, not a repr that outgrows memory; text that is not UTF-8, or more than MANIFEST_MAX bytes, is a
    SolutionError naming the file, never another exception (which would end bench's run for every solution)."""
    import time
    write(tmp_path / "x" / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    yml = tmp_path / "x" / "solution.yml"
    levels = ["l0: &l0 [aaaaaaaaaa]"] + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    yml.write_text("\n".join(["x:"] + ["  " + line for line in levels]) + "\ncflags: *l9\n")
    t = time.monotonic()
    with pytest.raises(loader.SolutionError) as e:
        loader.describe(str(tmp_path / "x"))
    assert time.monotonic() - t < 5 and len(str(e.value)) < 1000, str(e.value)[:200]
    yml.write_bytes(b"name: bad\xff\n")
    with pytest.raises(loader.SolutionError, match="solution.yml: not UTF-8"):
        loader.describe(str(tmp_path / "x"))
    yml.write_text("# " + "x" * loader.MANIFEST_MAX + "\n")
    with pytest.raises(loader.SolutionError, match="solution.yml: more than"):
        loader.describe(str(tmp_path / "x"))


def test_a_default_name_is_made_plain(tmp_path):
    write(tmp_path / "my [b]est" / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    assert loader.describe(str(tmp_path / "my [b]est")).name == "my__b_est"
    assert loader.NAME.fullmatch(loader.describe(str(write(tmp_path / ".x.py", "run = 1\n"))).name)
    (tmp_path / "nl\nPASS f121x1 (0.033 s)").mkdir()     # ci's verdict line names a folder so
    assert loader.plain_name(str(tmp_path / "nl\nPASS f121x1 (0.033 s)")) == "nl_PASS_f121x1__0.033_s_"


def test_not_a_solution(tmp_path):
    with pytest.raises(loader.SolutionError, match="needs solution.py"):
        loader.load(str(tmp_path))
    write(tmp_path / "x" / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    write(tmp_path / "x" / "solution.yml", "sources: [a.cpp]\n")
    with pytest.raises(loader.SolutionError, match="`sources` need `extension`"):
        loader.describe(str(tmp_path / "x"))


def test_build_error_names_the_solution(tmp_path, monkeypatch):
    monkeypatch.setenv("WAN_BUILD_DIR", str(tmp_path / "build"))
    broken = os.path.join(TESTS, "broken", "build_error")
    with pytest.raises(loader.SolutionError, match="build-error: building broken_ext failed"):
        loader.load(broken)


@pytest.mark.slow
def test_extension_builds_once_and_is_importable(tmp_path, monkeypatch):
    """A solution with a C++ extension: built into the cache keyed by content and machine, then imported by name."""
    monkeypatch.setenv("WAN_BUILD_DIR", str(tmp_path / "build"))
    write(tmp_path / "ext" / "solution.yml", "name: with-ext\nlanguage: cpp\nextension: wan_test_ext\n"
          "sources: [twice.cpp]\ncflags: [-O2]\n")
    write(tmp_path / "ext" / "twice.cpp", "#include <torch/extension.h>\n"
          "torch::Tensor twice(torch::Tensor x) { return x * 2; }\n"
          "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"twice\", &twice); }\n")
    write(tmp_path / "ext" / "solution.py", "import torch\nimport wan_test_ext\n"
          "def run(z, weights, rank, world, pg, out):\n    return wan_test_ext.twice(torch.ones(2))\n")
    s = loader.load(str(tmp_path / "ext"))
    assert s.run(*[None] * 6).tolist() == [2.0, 2.0]
    built = os.listdir(loader.build_dir(s))
    assert any(f.endswith(".so") for f in built)


@pytest.mark.slow
def test_a_build_that_fills_its_disk_fails_and_leaves_no_cache(tmp_path, monkeypatch):
    """Code that runs at build time (a global constructor) writes to the build folder, which outlives the run, and to
    its output, which the judge keeps: past disk.BUILD_CAP together the build fails and its folder goes; under it the
    same build passes and the judge reads only the tail of its output."""
    from harness.isolation import disk
    monkeypatch.setenv("WAN_BUILD_DIR", str(tmp_path / "build"))
    cheat = os.path.join(TESTS, "cheats", "fills_its_build")
    build = loader.build_dir(loader.describe(cheat))
    monkeypatch.setattr(disk, "BUILD_CAP", 64 << 20)
    assert loader.build_in_child(cheat, timeout=600) is None
    assert sum(f.startswith("fill-") for f in os.listdir(build)) == 1
    monkeypatch.setattr(disk, "BUILD_CAP", 5 << 20)      # the cached library's constructor runs again: 6 MiB more
    why = loader.build_in_child(cheat, timeout=600)
    assert why and "wrote more than" in why, why
    assert not os.path.exists(build)


def test_a_manifest_with_keys_of_two_types_is_the_solutions_load_error():
    """tests/cheats/mixes_manifest_keys: `1: one` beside `foo: two` is a SolutionError naming solution.yml and the keys
    (ci: its load error, exit 2), never a TypeError from ordering them (ci: a harness error; bench: ended)."""
    with pytest.raises(loader.SolutionError, match=r"mixes_manifest_keys/solution.yml: unknown keys \[1, 'foo'\]"):
        loader.describe(os.path.join(CHEATS, "mixes_manifest_keys"))


def test_twins_that_differ_in_an_included_file_get_build_folders_of_their_own(tmp_path, monkeypatch):
    """tests/cheats/shares_a_build: two folders, the same but kern.inl (which ext.cpp includes, a name no source
    list knows). Each gets its own content hash and build folder, so the gate cannot certify one twin's audit and run
    the other's cached build. Every file counts, by path and bytes: hidden ones, bytecode, any name, an empty folder."""
    monkeypatch.setenv("WAN_BUILD_DIR", str(tmp_path / "build"))
    honest, evil = (loader.describe(t) for t in TWINS)
    assert (honest.name, honest.manifest) == (evil.name, evil.manifest)
    assert honest.content_hash != evil.content_hash and loader.build_dir(honest) != loader.build_dir(evil)
    twin = tmp_path / "twin"
    shutil.copytree(TWINS[0], twin)
    first = loader.describe(str(twin)).content_hash
    assert first == honest.content_hash          # by path and bytes: not by where the folder is
    seen = {first}
    for name in ("kern.inl", ".hidden/x.h", "sub/.x", "data.bin", "__pycache__/ext.s", "kern.inl.orig"):
        write(twin / name, "#define FLAVOUR \"int8 codes\"\n")
        seen.add(loader.describe(str(twin)).content_hash)
    (twin / ".empty").mkdir()
    seen.add(loader.describe(str(twin)).content_hash)
    (twin / "kern.inl.orig").rename(twin / "kern.inl.old")     # the same bytes under another name
    seen.add(loader.describe(str(twin)).content_hash)
    assert len(seen) == 9, seen


def _stop_after(seconds):
    """A hang fails the test instead of stopping the run (a FIFO's open waits for a writer)."""
    def stop(*_):
        raise TimeoutError(f"still reading after {seconds} s")
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)


@pytest.mark.parametrize("make, name, what", [
    (lambda p, out: os.mkfifo(p), "helper.py", "a FIFO"),
    (lambda p, out: os.symlink("/dev/zero", p), "big.py", "a link"),
    (lambda p, out: os.symlink(out, p), "kern.inl", "a link"),               # a regular file outside the folder
    (lambda p, out: os.symlink(os.path.dirname(out), p), "lib", "a link"),   # a folder outside it
    (lambda p, out: os.mkfifo(p), ".git/objects/x", "a FIFO"),               # hidden ones too
    (lambda p, out: socket.socket(socket.AF_UNIX).bind(str(p)), "sub/s.sock", "a socket"),
])
def test_only_regular_files_and_folders_are_read(tmp_path, make, name, what):
    """Any other entry of a solution's folder is a load error that names it and what was expected, raised before
    anything reads it: a FIFO hung the judge's read, a link to /dev/zero read without end, a link elsewhere reaches
    outside the folder. Built here: git stores no FIFO."""
    outside = write(tmp_path / "secret.txt", "outside the solution\n")
    folder = tmp_path / "x"
    write(folder / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    make(folder / name, str(outside))
    _stop_after(10)
    try:
        with pytest.raises(loader.SolutionError, match=f"x/{name}: {what}, expected a regular file"):
            loader.describe(str(folder))
    finally:
        signal.alarm(0)


def test_a_solution_file_that_is_not_a_regular_file_is_refused(tmp_path):
    """A one-file solution given as a link or a FIFO, and a folder's solution.yml that is one, are refused unread."""
    real = write(tmp_path / "real.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    os.symlink(real, tmp_path / "link.py")
    os.mkfifo(tmp_path / "fifo.py")
    write(tmp_path / "x" / "solution.py", real.read_text())
    os.mkfifo(tmp_path / "x" / "solution.yml")
    _stop_after(10)
    try:
        for bad, what in (("link.py", "a link"), ("fifo.py", "a FIFO"), ("x/solution.yml", "a FIFO")):
            with pytest.raises(loader.SolutionError, match=f"{bad}: {what}, expected a regular file"):
                loader.describe(str(tmp_path / bad.split("/")[0]))
    finally:
        signal.alarm(0)
    with pytest.raises(tree.NotRegular, match="a FIFO"):     # the read itself checks too (an entry swapped since)
        tree.read(str(tmp_path / "fifo.py"))
    with pytest.raises(tree.NotRegular, match="a link"):
        tree.read(str(tmp_path / "link.py"))


def test_a_folder_past_the_caps_is_a_load_error(tmp_path, monkeypatch):
    """Folders nested past DEPTH_CAP, more than ENTRIES_CAP entries or more than TOTAL_CAP bytes: a load error saying
    which cap, never a crash (a recursive walk, a path past PATH_MAX) or a read without bound. A file past the audit's
    BIG_FILE is data: hashed whole."""
    folder = tmp_path / "x"
    write(folder / "solution.py", "def run(z, weights, rank, world, pg, out):\n    pass\n")
    assert loader.describe(str(folder))
    deep = folder / os.path.join(*["d"] * (tree.DEPTH_CAP + 1))
    deep.mkdir(parents=True)
    with pytest.raises(loader.SolutionError, match=f"folders nested more than {tree.DEPTH_CAP} deep"):
        loader.describe(str(folder))
    shutil.rmtree(folder / "d")
    for k in range(30):
        write(folder / "many" / f"{k}.txt", "")
    monkeypatch.setattr(tree, "ENTRIES_CAP", 20)
    with pytest.raises(loader.SolutionError, match="more than 20 files and folders"):
        loader.describe(str(folder))
    monkeypatch.setattr(tree, "ENTRIES_CAP", 1000)
    (folder / "big.bin").write_bytes(b"x" * (tree.BIG_FILE + 1))     # data past the audit's reach: hashed whole
    hashed = loader.describe(str(folder)).content_hash
    (folder / "big.bin").write_bytes(b"x" * tree.BIG_FILE + b"y")
    assert loader.describe(str(folder)).content_hash != hashed
    monkeypatch.setattr(tree, "TOTAL_CAP", 1 << 20)
    with pytest.raises(loader.SolutionError, match="more than 1 MiB of files"):
        loader.describe(str(folder))


@pytest.mark.slow
def test_each_twin_runs_its_own_build(tmp_path, monkeypatch):
    """tests/cheats/shares_a_build built and imported as a rank does (a process each): each twin imports the
    extension built from its own kern.inl. In one process the second twin's extension, of the same name, is refused,
    not taken for the first's."""
    monkeypatch.setenv("WAN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)      # the fixture's hash stays as committed
    for twin, flavour in zip(TWINS, ("as given", "int8 codes")):
        assert loader.build_in_child(twin, timeout=600) is None
        show = "import sys, loader; print(loader.load(sys.argv[1]).module.FLAVOUR)"
        p = subprocess.run([sys.executable, "-B", "-c", show, twin], capture_output=True, text=True, cwd=loader.ROOT,
                           timeout=300)
        assert p.stdout.strip() == flavour, p.stderr[-2000:]
    assert loader.load(TWINS[0]).module.FLAVOUR == "as given"
    with pytest.raises(loader.SolutionError, match="`extension` 'wan_twin_ext': a module of that name is imported"):
        loader.load(TWINS[1])
