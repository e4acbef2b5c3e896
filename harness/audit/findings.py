"""The audit's findings, one file's at a time, and the allowance comments (`audit: allow RULE -- reason`) that
silence review notes. A finding of a rule in verdicts.FAILS fails the gate; any other is a review note."""
import dataclasses
import re

from harness.audit.rules import RULES
from harness.audit.verdicts import FAILS, LOOK
from harness.report import console

_ALLOW = re.compile(r"audit:\s*allow\b(?P<body>.*)$")


@dataclasses.dataclass
class Finding:
    file: str           # relative to the solution directory (or the file's name, for a one-file solution)
    line: int           # 1-based; 0 for a whole file
    rule: str
    reason: str
    text: str = ""      # the source line
    allowance: str = ""  # for findings in Report.allowed: the allowance comment's reason

    @property
    def fails(self):
        """Whether this finding fails the gate (else it is a review note)."""
        return self.rule in FAILS

    @property
    def look(self):
        """What a reviewer checks at this note."""
        return LOOK.get(self.rule, "")


class Unit:
    """One file's findings and allowance comments."""

    def __init__(self, rel, text=""):
        self.rel, self.lines = rel, text.splitlines()
        self.findings, self.comments = [], []   # comments: (line, text) of every comment, for allowances
        self.seen = set()

    def add(self, line, rule, reason):
        if (line, rule) not in self.seen:       # one finding per rule and line
            self.seen.add((line, rule))
            self.findings.append(Finding(console.plain(self.rel), line, rule, console.plain(reason),
                                         console.plain(self.text(line))))

    def text(self, line):
        return self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""

    def settle(self, findings, allowed, warnings):
        """Sort this file's findings into `findings` and `allowed` by its allowance comments; an allowance that
        silences nothing goes to `warnings`, a malformed one is itself a finding."""
        allowances = {}      # line -> [[rules, reason, rules used]]
        for line, comment in self.comments:
            m = _ALLOW.search(comment)
            if not m:
                continue
            body = m.group("body").strip().rstrip("*/").strip()
            rules_text, _, reason = body.partition("--")
            rules = [r for r in re.split(r"[,\s]+", rules_text.strip()) if r]
            reason = reason.strip()
            unknown = [r for r in rules if r not in RULES or r == "allowance"]
            binding = [r for r in rules if r in FAILS]
            if binding:
                self.add(line, "allowance", f"an allowance cannot silence {', '.join(binding)}: it fails the gate, "
                                            f"and a solution may not waive that for itself")
                continue
            if not rules or unknown:
                self.add(line, "allowance", f"allowance names no rule: {', '.join(unknown) or '(none)'} "
                                            f"(`audit: allow RULE -- reason`; rules: python audit.py --rules)")
                continue
            if not reason:
                self.add(line, "allowance", f"allowance for {', '.join(rules)} without a reason "
                                            f"(`audit: allow {rules[0]} -- why this is fine`)")
                continue
            allowances.setdefault(line, []).append([rules, reason, set()])
        for f in self.findings:
            match = next((a for a in allowances.get(f.line, []) if f.rule in a[0] and f.rule != "allowance"), None)
            if match:
                match[2].add(f.rule)
                allowed.append(dataclasses.replace(f, allowance=match[1]))
            else:
                findings.append(f)
        for line, entries in allowances.items():
            for rules, reason, used in entries:
                for r in rules:
                    if r not in used:
                        warnings.append(Finding(self.rel, line, "allowance", f"unused: no `{r}` finding on this line",
                                                self.text(line), reason))
