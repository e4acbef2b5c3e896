"""What the judge accepts from a rank's lines (harness/rank/worker.py writes them; the solution can write any): their
size, their form, the statuses a rank may give itself, and the type and range of every field the judge uses. Everything
in them is plain text (console.plain) from here on."""
from __future__ import annotations

import json

from harness.report.console import plain

MAX_LINE = 1 << 20         # a protocol line is a few hundred bytes; a report with problems, a few KiB
MAX_DEPTH = 8             # lists and objects within one another in a line
MAX_DONE = 256             # `done {"call": N, "nonce": "..."}`: about 50
# What a rank may say of itself: failures only (its own harness code reports these; a solution can forge them, and
# then fails).
RANK_FAILURES = ("runtime error", "load error", "tampering", "incorrect", "harness error")
REPORTED = ("tampering", "incorrect")      # what a rank's report may find after a call (guards, census, out)
# What a rank's `ready` may hold, by type (harness/rank/worker.py).
READY = {"rank": int, "isolation": dict, "ipc_namespace": bool, "net_namespace": bool, "seccomp": (str, type(None)), "uid": int,
         "device": str, "torch": str, "gpu": str, "cudnn": (int, type(None)), "nccl": str, "triton": (str, type(None)),
         "prepare_s": (int, float)}


class GroupFailed(Exception):
    def __init__(self, status: str, message: str, rank: int | None = None):
        super().__init__(message)
        self.status, self.message, self.rank = status, message, rank


def failure(rank: int, fields: dict) -> GroupFailed:
    """The GroupFailed of a rank's `error` line: a failure only (a rank cannot pass itself), and a harness error it
    reports is its own runtime error (its process is the solution's)."""
    where = f" in {fields['phase']}" if isinstance(fields.get("phase"), str) else ""
    status = fields.get("status")
    if status not in RANK_FAILURES:
        return GroupFailed("tampering", f"rank {rank} reported the status {str(status)[:40]!r}", rank)
    if status == "harness error":
        status, where = "runtime error", f" (it reported a harness error{where})"
    return GroupFailed(status, f"rank {rank}{where}: {str(fields.get('error'))[:4000]}", rank)


def parse(line: bytes, rank: int) -> tuple[str, dict]:
    """(kind, fields) of a rank's line, every string in it plain; a `done` past MAX_DONE bytes or a malformed line
    is tampering."""
    if line.startswith(b"done ") and len(line) > MAX_DONE:
        raise GroupFailed("tampering", f"rank {rank} sent a `done` of {len(line)} bytes (at most {MAX_DONE})", rank)
    kind, _, rest = bytes(line).decode("utf-8", "replace").partition(" ")
    try:
        fields = json.loads(rest)
        if not isinstance(fields, dict):
            raise ValueError("not an object")
        fields = _plain(fields)
    except Exception:   # ValueError; a nested document raises RecursionError (json's) or DeepLine (_plain's)
        raise GroupFailed("tampering", f"rank {rank} sent a malformed line: {bytes(line[:200])!r}", rank)
    return plain(kind), fields


def done(rank: int, f: dict, nonce: str) -> None:
    """A rank's `done`: this call's nonce (none can be written before `go`), and nothing but call and nonce."""
    if f.get("nonce") != nonce:
        raise GroupFailed("tampering", f"rank {rank} sent a `done` that does not answer this call's `go`", rank)
    if set(f) != {"call", "nonce"}:
        raise GroupFailed("tampering", f"rank {rank} sent a `done` with fields other than call and nonce", rank)


def ready(rank: int, f: dict) -> dict:
    """A rank's `ready`, its fields checked as report()'s are (what it says of itself is recorded, never
    believed: the isolation in force is the judge's own finding)."""
    def fine(v, kind):
        if isinstance(v, dict):      # the lock's own words: {"isolation", "abi", "skipped"}
            return all(isinstance(k, str) and fine(x, (str, int, list)) for k, x in v.items())
        if isinstance(v, list):
            return all(isinstance(x, str) for x in v)
        return isinstance(v, kind) and (not isinstance(v, (int, float)) or 0 <= v < 2 ** 50)
    bad = sorted(k for k, v in f.items() if k not in READY or not fine(v, READY[k]))
    if bad:
        raise GroupFailed("tampering", f"rank {rank} sent a malformed ready (fields {bad[:5]})", rank)
    return f

def report(rank: int, f: dict) -> dict:
    """A rank's report, its fields checked: malformed is tampering (its figures are diagnostics only)."""
    ok = _count(f.get("t0")) and _count(f.get("t1")) and f["t1"] >= f["t0"] and (f.get("peak") is None or _count(f.get("peak"))) and \
        isinstance(f.get("problems"), list) and \
        all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) and p[0] in REPORTED
            for p in f["problems"])
    if not ok:
        raise GroupFailed("tampering", f"rank {rank} sent a malformed report: {json.dumps(f)[:200]}", rank)
    return f


def _count(x):
    """An int the judge can do arithmetic and print with (json carries any size)."""
    return type(x) is int and 0 <= x < 2 ** 63


class DeepLine(ValueError):
    pass


def _plain(value, depth=0):
    """A rank's message with every string in it plain (console.plain): what the judge prints and records of it.
    Nested deeper than MAX_DEPTH (the rank's own lines go three deep) it is malformed: the judge's later walks of
    it (printing, JSON) recurse too."""
    if depth > MAX_DEPTH:
        raise DeepLine(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, dict):
        return {plain(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    return value
