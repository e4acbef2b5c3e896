"""Cheat (post-window hook): returns at once and decodes when the harness first reads out after its clock stopped
(Tensor.float, .cpu, .to, indexing), through hooks installed on type(out)."""
import reference

_todo = []


def _finish():
    while _todo:
        z, weights, out = _todo.pop()
        out.copy_(reference.decode_bf16(z, weights))


def _wrap(cls, name):
    original = getattr(cls, name)

    def hooked(self, *args, **kwargs):
        _finish()
        return original(self, *args, **kwargs)
    setattr(cls, name, hooked)


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    if not _todo:
        cls = type(out)
        for name in ("float", "cpu", "to", "__getitem__", "clone", "view"):
            if getattr(cls, name).__name__ != "hooked":
                _wrap(cls, name)
    _todo.append((z, weights, out))
