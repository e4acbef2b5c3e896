"""harness/isolation/users.py: a uid of its own for every group of ranks, taken by the rank before its lock; what the
change leaves it (CAP_DAC_READ_SEARCH alone, kept by its children) and what it takes (another user's processes, files
and per-user counts)."""
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from harness.isolation import disk, users

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
can = pytest.mark.skipif(users.Users().why_not is not None, reason="the judge cannot make users here")


def _passwd_ids():
    with open("/etc/passwd") as f:
        return {int(line.split(":")[2]) for line in f if line.count(":") >= 3}


@can
def test_each_group_gets_a_uid_no_account_or_process_has():
    u = users.Users()
    taken = [u.take() for _ in range(50)]
    assert len(set(taken)) == 50 and min(taken) >= users.LOWEST and max(taken) < 1 << 31
    assert not set(taken) & (_passwd_ids() | {os.getuid()})
    u.give_back(taken[0])
    assert taken[0] not in u.taken and set(taken[1:]) <= u.taken


def test_no_users_where_the_judge_says_so(monkeypatch):
    monkeypatch.setenv("WAN_ASSUME_NO_USERS", "1")
    u = users.Users()
    assert u.why_not and u.take() is None


@can
def test_a_rank_under_its_user_keeps_read_and_search_alone(tmp_path):
    """After become(): the ids are the group's, CAP_DAC_READ_SEARCH is its only capability (and its children's,
    through the ambient set), so it reads a file in a folder only root may enter, but writes no file of root's,
    changes no mode of root's and reaches no process of root's (priority, signals, limits)."""
    secret = tmp_path / "root_only"
    secret.mkdir(mode=0o700)
    (secret / "f").write_text("x")
    (secret / "f").chmod(0o600)
    uid = users.Users().take()
    code = textwrap.dedent(f"""
        import os, resource, signal, subprocess, sys
        from harness.isolation import users
        users.become({uid}, [])
        def caps(pid="self"):
            s = dict(l.split(":", 1) for l in open(f"/proc/{{pid}}/status").read().splitlines() if ":" in l)
            return [int(s[k].strip(), 16) for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")]
        def refused(fn):
            try:
                fn()
                return False
            except PermissionError:
                return True
        child = subprocess.run([sys.executable, "-c", "print(open({str(secret / 'f')!r}).read())"],
                               capture_output=True, text=True)
        print(os.getresuid(), os.getresgid(), os.getgroups(), caps(), open({str(secret / 'f')!r}).read(),
              child.stdout.strip(), refused(lambda: open({str(secret / 'f')!r}, "a")),
              refused(lambda: os.chmod({str(secret)!r}, 0o777)),
              refused(lambda: os.setpriority(os.PRIO_PROCESS, os.getppid(), 0)),
              refused(lambda: os.kill(os.getppid(), 0)),
              refused(lambda: resource.prlimit(os.getppid(), resource.RLIMIT_CORE)))
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    cap = 1 << users.CAP_DAC_READ_SEARCH
    assert p.stdout.split("\n")[0] == (f"({uid}, {uid}, {uid}) ({uid}, {uid}, {uid}) [] [{cap}, {cap}, {cap}, {cap}, "
                                       f"{cap}] x x True True True True True"), p.stdout


@can
def test_a_groups_names_are_told_by_their_owner(tmp_path):
    uid = users.Users().take()
    for name in ("mine", "mine_dir", "theirs"):
        (tmp_path / name).mkdir() if name.endswith("dir") else (tmp_path / name).write_text("")
    os.chown(tmp_path / "mine", uid, uid)
    os.lchown(tmp_path / "mine_dir", uid, uid)
    assert sorted(users.owned(str(tmp_path), uid)) == [str(tmp_path / "mine"), str(tmp_path / "mine_dir")]
    assert users.owned(str(tmp_path / "absent"), uid) == []


def test_device_groups_are_those_that_open_a_node_others_cannot(tmp_path):
    shared, grouped, closed = (tmp_path / n for n in ("shared", "grouped", "closed"))
    for path, mode in ((shared, 0o666), (grouped, 0o660), (closed, 0o600)):
        path.write_text("")
        path.chmod(mode)
    gid = os.stat(grouped).st_gid
    assert users.device_groups([str(shared), str(closed)]) == []
    assert users.device_groups([str(shared), str(grouped), str(tmp_path / "absent")]) == [gid]


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_files_held_open_in_no_folder_count_on_the_devices_named(tmp_path):
    """A file unlinked while a holder keeps it open, on a filesystem none of the walked paths is on but `devices`
    names (/dev/shm, where a group on GPUs writes): it counts against the cap only then."""
    walked = tmp_path / "scratch"
    walked.mkdir()
    other = tempfile.mkdtemp(dir="/dev/shm")
    if os.stat(walked).st_dev == os.stat(other).st_dev:
        disk.remove(other)
        pytest.skip("/dev/shm is on the same filesystem as the test's folder")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys
        fd = os.open({os.path.join(other, 'big')!r}, os.O_CREAT | os.O_RDWR)
        os.write(fd, b"x" * (4 << 20))
        os.unlink({os.path.join(other, 'big')!r})
        print("ready", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        assert disk.over([str(walked)], cap=1 << 20, holders=[holder.pid]) is None
        assert "wrote more than" in disk.over([str(walked)], cap=1 << 20, holders=[holder.pid], devices=["/dev/shm"])
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        disk.remove(other)
