"""harness/judge/buffers.py: what a rank may do with the judge's lent buffers before its lock."""
import os
import pickle
import subprocess
import sys

import torch

from harness.judge import buffers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _OnGpu:
    """Stands for a CUDA tensor: lend() only asks its device type and numel and hands it to cuda_ipc.handle."""
    device = torch.device("cuda", 0)

    def numel(self):
        return 2


def _lent_blob(monkeypatch, tmp_path):
    from harness.judge import cuda_ipc
    # What the driver gives back: 64 bytes naming the allocation (no file of /dev/shm).
    monkeypatch.setattr(cuda_ipc, "handle", lambda t: bytes(range(64)))
    monkeypatch.setattr(cuda_ipc, "open_handle",
                        lambda blob, numel, device: torch.full((numel,), float(blob[7]), dtype=torch.bfloat16))
    lent = object.__new__(buffers.Buffers)
    lent.shapes, lent.fds = [(2,)], {"z0": buffers.sealed("z0", 8)}
    lent.geometry = type("G", (), {"name": "tiny"})()
    lent.weights = [_OnGpu()]
    lent.z = [torch.from_file(f"/proc/self/fd/{lent.fds['z0']}", shared=True, size=4, dtype=torch.bfloat16)]
    lent.out = _OnGpu()
    return lent.lend(0), lent.fds["z0"]


def test_premap_does_not_import_torch_for_cuda_handles(monkeypatch, tmp_path):
    # A rank premaps before its Landlock lock, which refuses once torch's threads run (ABI < 8): the CUDA
    # handles stay bytes until attach(), after the lock.
    blob, fd = _lent_blob(monkeypatch, tmp_path)
    code = ("import sys, pickle\nfrom harness.judge import buffers\n"
            "maps = buffers.premap(sys.stdin.buffer.read())\n"
            "print(sorted(maps), 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, pass_fds=(fd,))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().split() == ["['z']", "False"]


def test_attach_opens_the_driver_handles(monkeypatch, tmp_path):
    """A GPU buffer is lent as its driver handle and size alone: nothing names a file a rank could open."""
    blob, _ = _lent_blob(monkeypatch, tmp_path)
    weights, z, out = buffers.attach(blob, torch.device("cpu"), buffers.premap(blob))
    assert weights[0].tolist() == [7.0, 7.0] and out.tolist() == [7.0, 7.0]
    assert z.numel() == 4 and pickle.loads(blob)["out"] == ("cuda", bytes(range(64)), 2)


def test_a_driver_handle_is_64_bytes_both_ways():
    from harness.judge import cuda_ipc
    h = cuda_ipc._Handle.from_buffer_copy(bytes(range(64)))
    assert bytes(h.reserved) == bytes(range(64))       # NULs and all: no C-string truncation
    try:
        cuda_ipc.open_handle(b"\0" * 63, 1, torch.device("cpu"))
        raise AssertionError("a short handle was opened")
    except RuntimeError as e:
        assert "64 bytes, not 63" in str(e)


def test_a_lent_memory_file_cannot_change_size(tmp_path):
    """A rank keeps a descriptor of each buffer it maps (Python's mmap keeps a copy): truncating one under the
    judge's mapping would kill the judge with SIGBUS. Sealed, it cannot shrink or grow, through any descriptor,
    and its seals cannot be undone; writes still reach the judge's mapping."""
    import fcntl
    fd = buffers.sealed("out", 4096)
    judge = torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=2048, dtype=torch.bfloat16)
    other = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
    try:
        for d in (fd, other):
            for size in (0, 8192):
                try:
                    os.ftruncate(d, size)
                    raise AssertionError(f"resized to {size}")
                except PermissionError:
                    pass
        try:
            fcntl.fcntl(other, fcntl.F_ADD_SEALS, 0)
            raise AssertionError("seals changed")
        except PermissionError:
            pass
        os.pwrite(other, b"\x80\x3f", 0)          # bf16 1.0
        assert judge[0].item() == 1.0 and os.fstat(fd).st_size == 4096
    finally:
        os.close(other)
        os.close(fd)
