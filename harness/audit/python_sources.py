"""Which Python files audit.py's Python checks (harness/audit/python_rules.py) read, and with what context: every
Python file of a solution, its imports of its other modules followed, and the project modules spec.py and
reference.py, read by the same checks in project mode so that their functions that do what a solution may not are
banned through them (`spec.load_reference`)."""
import functools
import os

from harness.audit import context, files, findings
from harness.audit.python_rules import parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def audit_sources(solution, python):
    """Every Python file of the solution, its imports of the solution's other modules followed."""
    ctx = context.Context(files.Modules(python, solution.base, solution.extensions), project_module)
    checkers = []
    for f in python:
        if os.path.isdir(os.path.splitext(f)[0]):
            solution.unit_for(f).add(0, "unaudited-file", f"an ambiguous module: the folder "
                                                          f"{os.path.basename(os.path.splitext(f)[0])}/ beside it is "
                                                          f"imported instead where it holds __init__.py")
        data = solution.read(f)
        checker = parse(solution.unit_for(f, files.decode_python(data)), data, ctx, file=f) if data is not None \
            else None
        if checker is not None:
            ctx.modules.aliases[ctx.modules.ids[f]] = checker.names.aliases
            ctx.modules.module_values |= checker.names.module_values | {ctx.modules.ids[f]}
            checkers.append(checker)
    for checker in checkers:
        try:
            checker.visit(checker.tree)
        except RecursionError:
            checker.unit.add(1, "unaudited-file", "nested too deeply for the audit to read it all")


# ---------------------------------------------------------------------------------------------------------------
# The repository modules a solution may import: their functions that do what a solution may not are banned
# through them too (`spec.load_reference` reads the references).

def project_module(name, loading=frozenset()):
    """spec.py's or reference.py's aliases and tainted functions; `loading`: the modules being read (a cycle sees
    an empty module). Memoised per process by the file's stamp, so an edited file is read again."""
    st = os.stat(os.path.join(ROOT, f"{name}.py"))
    return _project_module(name, st.st_mtime_ns, st.st_size, loading)


@functools.lru_cache(maxsize=None)
def _project_module(name, mtime_ns, size, loading):
    with open(os.path.join(ROOT, f"{name}.py"), "rb") as f:
        data = f.read()
    inner = loading | {name}
    ctx = context.Context(project=lambda n: context.EMPTY if n in inner else project_module(n, inner))
    checker = parse(findings.Unit(f"{name}.py", files.decode_python(data)), data, ctx, project=True)
    if checker is None:
        return context.EMPTY
    checker.visit(checker.tree)
    # Harness code may set torch flags inside a restoring context (reference.fp32_exact), or pass modules around:
    # what taints a function is what it does (files, environment, processes, state ...), not its style.
    found = {fn: [(r, w) for r, w in hits if r not in ("monkeypatch", "dynamic-name")]
             for fn, hits in checker.by_function.items()}
    return context.ProjectModule.of(checker.tree, {fn: hits[0] for fn, hits in found.items() if hits}, checker.uses)
