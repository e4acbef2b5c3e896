"""Cheat (pre-window hook): a harness that makes z contiguous or detaches it before starting its clock would run
this hook, which decodes there; run() then only copies the answer. The hook goes in through type(weights[0])."""
import reference

_pending = {}


def prepare(weights, rank, world, pg):
    cls = type(weights[0])
    original = cls.contiguous

    def contiguous(self, *args, **kwargs):
        if self.dim() == 5 and self.shape[1] == weights[0].shape[0] and rank == 0:
            _pending["video"] = reference.decode_bf16(self, weights)
        return original(self, *args, **kwargs)
    cls.contiguous = contiguous
    return weights


def run(z, weights, rank, world, pg, out):
    if rank == 0:
        out.copy_(_pending.pop("video") if "video" in _pending else reference.decode_bf16(z, weights))
