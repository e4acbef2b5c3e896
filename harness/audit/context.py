"""What one audit knows beyond a file (harness/audit/names.py resolves a file's names within it).

- `Context`: the solution's own modules (`helper.torch.load` is `torch.load`) and the project modules spec and
  reference (re-exports, and their functions that do what a solution may not). It rewrites private spellings and
  re-exports (`expand`) and judges a dotted name (`verdict`).
- `live_module`: whether a dotted name is a module of an installed package, as the solution's process would find it.
"""
import ast
import dataclasses
import functools
import importlib
import types

from harness.audit import files, module_names, rules

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclasses.dataclass(frozen=True)
class ProjectModule:
    """What the audit knows of spec.py or reference.py."""
    aliases: dict       # module-level import name -> dotted module name
    tainted: dict       # function name -> (rule, where)

    @classmethod
    def of(cls, tree, tainted, uses):
        """A project module from its tree, its functions' own findings (function -> (rule, where)) and the
        module-level names each function uses: a function that calls a tainted one is tainted too."""
        module = cls({}, dict(tainted))
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                for a in stmt.names:
                    module.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
                for a in stmt.names:
                    module.aliases[a.asname or a.name] = f"{stmt.module}.{a.name}"
        functions = {s.name for s in tree.body if isinstance(s, DEFS)}
        changed = True
        while changed:
            changed = False
            for fn in functions - set(module.tainted):
                callee = next((u for u in sorted(uses.get(fn, ())) if u in module.tainted), None)
                if callee:
                    module.tainted[fn] = (module.tainted[callee][0],
                                          f"through `{callee}`: {module.tainted[callee][1]}")
                    changed = True
        return module


EMPTY = ProjectModule({}, {})


class Context:
    """One audit's name context: the solution's modules and a loader of project modules (name -> ProjectModule)."""

    def __init__(self, modules=None, project=lambda name: EMPTY):
        self.modules = modules if modules is not None else files.Modules()
        self.project = project

    def show(self, q):
        return self.modules.show(q)

    def expand(self, q, depth=0):
        """The dotted names q stands for: private spellings rewritten (`posix.system` -> `os.system`), re-exports of
        the project's and the solution's modules followed (`spec.os` -> `os`, `helper.torch` -> `torch`)."""
        parts = q.split(".")
        head, rest = parts[0], parts[2:]
        aliases = self.modules.aliases
        if depth > 8:
            return {q}
        if head in module_names.MODULE_ALIASES:
            return self.expand(".".join([module_names.MODULE_ALIASES[head]] + parts[1:]), depth + 1)
        if head in module_names.PROJECT and len(parts) > 1 and parts[1] in self.project(head).aliases:
            return self.expand(".".join([self.project(head).aliases[parts[1]]] + rest), depth + 1)
        if head in aliases and len(parts) > 1 and parts[1] in aliases[head]:
            return {e for t in aliases[head][parts[1]] for e in self.expand(".".join([t] + rest), depth + 1)}
        return {q}

    def verdict(self, q, suffixes_from=1):
        """(rule, reason) for dotted name q, or None: q itself, then the tails of q that start at a sensitive module
        name (`torch.os.system` is `os.system`)."""
        parts = q.split(".")
        candidates = [q] + [".".join(parts[i:]) for i in range(suffixes_from, len(parts))
                            if parts[i] in module_names.SENSITIVE]
        whole = self.expand(q)
        for c in (e for c in candidates for e in sorted(self.expand(c))):
            head = c.split(".")
            if head[0] in module_names.PROJECT:
                tainted = self.project(head[0]).tainted
                if len(head) > 1 and head[1] in tainted:
                    rule, where = tainted[head[1]]
                    return rule, f"`{'.'.join(head[:2])}` {rules.phrase(rule)} ({where})"
                continue
            if head[0].startswith("sol:"):
                continue        # the solution's own functions and classes: audited where they are defined
            entry, rule = rules.lookup(c)
            if rule:
                shown = f"`{self.show(q)}`" if c == q else f"`{self.show(q)}` (`{c}`)"
                return rule, f"{shown} {rules.phrase(rule, entry)}"
            if entry is not None and c in whole:
                return None      # explicitly allowed (os.path.join): its tails are not read again
        head = next((e.split(".")[0] for e in sorted(whole) if e.split(".")[0] in module_names.NAMED_ONLY), None)
        if head:
            return "foreign-code", f"`{self.show(q)}`: of `{head}` the audit allows only the members it lists"
        return None


LIVE_ROOTS = ("torch", "triton", "numpy")     # the packages whose submodules a solution reaches by attribute


@functools.lru_cache(maxsize=4096)
def live_module(dotted):
    """Whether `dotted` is a module (or a namespace that is one: `torch.ops`, `torch.ops.aten`) of a package of
    LIVE_ROOTS, found by walking its attributes in the audit's own process: the solution imports the same installed
    packages."""
    parts = dotted.split(".")
    if parts[0] not in LIVE_ROOTS or len(parts) < 2:
        return False
    try:
        obj = importlib.import_module(parts[0])
        for p in parts[1:]:
            obj = getattr(obj, p)
    except Exception:       # noqa: BLE001 - any name that does not resolve is no module
        return False
    return isinstance(obj, types.ModuleType)
