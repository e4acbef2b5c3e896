"""loader.py: solutions by file or directory, relative imports, clear errors for missing or misspelt entries."""
import os

import pytest

import loader


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


@pytest.mark.parametrize("line, message", [
    ("name: /tmp/planted", "`name` '/tmp/planted': expected 1 to 64 letters"),
    ("name: ../../x", "`name` '../../x'"),
    ("name: '[/]'", r"`name` '\[/\]'"),
    ("name: .hidden", "`name` '.hidden'"),
    ("name: 3", "`name` 3"),
    ("extension: ../x\nsources: [a.cpp]", "`extension` '../x': expected a Python identifier"),
    ("extension: ext\nsources: [../../outside.cpp]", "source '../../outside.cpp' is not inside"),
    ("extension: ext\nsources: [/etc/passwd]", "source '/etc/passwd' is not inside"),
    ("cflags: -O3", "`cflags`: expected a list of strings"),
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
    broken = os.path.join(os.path.dirname(__file__), "broken", "build_error")
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
    from harness import disk
    monkeypatch.setenv("WAN_BUILD_DIR", str(tmp_path / "build"))
    cheat = os.path.join(os.path.dirname(__file__), "cheats", "fills_its_build")
    build = loader.build_dir(loader.describe(cheat))
    monkeypatch.setattr(disk, "BUILD_CAP", 64 << 20)
    assert loader.build_in_child(cheat, timeout=600) is None
    assert sum(f.startswith("fill-") for f in os.listdir(build)) == 1
    monkeypatch.setattr(disk, "BUILD_CAP", 5 << 20)      # the cached library's constructor runs again: 6 MiB more
    why = loader.build_in_child(cheat, timeout=600)
    assert why and "wrote more than" in why, why
    assert not os.path.exists(build)
