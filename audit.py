"""Static audit of a solution: named rules over every source, each with the reason it exists.

    python audit.py SOLUTION [--json PATH] [--strict]   # exit 0 passed (review notes allowed), 1 failing findings,
                                                        # 2 usage; --strict: notes fail too
    python audit.py --rules                             # the rules table: each rule, fails or note, and why

    from audit import audit
    report = audit("solutions/reference")      # report.ok, .failures, .notes, .allowed, .warnings

Two kinds of finding. A rule of verdicts.FAILS (the task's file-io rule; files the audit cannot read) fails the gate:
the audit is its only check and no honest solution needs what it forbids. Every other finding is a review note:
a construct honest decoders use (a mutable default argument, a module-level cache, a thread pool) that the runtime
checks already stand behind (fresh latents checked in full on every timed call, threads and processes left running,
the precision census); the gate shows it, with what a reviewer should look at, and passes.

What is read, and how (one module of harness/ each; the rules themselves are one table, harness/audit/rules.py,
and what each rule's finding does at the gate is harness/audit/verdicts.py's):
- Python (`.py`) by its syntax tree (harness/audit/python_rules.py, the files read by harness/audit/python_sources.py,
  names through harness/audit/names.py and context.py): names are resolved through the file's imports and simple aliases (`t = torch`, `T = type(x)`) to dotted
  names (`torch.load`), which the rules' `names` map to rules; bare builtins (`open`, `eval`) count unless a function
  binds the name locally. Imports between the solution's own modules are followed (`helper.torch.load` is `torch.load`),
  and so are re-exports (`spec.os`, `torch.os`, `x.torch.load`); a module used as a value (an argument, an attribute, a
  `match` subject), a submodule reached by attribute (`torch.nn.functional`) too, is itself a finding, since the
  audit cannot follow it, and so is a `match` class or mapping pattern, which reads attributes or items by name. spec.py's and reference.py's functions that touch files or the environment
  (`spec.load_reference`) are banned through them: the audit reads those modules with the same rules. Stores into
  other modules' objects or types are monkeypatches; stores from a function into module-level or default-argument
  objects keep state between calls; int8 dtypes and rounding to a grid (round, frexp, floor with a scale, clamps
  to a narrow range) are narrow numerics; format strings with attribute fields are reflection. Comments never reach
  the tree, docstrings and bare string statements are skipped; other string constants are scanned for narrow
  formats and, when they look like C/C++ or PTX source (`;`, `{`, `#include`), by the C++ rules too.
- C/C++/CUDA sources and headers by text (harness/audit/cpp.py): line splices joined, `//` and `/* */` comments blanked
  (string literals kept, so PTX inside `asm("...")` is read), tokens as C++ lexes them (identifiers,
  numbers with their separators, header names), read without trigraphs (C++17, as the build reads every source; a
  flag choosing an older standard is refused) and with them, and again with adjacent string literals joined (`"op" "en"`); where a compiler is there, a file
  on which it reads code that the audit took for a comment is a finding (`-fpreprocessed`, harness/audit/cpp.py
  compiler_disagrees); then regexes (a banned function called, or named as a value, an address, a using-declaration
  or a macro; an asm label); the task's own `spec.RULES["file-io"]`
  among them ("include" on `#include` names, "text" on the code); then Python's numerics read from calls' arguments
  (rounding in libtorch's method and function forms, floor/ceil with a scale, clamps to a narrow range, integer
  casts). Includes are followed: every file of the solution an #include may name, through any include folder, is
  audited whatever its suffix; one outside it is a finding.
- `solution.yml` (the top-level one, as the loader reads it): the C++ rules over its text (a `-DX=fopen` macro),
  `sources` and flags that reach outside the solution or are no plain token (the build hands them to a shell).
  Every other file in the solution directory must be a source, documentation, or bytecode identical to its
  source's (harness/audit/files.py).

Allowances: a reviewed note is silenced by a comment on its line, `# audit: allow RULE[, RULE] -- reason` (or
`// ...` in C++); the reason is required, every allowance used is listed, one that silences nothing is a warning,
and none silences a failing rule. A static check cannot see everything (values computed at run
time, gadgets inside third-party packages, device code reading memory it was not given): the runtime checks of
bench.py are the other half of the defence.
"""
import argparse
import dataclasses
import json
import os
import sys

from harness.audit import cpp, files, python_sources
from harness.audit.files import UsageError
from harness.audit.findings import Finding
from harness.audit.rules import CPP_RULES, RULES
from harness.audit.verdicts import FAILS, LOOK

__all__ = ["audit", "Report", "Finding", "UsageError", "RULES", "CPP_RULES", "FAILS", "LOOK", "format_report",
           "format_rules", "passed", "main"]


@dataclasses.dataclass
class Report:
    path: str
    files: list
    findings: list      # every finding not silenced: failures and review notes
    allowed: list
    warnings: list      # unused allowances: listed, not failures

    @property
    def failures(self):
        return [f for f in self.findings if f.fails]

    @property
    def notes(self):
        return [f for f in self.findings if not f.fails]

    @property
    def ok(self):
        """No failing finding (review notes allowed)."""
        return not self.failures

    def to_json(self):
        def entry(f):
            return {**dataclasses.asdict(f), "fails": f.fails, "look": f.look}
        return {"solution": self.path, "ok": self.ok, "files": self.files,
                "findings": [entry(f) for f in self.findings], "failures": [entry(f) for f in self.failures],
                "review": [entry(f) for f in self.notes], "allowed": [entry(f) for f in self.allowed],
                "warnings": [entry(f) for f in self.warnings], "rules": RULES,
                "fails": sorted(FAILS)}


def audit(path):
    """Audit every source of the solution at `path` (a directory with solution.py, or a .py file)."""
    given = os.fspath(path)
    path = os.path.abspath(given)
    if not files.is_solution(path):
        raise UsageError(f"{given}: not a solution (a directory with solution.py, or a .py file)")
    solution = files.Solution(path)
    python, yml, sources, pyc, other = solution.files()
    include_dirs = cpp.audit_build_files(solution, yml, sources)
    cpp.audit_sources(solution, sources, include_dirs, other)
    python_sources.audit_sources(solution, python)
    solution.check_leftovers(pyc, other)
    findings, allowed, warnings = [], [], []
    for rel in sorted(solution.units):
        solution.units[rel].settle(findings, allowed, warnings)
    key = (lambda f: (f.file, f.line, f.rule))
    return Report(given, sorted(solution.units), sorted(findings, key=key), sorted(allowed, key=key),
                  sorted(warnings, key=key))


# ---------------------------------------------------------------------------------------------------------------
# Printing and the command line.

def _where(report, f):
    base = report.path if os.path.isdir(report.path) else os.path.dirname(report.path)
    return f"{os.path.join(base, f.file) if base else f.file}:{f.line}"


def format_report(report, strict=False):
    out = [f"audit {report.path}: {len(report.failures)} failing finding(s), {len(report.notes)} review note(s), "
           f"{len(report.allowed)} allowed, {len(report.warnings)} warning(s) in {len(report.files)} file(s)"]
    sections = (("failing findings", report.failures), ("review notes", report.notes),
                ("allowances used", report.allowed), ("warnings", report.warnings))
    for title, items in sections:
        if not items:
            continue
        out.append(f"\n{title}:")
        for f in items:
            out.append(f"  {_where(report, f)}: {f.rule}: {f.reason}")
            if f.allowance:
                out.append(f"      allowed: {f.allowance}")
            elif title == "review notes" and f.look:
                out.append(f"      look at: {f.look}")
            if f.text:
                out.append(f"      | {f.text}")
    if not report.ok:
        out.append("\nFAILED: fix the failing findings (they cannot be allowed)")
    elif report.notes:
        out.append("\n" + ("FAILED (--strict): review notes fail; allow a reviewed one with `# audit: allow RULE -- "
                            "reason` on its line" if strict else "passed, with review notes"))
    else:
        out.append("\nclean")
    return "\n".join(out)


def format_rules():
    width = max(map(len, RULES))
    return "\n".join(f"{name:<{width}}  {'fails' if name in FAILS else 'note '}  {why}" for name, why in RULES.items())


def passed(report, strict=False):
    return report.ok and not (strict and report.notes)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Static audit of a solution's sources (see the module docstring).")
    parser.add_argument("solution", nargs="?", help="a directory with solution.py, or a .py file")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH ('-': stdout)")
    parser.add_argument("--rules", action="store_true", help="print the rules and why each exists, then exit")
    parser.add_argument("--strict", action="store_true", help="review notes fail too (exit 1)")
    args = parser.parse_args(argv)
    if args.rules:
        print(format_rules())
        return 0
    if not args.solution:
        parser.print_usage(sys.stderr)
        print("audit.py: error: a solution path is required", file=sys.stderr)
        return 2
    try:
        report = audit(args.solution)
    except UsageError as e:
        print(f"audit.py: error: {e}", file=sys.stderr)
        return 2
    if args.json == "-":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(format_report(report, args.strict))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report.to_json(), f, indent=2)
    return 0 if passed(report, args.strict) else 1


if __name__ == "__main__":
    sys.exit(main())
