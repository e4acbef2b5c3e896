"""The data folder's files: atomic writes, hashes, and the manifest that says how each file was made.

Every file is written under a temporary name in its own folder, fsynced, then renamed over the final name, so a
final name never holds a half-written file. manifest.json records per file its size, sha256 and recipe (what it
was made from: format version, geometry, seed or checkpoint hash, latents origin); a file whose size, hash and
recipe match is up to date, anything else is remade. A synthetic file's recipe holds the data set's seed, the secret
of its latents (data/make.py): manifest.json must stay in the data folder, which solutions cannot read.
"""
import hashlib
import json
import math
import os
import secrets
import shutil

import spec

# Bump when a file's content changes for the same recipe: every file is then remade. 2: synthetic streams are
# seeded by sha256, not CRC-32 (data/synth.py's stream_seed), so seed 0's weights and latents are other values.
FORMAT = 2
TMP_PREFIX = ".tmp-"


def _fsync_dir(folder):
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, write):
    """Call write(f) on a binary file at a temporary name beside `path`, fsync it, and rename it to `path`."""
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f"{TMP_PREFIX}{base}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any new file
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def save_torch(obj, path):
    import torch
    write_atomic(path, lambda f: torch.save(obj, f))


def save_json(obj, path):
    write_atomic(path, lambda f: f.write((json.dumps(obj, indent=1) + "\n").encode()))


def copy_file(src, path):
    def write(f):
        with open(src, "rb") as s:
            shutil.copyfileobj(s, f, 16 << 20)
    write_atomic(path, write)


def scratch(path, shape, dtype):
    """A new file of a video's size (zeros, sparse) for the decodes to write into through mapped(); the caller removes
    it. Its name should start with TMP_PREFIX, so that a make after an interrupted one removes it."""
    import torch
    with open(path, "wb") as f:
        f.truncate(math.prod(shape) * torch.empty((), dtype=dtype).element_size())
    return path


def mapped(path, shape, dtype):
    """A scratch file as a tensor, memory-mapped and shared: writes go to the file, which every process sees."""
    import torch
    return torch.from_file(path, shared=True, size=math.prod(shape), dtype=dtype).view(shape)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(16 << 20):
            h.update(block)
    return h.hexdigest()


def describe(path):
    """{"size", "sha256"} of a file."""
    return {"size": os.path.getsize(path), "sha256": sha256(path)}


def recipe(geometry, **parts):
    return {"format": FORMAT, "geometry": geometry.name, **parts}


class Manifest:
    """manifest.json of one data folder: {"format", "geometry", "files": {name: {"size", "sha256", "recipe"}}}, plus
    "from" (the checkpoint or latents file it was imported from) where there is one."""

    def __init__(self, root, geometry):
        self.root, self.geometry = root, geometry
        self.path = os.path.join(root, spec.MANIFEST_FILE)
        self.files, self.problem = {}, None
        try:
            with open(self.path) as f:
                files = json.load(f)["files"]
            if isinstance(files, dict):
                self.files = files
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            self.problem = f"{self.path} is unreadable ({e}): every file will be remade"

    def recipe(self, name):
        return (self.files.get(name) or {}).get("recipe")

    def status(self, name, want):
        """None when `name` is up to date for recipe `want` (its size, hash and recipe match), else why not."""
        entry, path = self.files.get(name), os.path.join(self.root, name)
        if not os.path.exists(path):
            return "missing"
        if entry is None:
            return "not in the manifest"
        if entry.get("recipe") != want:
            return "made from another recipe"
        if os.path.getsize(path) != entry.get("size") or sha256(path) != entry.get("sha256"):
            return "corrupt: its size or sha256 differs from the manifest's"
        return None

    def present(self, name):
        """The quick check: the file exists with the size that the manifest records."""
        entry, path = self.files.get(name), os.path.join(self.root, name)
        return entry is not None and os.path.exists(path) and os.path.getsize(path) == entry.get("size")

    def record(self, name, want, described=None, **extra):
        """Note that `name` was just made from recipe `want` (hashing it unless `described` is given), and save."""
        described = described or describe(os.path.join(self.root, name))
        self.files[name] = {**described, "recipe": want, **extra}
        self.save()

    def forget(self, name):
        if self.files.pop(name, None) is not None:
            self.save()

    def save(self):
        save_json({"format": FORMAT, "geometry": self.geometry.name, "files": dict(sorted(self.files.items()))},
                  self.path)
