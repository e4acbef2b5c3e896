"""A solution's folder: the one walk of it (loader's content hash, the audit's list of files) and the one read of a
file in it.

A solution holds regular files and folders only. Any other entry (a link of any kind, a FIFO, a socket, a device) is
named by the walk and never followed or read: a FIFO blocks its reader for ever, a link to /dev/zero never ends a
read, and a link elsewhere reaches outside the folder. A read opens without following a link and without blocking,
refuses what is not a regular file, and reads at most its cap. The walk stops past caps of depth, entries and bytes,
which a solution's sources are far below."""
import dataclasses
import errno
import hashlib
import os
import stat

BIG_FILE = 2 * 1024 * 1024      # bytes of one file: a longer source is data, not code, and is read no further
TOTAL_CAP = 64 * 1024 * 1024    # bytes of a solution's files together
ENTRIES_CAP = 10_000            # files and folders of a solution, hidden ones included
DEPTH_CAP = 16                  # folders within one another

_KINDS = {stat.S_IFLNK: "a link", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}


class NotRegular(Exception):
    """What was to be read is not a regular file; the message says what it is."""


class Refused(Exception):
    """A solution's folder holds what a solution may not (loader.describe's SolutionError): the message names the file
    and what was expected."""


def kind(mode):
    """What an entry of this st_mode is, in words."""
    return _KINDS.get(stat.S_IFMT(mode), "a regular file" if stat.S_ISREG(mode) else "an unknown kind of file")


@dataclasses.dataclass
class Listing:
    files: list                 # every regular file, absolute paths, sorted
    folders: list               # every folder below the top, absolute paths, sorted
    odd: list                   # (path, what it is) of every other entry: never followed or read
    unlisted: list              # (path, why) of entries that could not be listed
    over: str = None            # why the walk stopped before its end (a cap), or None
    size: int = 0               # bytes of the files listed


def walk(top):
    """Every entry below the folder `top` by its own kind (lstat: a link is a link, whatever it names), hidden ones
    included, until a cap is passed."""
    out, entries, stack = Listing([], [], [], []), 0, [(top, 1)]
    while stack and out.over is None:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    entries += 1
                    if entries > ENTRIES_CAP:
                        out.over = f"more than {ENTRIES_CAP} files and folders"
                        break
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError as e:
                        out.unlisted.append((entry.path, e.strerror or str(e)))
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        if depth >= DEPTH_CAP:
                            out.over = f"folders nested more than {DEPTH_CAP} deep ({entry.path})"
                            break
                        out.folders.append(entry.path)
                        stack.append((entry.path, depth + 1))
                    elif stat.S_ISREG(st.st_mode):
                        out.files.append(entry.path)
                        out.size += st.st_size
                        if out.size > TOTAL_CAP:
                            out.over = f"more than {TOTAL_CAP >> 20} MiB of files"
                            break
                    else:
                        out.odd.append((entry.path, kind(st.st_mode)))
        except OSError as e:
            out.unlisted.append((folder, e.strerror or str(e)))
    out.files.sort()
    out.folders.sort()
    out.odd.sort()
    return out


def open_regular(path):
    """(a read-only descriptor of the regular file `path`, its stat): opened without following a link or blocking (a
    FIFO) and checked before any read: NotRegular for anything but a regular file, OSError where it cannot be
    opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:      # O_NOFOLLOW's answer for a link
            raise NotRegular("a link, expected a regular file") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(f"{kind(st.st_mode)}, expected a regular file")
    return fd, st


def chunks(fd, cap, size=1 << 20):
    """The bytes of descriptor `fd` in pieces of at most `size`, at most cap + 1 of them in all (more than cap: the
    caller says so; a file still growing is cut off there)."""
    left = cap + 1
    while left > 0:
        part = os.read(fd, min(left, size))
        if not part:
            return
        left -= len(part)
        yield part


def read(path, cap=BIG_FILE):
    """At most cap + 1 bytes of the regular file `path` (more than cap: the caller says so); open_regular's errors."""
    fd, _ = open_regular(path)
    try:
        return b"".join(chunks(fd, cap))
    finally:
        os.close(fd)


def solution_files(path):
    """The listing of the solution at `path`: its folder's, or the one .py file. Refused, before anything is read,
    for an entry that is neither a regular file nor a folder, one that cannot be listed, and past the caps."""
    if not os.path.isdir(path):
        try:
            mode = os.lstat(path).st_mode
        except OSError as e:
            raise Refused(f"{path}: cannot be read: {e.strerror}") from e
        if not stat.S_ISREG(mode):
            raise Refused(f"{path}: {kind(mode)}, expected a regular file")
        return Listing(files=[path], folders=[], odd=[], unlisted=[])
    found = walk(path)
    for f, what in found.odd:
        raise Refused(f"{f}: {what}, expected a regular file or a folder (a solution holds nothing else)")
    for f, why in found.unlisted:
        raise Refused(f"{f}: cannot be listed: {why}")
    if found.over:
        raise Refused(f"{path}: {found.over}: a solution holds at most {ENTRIES_CAP} files and folders, {DEPTH_CAP} "
                      f"deep, {TOTAL_CAP >> 20} MiB together")
    return found


def read_whole(f, cap=BIG_FILE):
    """The bytes of a solution's file `f` (read), all of them or Refused."""
    try:
        data = read(f, cap)
    except NotRegular as e:
        raise Refused(f"{f}: {e}") from e
    except OSError as e:
        raise Refused(f"{f}: cannot be read: {e.strerror}") from e
    if len(data) > cap:
        raise Refused(f"{f}: more than {cap} bytes")
    return data


def content_hash(path, found):
    """The key of a solution's build folder and package: every folder and file of its listing `found`, by path and
    content. Every file, not its sources only: a build reads what its sources include, whatever its name."""
    h = hashlib.sha256()
    base = path if os.path.isdir(path) else os.path.dirname(path)
    for f in found.folders:
        h.update(b"d" + os.fsencode(os.path.relpath(f, base)) + b"\0")
    for f in found.files:
        data = read_whole(f, TOTAL_CAP)         # data too (the audit reads sources only to BIG_FILE)
        h.update(b"f" + os.fsencode(os.path.relpath(f, base)) + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()[:32]        # 128 bits: no two folders made to collide share a build
