"""Cheat (fill the judge's disk through --profile): under the profiler its report names /dev/zero as the trace, and the
trace's place in its scratch folder is a symbolic link to /dev/zero; a judge that copied either would copy without
end."""
import os
import sys

import torch.profiler

import reference


def _export(self, path):
    os.symlink("/dev/zero", path)


torch.profiler.profile.export_chrome_trace = _export
_rank = sys.modules["harness.rank.worker"].Rank      # harness/rank/worker.py, the rank's process
_send = _rank.send


def _send_report(self, kind, **fields):
    if kind == "report":
        fields["trace"] = "/dev/zero"
    _send(self, kind, **fields)


_rank.send = _send_report


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
