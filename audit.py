"""Static audit of a solution: named rules over every source, each with the reason it exists.

    python audit.py SOLUTION [--json PATH]     # findings, then the allowances used; exit 0 clean, 1 findings, 2 usage
    python audit.py --rules                    # the rules table

    from audit import audit
    report = audit("solutions/reference")      # report.ok, .findings, .allowed, .warnings

What is read, and how (one module of harness/ each; the rules themselves are one table, harness/rules.py):
- Python (`.py`) by its syntax tree (harness/python_rules.py, names through harness/names.py and context.py): names are resolved
  through the file's imports and simple aliases (`t = torch`, `T = type(x)`) to dotted names (`torch.load`), which
  the rules' `names` map to rules; bare builtins (`open`, `eval`) count unless a function binds the name locally.
  Imports between the solution's own modules are followed (`helper.torch.load` is `torch.load`), and so are
  re-exports (`spec.os`, `torch.os`, `x.torch.load`); a module used as a value (an argument, an attribute, a
  `match` subject), a submodule reached by attribute (`torch.nn.functional`) too, is itself a finding, since the
  audit cannot follow it, and so is a `match` class or mapping pattern, which reads attributes or items by name. spec.py's and reference.py's functions that touch files or the environment
  (`spec.load_reference`) are banned through them: the audit reads those modules with the same rules. Stores into
  other modules' objects or types are monkeypatches; stores from a function into module-level or default-argument
  objects keep state between calls; int8 dtypes and rounding to a grid (round, frexp, floor with a scale, clamps
  to a narrow range) are narrow numerics; format strings with attribute fields are reflection. Comments never reach
  the tree, docstrings and bare string statements are skipped; other string constants are scanned for narrow
  formats and, when they look like C/C++ or PTX source (`;`, `{`, `#include`), by the C++ rules too.
- C/C++/CUDA sources and headers by text (harness/cpp.py): line splices joined, `//` and `/* */` comments blanked
  (string literals kept, so PTX inside `asm("...")` is read), tokens as C++ lexes them (identifiers,
  numbers with their separators, header names), read without trigraphs (C++17, as the build reads every source; a
  flag choosing an older standard is refused) and with them, and again with adjacent string literals joined (`"op" "en"`); where a compiler is there, a file
  on which it reads code that the audit took for a comment is a finding (`-fpreprocessed`, harness/cpp.py
  compiler_disagrees); then regexes (a banned function called, or named as a value, an address, a using-declaration
  or a macro; an asm label); the task's own `spec.RULES["file-io"]`
  among them ("include" on `#include` names, "text" on the code); then Python's numerics read from calls' arguments
  (rounding in libtorch's method and function forms, floor/ceil with a scale, clamps to a narrow range, integer
  casts). Includes are followed: every file of the solution an #include may name, through any include folder, is
  audited whatever its suffix; one outside it is a finding.
- `solution.yml` (the top-level one, as the loader reads it): the C++ rules over its text (a `-DX=fopen` macro),
  `sources` and flags that reach outside the solution or are no plain token (the build hands them to a shell).
  Every other file in the solution directory must be a source, documentation, or bytecode identical to its
  source's (harness/files.py).

Allowances: a reviewed false positive is silenced by a comment on the finding's line,
`# audit: allow RULE[, RULE] -- reason` (or `// ...` in C++); the reason is required, every allowance used is
listed, and one that silences nothing is a warning. A static check cannot see everything (values computed at run
time, gadgets inside third-party packages, device code reading memory it was not given): the runtime checks of
bench.py are the other half of the defence.
"""
import argparse
import dataclasses
import json
import os
import sys

from harness import cpp, files, python_rules
from harness.files import UsageError
from harness.findings import Finding
from harness.rules import CPP_RULES, RULES

__all__ = ["audit", "Report", "Finding", "UsageError", "RULES", "CPP_RULES", "format_report", "format_rules", "main"]


@dataclasses.dataclass
class Report:
    path: str
    files: list
    findings: list
    allowed: list
    warnings: list      # unused allowances: listed, not failures

    @property
    def ok(self):
        return not self.findings

    def to_json(self):
        return {"solution": self.path, "ok": self.ok, "files": self.files,
                "findings": [dataclasses.asdict(f) for f in self.findings],
                "allowed": [dataclasses.asdict(f) for f in self.allowed],
                "warnings": [dataclasses.asdict(f) for f in self.warnings], "rules": RULES}


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
    python_rules.audit_sources(solution, python)
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


def format_report(report):
    out = [f"audit {report.path}: {len(report.findings)} finding(s), {len(report.allowed)} allowed, "
           f"{len(report.warnings)} warning(s) in {len(report.files)} file(s)"]
    sections = (("findings", report.findings, False), ("allowances used", report.allowed, True),
                ("warnings", report.warnings, True))
    for title, items, with_reason in sections:
        if not items:
            continue
        out.append(f"\n{title}:")
        for f in items:
            out.append(f"  {_where(report, f)}: {f.rule}: {f.reason}")
            if with_reason and f.allowance:
                out.append(f"      allowed: {f.allowance}")
            if f.text:
                out.append(f"      | {f.text}")
    out.append("\n" + ("clean" if report.ok else "NOT CLEAN: fix the findings, or allow a reviewed false positive "
                                                  "with `# audit: allow RULE -- reason` on its line"))
    return "\n".join(out)


def format_rules():
    width = max(map(len, RULES))
    return "\n".join(f"{name:<{width}}  {why}" for name, why in RULES.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description="Static audit of a solution's sources (see the module docstring).")
    parser.add_argument("solution", nargs="?", help="a directory with solution.py, or a .py file")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH ('-': stdout)")
    parser.add_argument("--rules", action="store_true", help="print the rules and why each exists, then exit")
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
        print(format_report(report))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report.to_json(), f, indent=2)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
