"""harness/isolation/disk.py: the count of a group's disk (bytes and files, files in no folder, in bounded steps),
the removal of a tree no path can name, and --profile's copy of a rank's trace (a regular file only, capped).
Through the whole pipeline: tests/trust/test_trust.py's cheats on the disk."""
import os
import subprocess
import sys
import tempfile

import pytest


def test_a_trace_is_copied_only_from_a_regular_file_and_capped(tmp_path):
    """A trace alone at most `cap`, a solution's traces together at most disk.TRACES_CAP; a regular file only."""
    from harness.isolation import disk
    src, dst = tmp_path / "trace.json", tmp_path / "copy.json"
    src.write_bytes(b"x" * 5000)
    assert disk.copy_trace(str(src), str(dst)) == 5000 and dst.read_bytes() == src.read_bytes()
    # The solution's traces together: 5000 bytes fit beside TRACES_CAP - 5000 kept, not beside one byte more.
    assert disk.copy_trace(str(src), str(dst), kept=disk.TRACES_CAP - 5000) == 5000
    with pytest.raises(disk.Refused, match="what is left of the 8 GiB a solution's traces may take"):
        disk.copy_trace(str(src), str(tmp_path / "over.json"), kept=disk.TRACES_CAP - 4999)
    assert not (tmp_path / "over.json").exists()
    with pytest.raises(disk.Refused, match="larger than") as e:
        disk.copy_trace(str(src), str(tmp_path / "big.json"), cap=4096)
    assert e.value.status == "runtime error" and not (tmp_path / "big.json").exists()
    link, fifo = tmp_path / "link.json", tmp_path / "fifo.json"
    link.symlink_to("/dev/zero")
    os.mkfifo(fifo)                 # nothing writes it: opened to read without O_NONBLOCK, it would wait for ever
    for bad in (link, fifo):
        with pytest.raises(disk.Refused, match="not a regular file") as e:
            disk.copy_trace(str(bad), str(dst))
        assert e.value.status == "tampering"
    with pytest.raises(disk.Refused, match="no trace") as e:
        disk.copy_trace(str(tmp_path / "missing.json"), str(dst))
    assert e.value.status == "runtime error"


def test_the_disk_count_caps_bytes_and_files_without_following_links(tmp_path):
    from harness.isolation import disk
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * (1 << 20))
    (tmp_path / "root").symlink_to("/")
    assert disk.over([str(tmp_path)], cap=2 << 20) is None
    assert "wrote more than" in disk.over([str(tmp_path)], cap=1 << 19)
    assert "more than 2 files" in disk.over([str(tmp_path)], entries=2)
    log = tmp_path / "log"
    log.write_bytes(b"a\n" * (1 << 20))
    disk.trim(str(log), keep=10)
    assert log.read_bytes().endswith(b"a\na\na\na\na\n") and log.stat().st_size < 100


@pytest.mark.parametrize("how", ["O_TMPFILE", "unlinked and mapped"])
def test_the_disk_count_sees_files_in_no_folder(tmp_path, how):
    """A file opened with O_TMPFILE (or unlinked while mapped) and grown with fallocate's KEEP_SIZE is in no folder
    and of size 0: the count finds it through its holder's open or mapped files, on the counted filesystem only."""
    from harness.isolation import disk
    code = f"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
if {how!r} == "O_TMPFILE":
    fd = os.open({str(tmp_path)!r}, os.O_TMPFILE | os.O_RDWR, 0o600)
    assert libc.fallocate(fd, 1, 0, 3 << 20) == 0           # FALLOC_FL_KEEP_SIZE
else:
    path = os.path.join({str(tmp_path)!r}, "held")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    assert libc.fallocate(fd, 0, 0, 3 << 20) == 0
    m = mmap.mmap(fd, 3 << 20)
    os.close(fd)
    os.unlink(path)
print("held", flush=True)
sys.stdin.read()
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        assert os.listdir(tmp_path) == []
        assert disk.over([str(tmp_path)], cap=2 << 20) is None                          # no walk finds it
        assert "files in no folder too" in disk.over([str(tmp_path)], cap=2 << 20, holders=[child.pid])
        other = tempfile.mkdtemp(dir="/dev/shm")
        try:
            assert disk.over([other], cap=2 << 20, holders=[child.pid]) is None        # another filesystem
        finally:
            os.rmdir(other)
    finally:
        child.communicate("")
    assert disk.over([str(tmp_path)], cap=2 << 20, holders=[child.pid]) is None        # gone with its holder


def test_a_tree_deeper_than_recursion_and_path_max_is_removed_and_refused(tmp_path):
    """A rank can nest folders past Python's recursion limit (shutil.rmtree raises RecursionError) and past PATH_MAX
    (a path no call can name): the judge's count refuses such a tree and its removal still takes all of it; the
    removal follows no link out of the tree."""
    from harness.isolation import disk
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    root = tmp_path / "scratch"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(2500):           # 5000 bytes of path: past PATH_MAX (4096)
            os.mkdir("d", dir_fd=fd)
            os.symlink(str(outside), "l", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    assert "cannot inspect" in disk.over([str(root)])
    disk.remove(str(root))
    assert not root.exists() and (outside / "keep").read_text() == "x"
    disk.remove(str(root))              # what is gone already: nothing raised


def test_the_disk_count_walks_in_bounded_steps(tmp_path):
    """The judge counts a group's files while it waits for a `done`: a step walks at most its share of entries
    (disk.Watch: a walk of 190,000 files at once held the judge up 0.45 s), and the steps together
    reach the same verdict as one walk."""
    from harness.isolation import disk
    for d in range(6):
        (tmp_path / f"d{d}").mkdir()
        for i in range(500):
            (tmp_path / f"d{d}" / f"{i}").write_bytes(b"x")
    for entries, expect in ((10_000, None), (2_000, "more than 2000 files")):
        count, steps = disk.Count([str(tmp_path)], entries=entries), 0
        done = False
        while not done:
            done, why = count.step(500)
            steps += 1
        assert steps >= 2000 // 500 and (why == expect or expect in why), (steps, why)
        assert disk.over([str(tmp_path)], entries=entries) == why
