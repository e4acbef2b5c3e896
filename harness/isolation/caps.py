"""What a group holds, as the judge counts it (a mixin of harness/judge/group.py's Group): its files on the disk and in
/dev/shm, the open and mapped files and sockets its processes hold (harness/isolation/disk.py), what its sockets queue
(harness/isolation/sockets.py), the out-of-memory kills at or under its memory cap (harness/isolation/cgroup.py), and
what it keeps of the GPUs' memory (harness/isolation/gpu_memory.py). A count over a cap,
or a kill at the cap, is the group's failure (GroupFailed); one is made between calls, at every freeze (a group is
frozen from the end of its start or call to its next call), and in steps while the judge waits for a `done`.

The host class provides: `procs` (the ranks' Popen objects), `scratch`, `logs`, `shm` (None where ranks may not write
/dev/shm), `uid` (the group's user or None), `net` (its network namespace or None: the host's), `jail` (its cgroup or
None), `_watch` (a disk.Watch), `_counted_at` (when the next count of kills and sockets is due), `run` and `world`."""
import time

from harness.isolation import disk, procs, sockets, users


class Caps:
    def _disk(self, now=False):
        """The ranks' scratch folders and logs within the caps, with what they hold in /dev/shm: under a user of its
        own the names there that are its user's, and at any user the files there they hold open in no folder
        (disk.Watch: `now` a whole count, between calls; else a step of one, which never holds up the reading of a
        `done` for long)."""
        from harness.judge.protocol import GroupFailed     # here: the judge imports isolation/, not the reverse
        # The cgroup's kills and the sockets are asked about as often as a count starts, not at every step.
        due = now or time.monotonic() >= self._counted_at
        if due:
            self._counted_at = time.monotonic() + disk.Watch.EVERY_S
            self._memory()
        why = self._watch.check(self._paths, now, self._holders, ["/dev/shm"] if self.shm is not None else [])
        if why:
            raise GroupFailed("tampering", f"the ranks {why}")
        # In a namespace of its own also while the judge waits (a count of its own sockets slows only its own call);
        # in the host's, whose tables another group could fill (TIME_WAIT), only between calls and at freezes.
        if due and self.procs and (now or self.net is not None):
            self._sockets()

    def _sockets(self):
        """What the group's sockets hold (harness/isolation/sockets.py): in a network namespace of its own every socket
        there, those no descriptor names too (a listener's backlog, orphans); in the host's, those its processes
        hold."""
        from harness.judge.protocol import GroupFailed     # here: the judge imports isolation/, not the reverse
        pid = self.procs[0].pid
        if self.net is not None:
            used = sockets.in_namespace(pid)
            if used is not None and used > disk.SOCKETS_CAP:
                raise GroupFailed("tampering", f"the ranks held more than {disk.SOCKETS_CAP} sockets in their network "
                                               f"namespace ({used}: tcp_mem is one pool for the whole host)")
            queued = sockets.queued(pid)
        else:
            queued = sockets.queued(pid, sockets.held(self._holders()))
        if queued is not None and queued > sockets.QUEUED_CAP:
            raise GroupFailed("tampering", f"the ranks' sockets queued more than {disk.gib(sockets.QUEUED_CAP)} "
                                           f"({disk.gib(queued)}: the kernel's memory, outside the group's cap)")

    def _memory(self):
        """Raise where the kernel's out-of-memory killer ended a process of the group: at its memory cap (its cgroup's,
        harness/isolation/cgroup.py) the group's failure, whichever of its processes the killer took; under it, the
        host's."""
        from harness.judge.protocol import GroupFailed     # here: the judge imports isolation/, not the reverse
        kills, at_cap = self.jail.oom() if self.jail is not None else (0, False)
        if kills and at_cap:
            raise GroupFailed("crash", f"the group's processes went past its memory cap of "
                                       f"{disk.gib(self.jail.memory_cap)} (RAM, files in memory and the kernel's "
                                       f"objects made for them, together) and the kernel ended one of them")
        if kills:
            raise GroupFailed("harness error", f"the host's out-of-memory killer ended one of the group's processes "
                                               f"while the group was under its memory cap of "
                                               f"{disk.gib(self.jail.memory_cap)}: the host ran short of memory, not "
                                               f"this solution")

    def _gpu_memory(self, when):
        """Raise where the group, held, keeps more of a GPU's memory than its cap (harness/isolation/gpu_memory.py)."""
        from harness.judge.protocol import GroupFailed     # here: the judge imports isolation/, not the reverse
        meter = getattr(self.run, "gpumem", None)
        why = meter.over(self._holders(), self.world) if meter is not None and self.procs else None
        if why:
            raise GroupFailed("runtime error", f"{why} {when}")

    def short_of_gpu_memory(self, err):
        """The verdict on an out-of-memory error in the judge's own GPU work for this group's call: the group's where it
        holds more than its cap, else the judge's."""
        from harness.judge.protocol import GroupFailed     # here: the judge imports isolation/, not the reverse
        try:
            self._gpu_memory("when the judge's checks of its call ran out of GPU memory")
        except GroupFailed as failed:
            return failed
        return GroupFailed("harness error", f"the judge ran out of GPU memory while checking the call, with the group "
                                            f"under its GPU memory cap: {str(err).splitlines()[0][:200]}")

    def _paths(self):
        """What the disk count walks: the scratch folders and logs, and under a user of its own its names in
        /dev/shm."""
        paths = self.scratch + [log.name for log in self.logs]
        if self.shm is not None and self.uid is not None:
            paths += users.owned("/dev/shm", self.uid)
        return paths

    def _holders(self):
        """The group's live processes, for the count of files in no folder: its cgroup's members, else the ranks and
        their descendants."""
        ranks = {p.pid for p in self.procs}
        return ranks | (self.jail.members() if self.jail is not None else procs.descendants_of(ranks))
