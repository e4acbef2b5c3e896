"""The judge's end of a group's pipes (a mixin of harness/judge/group.py's Group): its commands written with a deadline,
the ranks' lines read, each checked as it comes (harness/judge/protocol.py), and what a rank's death or silence means.

The host class provides: `world`, `procs` (the ranks' Popen objects), `cmds` (command pipes' write ends, non-blocking),
`fds` (result pipes' read ends), `bufs` (fd: unread bytes), `_arrived` (the clock at the last read), `_limit` (the
wait's length, for its message), `_watch` (a disk.Watch, whose wait() bounds each select), `_disk(now=False)`
(a step of the group's disk count while idle) and `_memory()` (raises where the group went past its memory cap)."""
import os
import select
import signal
import subprocess
import time

from harness.isolation import disk
from harness.judge import protocol
from harness.judge.protocol import MAX_LINE, GroupFailed

# CLOCK_MONOTONIC_RAW: the hardware counter as it runs, which no frequency or tick adjustment (adjtimex: the host's
# NTP, or a rank with CAP_SYS_TIME) slows or speeds.
CLOCK = (lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)) if hasattr(time, "CLOCK_MONOTONIC_RAW") \
    else time.monotonic_ns
STARTUP_S = 300.0          # load, build cache, prepare, first-call autotuning
REPORT_S = 10.0            # a call's report after its done (a profiled call's: STARTUP_S, for its trace)
WRITE_S = 5.0              # a command's wait for room in a rank's pipe (one that stays full: a rank stopped reading)
PENDING_MAX = 2 * protocol.MAX_LINE + protocol.MAX_DONE   # a rank's unread bytes: a done and a report at most


class Pipes:
    def _tell(self, rank, data, limit=WRITE_S):
        """Write `data` to rank `rank`'s command pipe within `limit` seconds. A rank that stops reading its commands
        (the pipe stays full) or closes them fails as the solution's failure; the judge never blocks on it."""
        fd, deadline = self.cmds[rank], time.monotonic() + limit
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [fd], [], left)[1]:
                    raise GroupFailed("tampering", f"rank {rank} did not read its commands for {limit:.0f} s (its "
                                                   f"command pipe stayed full)", rank)
            except OSError as e:        # EPIPE: the read end is gone
                if self.procs[rank].poll() is not None:
                    self._died(rank)
                raise GroupFailed("tampering", f"rank {rank} closed its command pipe ({e.strerror})", rank)

    def _lines(self, deadline, wanted):
        """Yield (rank, kind, fields, arrival ns) of the ranks in `wanted` (a set the caller shrinks; the others'
        lines wait in their buffers) until the deadline; a dead rank or the deadline raises."""
        while True:
            for rank in sorted(wanted):
                fd = self.fds[rank]
                end = self.bufs[fd].find(b"\n") if rank in wanted else -1
                if end >= 0:
                    line = bytes(self.bufs[fd][:end])
                    del self.bufs[fd][:end + 1]
                    yield rank, *protocol.parse(line, rank), self._arrived
            if not wanted:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise GroupFailed("timeout", f"no '{self._awaited}' line from rank {min(wanted)} within "
                                             f"{self._limit:.1f} s")
            ready, _, _ = select.select(self.fds, [], [], min(left, self._watch.wait()))
            self._arrived = CLOCK()
            if not ready:       # while idle only: a step must not delay the stamp of a line that is there
                self._disk()
            for fd in ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self._died(self.fds.index(fd))
                self.bufs[fd] += chunk
                if len(self.bufs[fd]) > MAX_LINE and self.bufs[fd].find(b"\n") < 0:
                    raise GroupFailed("tampering", f"rank {self.fds.index(fd)} sent a line of more than "
                                                   f"{MAX_LINE} bytes", self.fds.index(fd))
                if len(self.bufs[fd]) > PENDING_MAX:    # lines the judge has not asked for pile up in its memory
                    raise GroupFailed("tampering", f"rank {self.fds.index(fd)} sent more than {PENDING_MAX} bytes "
                                                   f"the judge had not read (a rank owes a done and a report)",
                                      self.fds.index(fd))
            for rank, p in enumerate(self.procs):
                if p.poll() is not None and not self.bufs[self.fds[rank]] and \
                        not select.select([self.fds[rank]], [], [], 0)[0]:
                    self._died(rank)

    def _died(self, rank):
        p = self.procs[rank]
        try:
            code = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code == -signal.SIGXFSZ:
            raise GroupFailed("tampering", f"rank {rank} wrote a file of more than {disk.gib(disk.FILE_CAP)} (its log "
                                           f"or in its scratch) and was killed by SIGXFSZ", rank)
        self._memory()
        raise GroupFailed("crash", f"rank {rank} died (exit code {code})", rank)

    def _each(self, kind, call, limit):
        """[(rank, fields)] of one `kind` line from every rank, in rank order; anything else is a failure."""
        self._limit, self._awaited = limit, kind
        got, wanted = {}, set(range(self.world))
        for rank, k, fields, at in self._lines(time.monotonic() + limit, wanted):
            if k == "error":
                raise protocol.failure(rank, fields)
            if k != kind or fields.get("call") != call:
                raise GroupFailed("tampering", f"rank {rank} sent an unexpected '{k}' line (call "
                                               f"{fields.get('call')}) while the judge waited for '{kind}' of call "
                                               f"{call}", rank)
            got[rank] = (fields, at)
            wanted.discard(rank)
        return [(r, *got[r]) for r in range(self.world)]

    def _quiet(self, when="between calls"):
        """Lines that arrived while no call was running are tampering; so is a flood of the disk meanwhile."""
        self._disk(now=True)
        ready, _, _ = select.select(self.fds, [], [], 0)
        for fd in ready:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self._died(self.fds.index(fd))
            self.bufs[fd] += chunk
        for rank, fd in enumerate(self.fds):
            if self.bufs[fd]:
                raise GroupFailed("tampering", f"rank {rank} wrote {when}: {bytes(self.bufs[fd][:120])!r}", rank)
