"""Where a run's wall time goes, on the judge's clock: the data, the solutions' builds, the groups' starts, the
references of fresh latents (the judge's own decodes, its measure of its GPU memory need among them), the calls, the
checks of their videos, and the rest. bench and ci print it at the end and write it to their JSON (`time_s`)."""
import contextlib
import time

PARTS = ("data", "builds", "starts", "references", "calls", "checks")


class Breakdown:
    def __init__(self):
        self.started = time.monotonic()
        self.spent = dict.fromkeys(PARTS, 0.0)
        self.depth = 0

    @contextlib.contextmanager
    def part(self, name):
        """Time the block as `name`; a part inside another counts as the outer one's only."""
        t, self.depth = time.monotonic(), self.depth + 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0:
                self.spent[name] += time.monotonic() - t

    def as_dict(self):
        total = time.monotonic() - self.started
        return {**{k: round(v, 3) for k, v in self.spent.items()},
                "other": round(max(0.0, total - sum(self.spent.values())), 3), "total": round(total, 3)}

    def said(self):
        return "time: " + ", ".join(f"{k} {v:.0f} s" for k, v in self.as_dict().items())


NONE = Breakdown()      # for callers that keep no account (tests, the data maker)
