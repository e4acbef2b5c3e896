"""Cheat (stall the judge through --profile): the trace's place in its scratch folder is a FIFO that nothing writes; a
judge that opened it to read would wait for ever."""
import os

import torch.profiler

import reference


def _export(self, path):
    os.mkfifo(path)


torch.profiler.profile.export_chrome_trace = _export


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
