"""What the judge lets a group's ranks put on its disk, and how it reads back the one file it takes from them.

A rank writes its log (stdout and stderr) and its scratch folder; both are the solution's. Caps none of an honest
solution reaches: a profiler trace of a long GPU call is a few hundred MB, Triton and CUDA caches tens of MB."""
import os
import shutil
import stat
import subprocess
import time

from harness.isolation import procs
from harness.load import tree

FILE_CAP = 2 << 30          # one file a rank writes (RLIMIT_FSIZE): its log, a trace, a scratch file
DISK_CAP = 8 << 30          # a group's scratch folders and logs together
BUILD_CAP = 2 << 30         # a solution's build folder (kept between runs), the build's scratch and logs together
ENTRIES_CAP = 200_000       # files and folders in them: the judge walks them about once a second
LOG_KEEP = 1 << 20          # what the judge keeps of a closed group's log (its tail)
TRACE_NAME = "profile-trace.json"   # where a rank's trace must be, in its own scratch folder
# The traces bench keeps of one solution's profiled calls (every rank of every workload), together: the baseline's
# whole set on GPUs is about 1.5 GiB (f121x2 45 MB a rank); 36 traces of 2 GiB would be 72 GiB.
TRACES_CAP = 8 << 30
# What a group's processes hold of pools the kernel keeps for the whole host, every user's (fs.file-max's open files,
# tcp_mem's socket buffers): open files and file mappings (a mapping holds its file without a descriptor), and
# sockets among the open files. Counted with the files in no folder; an honest rank holds a few thousand.
HELD_CAP = 200_000
SOCKETS_CAP = 4_096


class Refused(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


def gib(n):
    return f"{n / (1 << 30):.3g} GiB"


class Count:
    """A walk of the files under `paths` that counts the disk they take and their number, in steps: the judge walks
    a group's scratch while it waits for a `done`, and a walk of many files at once would hold it up (its clock then
    stops late). Symbolic links are not followed."""

    def __init__(self, paths, cap=DISK_CAP, entries=ENTRIES_CAP, holders=(), devices=()):
        """holders: the pids whose open and mapped files in no folder (O_TMPFILE, unlinked while open) count too,
        where they lie on the filesystems of `paths` or `devices` (folders not walked: /dev/shm): such a file takes
        disk that no walk of the folders finds."""
        self.todo, self.it, self.cap, self.entries = list(paths), None, cap, entries
        self.used, self.seen = 0, len(self.todo)
        self.devs = set()
        for path in [*paths, *devices]:
            try:
                self.devs.add(os.stat(path).st_dev)
            except OSError:
                pass
        self.held = [(pid, kind) for pid in holders for kind in ("fd", "map_files")]
        self.held_it, self.held_fds, self.counted = None, False, set()
        self.files = self.sockets = 0

    def step(self, n):
        """Walk up to `n` more entries: (done, the reason when the files are over a cap or hide from the judge)."""
        while n > 0:
            n -= 1
            if self.it is not None:
                try:
                    entry = next(self.it)
                except StopIteration:
                    self.it.close()
                    self.it = None
                    continue
                except OSError as e:
                    return True, f"made a folder the judge cannot list ({e})"
                self.seen += 1
                if self.seen > self.entries:
                    return True, f"made more than {self.entries} files in their scratch folders"
                self.todo.append(entry.path)
                continue
            if not self.todo:
                if self._held_step():
                    continue
                return True, self._over()
            path = self.todo.pop()
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            except OSError as e:
                return True, f"made a file the judge cannot inspect ({e})"
            self.used += st.st_blocks * 512      # the disk a file takes: a sparse file's holes take none
            if self._over():
                return True, self._over()
            if stat.S_ISDIR(st.st_mode):
                try:
                    self.it = os.scandir(path)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    return True, f"made a folder the judge cannot list ({e})"
        return False, None

    def _over(self):
        if self.used > self.cap:
            return f"wrote more than {gib(self.cap)} to their scratch folders and logs (files in no folder too)"
        if self.files > HELD_CAP:
            return f"held more than {HELD_CAP} open or mapped files (fs.file-max is one count for the whole host)"
        if self.sockets > SOCKETS_CAP:
            return f"held more than {SOCKETS_CAP} sockets (tcp_mem is one pool for the whole host)"
        return None

    def _held_step(self):
        """One entry of the holders' open or mapped files: True while there are more to look at."""
        while self.held_it is None:
            if not self.held:
                return False
            pid, kind = self.held.pop()
            # Through a live thread, found when it is read: a process whose first thread ended shows none of its own
            # at /proc/PID (procs.live_view), and the thread found may end before its folder is read: another then.
            for _ in range(8):
                view = procs.live_view(pid)
                if view is None:
                    break
                try:
                    self.held_it = os.scandir(f"{view}/{kind}")
                    self.held_fds = kind == "fd"
                    break
                except FileNotFoundError:        # that thread ended meanwhile
                    continue
                except OSError:                  # no map_files here
                    break
        try:
            entry = next(self.held_it)
        except (StopIteration, OSError):
            self.held_it.close()
            self.held_it = None
            return True
        self.files += 1
        try:
            st = os.stat(entry.path)             # follows the link to the open file, a deleted one too
        except OSError:
            return True
        self.sockets += self.held_fds and stat.S_ISSOCK(st.st_mode)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and st.st_dev in self.devs and \
                (st.st_dev, st.st_ino) not in self.counted:
            self.counted.add((st.st_dev, st.st_ino))
            self.used += st.st_blocks * 512
        return True

    def close(self):
        if self.it is not None:
            self.it.close()
            self.it = None
        if self.held_it is not None:
            self.held_it.close()
            self.held_it = None


class Watch:
    """A group's count of its disk while the judge waits for lines: about once a second a Count, walked STEP entries
    at a time between short waits (wait() is the judge's select timeout), so that no step holds up its reading of a
    `done` for more than about a millisecond (a walk of 190,000 files at once took 0.45 s and stopped the clock
    late)."""
    STEP, WAIT_S, EVERY_S = 500, 0.005, 1.0

    def __init__(self):
        self.count, self.at = None, 0.0

    def wait(self):
        return self.WAIT_S if self.count is not None else min(0.5, max(self.WAIT_S, self.at - time.monotonic()))

    def check(self, paths, now=False, holders=lambda: (), devices=()):
        """The reason the files under paths() (and the unnamed files of the pids holders() returns, on their
        filesystems or those of `devices`; both asked once per count) are over a cap, or None: `now` a whole count,
        else one step (a new count when one is due)."""
        if now:
            self._end()
            return over(paths(), holders=holders(), devices=devices)
        if self.count is None:
            if time.monotonic() < self.at:
                return None
            self.count = Count(paths(), holders=holders(), devices=devices)
        done, why = self.count.step(self.STEP)
        if done:
            self._end()
        return why

    def _end(self):
        if self.count is not None:
            self.count.close()
        self.count, self.at = None, time.monotonic() + self.EVERY_S


def over(paths, cap=DISK_CAP, entries=ENTRIES_CAP, holders=(), devices=()):
    """A reason when the files under `paths` (and the files in no folder that `holders` hold there or on the
    filesystems of `devices`) take more than
    `cap` bytes of disk or number more than `entries`, or hide from the judge (a folder it cannot list); None
    otherwise. Symbolic links are not followed."""
    count = Count(paths, cap, entries, holders, devices)
    try:
        while True:
            done, why = count.step(1 << 20)
            if done:
                return why
    finally:
        count.close()


def copy_trace(src, dst, cap=FILE_CAP, kept=0):
    """Copy a rank's trace from `src` (in its scratch) to `dst`: a regular file there itself (no link followed, no
    FIFO or device opened to block or stream), at most `cap` bytes, and at most what is left of TRACES_CAP after the
    `kept` bytes of the solution's earlier traces. Returns its size; Refused names the solution's failure."""
    if TRACES_CAP - kept < cap:
        cap, why = max(0, TRACES_CAP - kept), f" (what is left of the {gib(TRACES_CAP)} a solution's traces may take)"
    else:
        why = ""
    try:
        fd, st = tree.open_regular(src)
    except FileNotFoundError:
        raise Refused("runtime error", f"no trace at {os.path.basename(src)} in the rank's scratch folder")
    except (tree.NotRegular, OSError) as e:
        why = e.strerror if isinstance(e, OSError) else e
        raise Refused("tampering", f"the trace in the rank's scratch folder is not a regular file ({why})")
    try:
        if st.st_size > cap:
            raise Refused("runtime error", f"the trace is larger than {gib(cap)}{why} ({gib(st.st_size)})")
        size = 0
        with open(dst, "wb") as out:
            for chunk in tree.chunks(fd, cap, 1 << 24):     # a file still growing is cut off past cap and refused
                out.write(chunk)
                size += len(chunk)
        if size > cap:
            os.unlink(dst)
            raise Refused("runtime error", f"the trace is larger than {gib(cap)}{why}")
        return size
    finally:
        os.close(fd)


def tail(path, size=64 << 10):
    """The last `size` bytes of a file as text (a log may be gigabytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def trim(path, keep=LOG_KEEP):
    """Cut a closed group's log to its last `keep` bytes: what a flood left must not stay for the rest of the run."""
    try:
        if os.lstat(path).st_size <= keep:
            return
        with open(path, "rb") as f:
            f.seek(-keep, os.SEEK_END)
            kept = f.read(keep)
        with open(path, "wb") as f:
            f.write(b"[... the log's start was cut ...]\n" + kept)
    except OSError:
        pass


def remove(path):
    """Delete `path` and everything under it, however deep: a rank can nest folders past Python's recursion limit
    (shutil.rmtree recurses) and past PATH_MAX. coreutils' rm walks by descriptors; a link is removed, never
    followed. Raises nothing: what cannot be removed stays (the judge's own cleanup must not fail)."""
    rm = shutil.which("rm", path="/usr/bin:/bin")
    try:
        if rm:
            subprocess.run([rm, "-rf", "--one-file-system", "--", path], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, env={})
        if not os.path.lexists(path):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except (OSError, subprocess.SubprocessError, RecursionError):
        pass
