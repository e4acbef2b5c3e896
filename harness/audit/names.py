"""audit.py's name resolution in one file: what a Python name or expression stands for, as dotted names
(`torch.load`), within what the audit knows beyond the file (harness/audit/context.py's Context).

- `FileNames` resolves one file's names: imports, simple aliases (`t = torch`), getattr of constants, `type(x)`,
  which names a function binds locally (so that they never fall through to builtins or module state), which the
  module binds, and where a value escapes the tracking.
"""
import ast
import builtins
import operator

from harness.audit.context import DEFS, live_module

BUILTIN_NAMES = set(dir(builtins))
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)
COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
MAX_DOTS = 12      # longer dotted names are not followed: `t = t.nn` would otherwise grow without end
INTERFACE = {"run": (0, 1, 5), "prepare": (0,)}   # the parameters that are the harness's tensors (z, weights, out)


# ---------------------------------------------------------------------------------------------------------------
# Scopes.

def inside(scope, child, grandchild):
    """Whether `child` (a direct child of `scope`, with `grandchild` below it) is evaluated in scope's namespace:
    a function's body (not its decorators or defaults), a lambda's body, all of a comprehension but its first
    iterable."""
    if isinstance(scope, DEFS):
        return any(child is s for s in scope.body)
    if isinstance(scope, ast.Lambda):
        return child is scope.body
    if isinstance(scope, COMPS):
        return child is not scope.generators[0] or grandchild is not child.iter
    return False


def bound_names(scope):
    """(names, declared global): the names a function, lambda or comprehension binds in its own namespace (global
    names excluded), and the names it declares global."""
    names, declared_global = set(), set()
    if isinstance(scope, COMPS):
        for g in scope.generators:
            names |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        return names, declared_global
    a = scope.args
    names |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
    if isinstance(scope, ast.Lambda):
        return names, declared_global
    todo = list(scope.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (*DEFS, ast.ClassDef)):
            names.add(node.name)
            todo += node.decorator_list + (node.bases + [k.value for k in node.keywords]
                                           if isinstance(node, ast.ClassDef) else
                                           node.args.defaults + [d for d in node.args.kw_defaults if d])
            continue
        if isinstance(node, ast.Lambda):
            todo += node.args.defaults + [d for d in node.args.kw_defaults if d]
            continue
        if isinstance(node, COMPS):   # only a walrus inside binds here
            names |= {n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)}
            todo.append(node.generators[0].iter)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.Global):
            declared_global |= set(node.names)
        todo += list(ast.iter_child_nodes(node))
    return names - declared_global, declared_global


def is_type(node):
    """Whether `node` is `type(x)` or `x.__class__`: a type, named by a value."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" \
        and len(node.args) == 1 and not node.keywords or isinstance(node, ast.Attribute) and node.attr == "__class__"


def root(node):
    """The innermost object of `a.b[c].d()` -style expressions; a type named by a value (`type(x)`, `x.__class__`)
    is a root of its own."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)) and not is_type(node):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def const_str(node):
    """The value of a string expression built from constants only (`"fo" + "pen"`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = const_str(node.left), const_str(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)
    return None


def number(node):
    """The value of a number literal (`3`, `-2.5`), else None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.Pow: operator.pow, ast.LShift: operator.lshift}


def const_number(node):
    """The value of an expression of number literals and + - * / ** << (`1.5 * 2 ** 23`; exponents and shifts up to
    64), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = const_number(node.operand)
        return None if v is None else -v
    if not isinstance(node, ast.BinOp):
        return number(node)
    a, b, op = const_number(node.left), const_number(node.right), _ARITHMETIC.get(type(node.op))
    if a is None or b is None or op is None or isinstance(node.op, (ast.Pow, ast.LShift)) and not abs(b) <= 64:
        return None
    try:
        return op(a, b)
    except (ArithmeticError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------------
# One file's names.

class FileNames:
    """A file's names: `aliases` (name -> the dotted names it may stand for), `module_values` (dotted names known
    to be modules), `module_level` (names the module binds by assignment, def or class: its state),
    `made_at_import` (names it calls while imported), `constants` (module-level strings bound once), `is_local`."""

    def __init__(self, ctx, tree, file=None):
        self.ctx, self.tree, self.file = ctx, tree, file
        self.parent, self.locals_of = {}, {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.module_level, self.made_at_import = self._module_level(), self._made_at_import()
        self.aliases = self._aliases()
        stores = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
        self.constants = {t.id: s.value.value for s in tree.body if isinstance(s, ast.Assign)   # NAME = "text", once
                          for t in s.targets if isinstance(t, ast.Name) and stores.count(t.id) == 1
                          and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)}

    def scope_of(self, node):
        """The nearest enclosing function or lambda of `node`, or None at module level."""
        node = self.parent.get(node)
        while node is not None and not isinstance(node, (*DEFS, ast.Lambda)):
            node = self.parent.get(node)
        return node

    def binder(self, name, node):
        """The function, lambda or comprehension that binds `name` at `node`; None for module-level names."""
        grandchild, child, scope = None, node, self.parent.get(node)
        while scope is not None:
            if isinstance(scope, SCOPES) and inside(scope, child, grandchild) and name in self.bound(scope)[0]:
                return scope
            grandchild, child, scope = child, scope, self.parent.get(scope)
        return None

    @staticmethod
    def defaulted(scope):
        """The parameters of a function or lambda whose default is an object (kept from call to call)."""
        if not isinstance(scope, (*DEFS, ast.Lambda)):
            return set()
        a = scope.args
        positional = a.posonlyargs + a.args
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + \
            [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        return {p.arg for p, d in pairs if not isinstance(d, ast.Constant)
                and not (isinstance(d, ast.Tuple) and all(isinstance(e, ast.Constant) for e in d.elts))}

    def bound(self, scope):
        if id(scope) not in self.locals_of:
            self.locals_of[id(scope)] = bound_names(scope)
        return self.locals_of[id(scope)]

    def is_local(self, name, node):
        """Whether `name` at `node` is bound by an enclosing function (so never falls through to builtins)."""
        return self.binder(name, node) is not None

    def _module_level(self):
        """Names the module binds other than by import (variables, functions, classes)."""
        out, todo = set(), list(self.tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (*DEFS, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in getattr(node, "targets", None) or [node.target]:
                    out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
                todo += [h for h in getattr(node, "handlers", [])]
            elif isinstance(node, ast.ExceptHandler):
                todo += node.body
        return out

    def _made_at_import(self):
        """Names the module calls while it is imported (`run = make()`, `_dec = Decoder()`, `@wrap`): what they
        make outlives any one call."""
        out, todo = set(), list(self.tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                out.add(node.func.id)
            if isinstance(node, (*DEFS, ast.Lambda)):     # their bodies run later; decorators and defaults now
                decorators = getattr(node, "decorator_list", [])
                out |= {d.id for d in decorators if isinstance(d, ast.Name)}
                todo += decorators + node.args.defaults + [d for d in node.args.kw_defaults if d]
            else:
                todo += list(ast.iter_child_nodes(node))
        return out

    @staticmethod
    def returns_function(scope):
        """Whether a function returns a function it defines (a factory: `def make(): ... return run`)."""
        inner = {n.name for n in ast.walk(scope) if isinstance(n, DEFS) and n is not scope}
        return any(isinstance(n, ast.Return) and (isinstance(n.value, ast.Lambda) or isinstance(n.value, ast.Name)
                                                  and n.value.id in inner) for n in ast.walk(scope))

    def _aliases(self):
        """name -> dotted names it may stand for: imports, then `x = <dotted>` assignments, to a fixed point."""
        aliases, pairs = {}, []
        self.module_values = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    aliases.setdefault(name, set()).add(a.name if a.asname else name)
                    self.module_values |= {a.name} if a.asname else {name, a.name}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        aliases.setdefault(a.asname or a.name, set()).add(f"{node.module}.{a.name}")
            elif isinstance(node, ast.ImportFrom) and self.file:     # the solution's own modules
                for a in node.names:
                    target = self.ctx.modules.relative(self.file, node.level, node.module, a.name)
                    aliases.setdefault(a.asname or a.name, set()).add(target)
                    if target.count(".") == 0:
                        self.module_values.add(target)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                for t in getattr(node, "targets", None) or [node.target]:
                    pairs += self._pairs(t, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                    and isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
                pairs += [(node.target, v) for v in node.iter.elts]
            elif isinstance(node, (*DEFS, ast.Lambda)):
                a = node.args
                positional = a.posonlyargs + a.args
                pairs += [(ast.Name(p.arg), d) for p, d in zip(positional[len(positional) - len(a.defaults):],
                                                                  a.defaults)]
                pairs += [(ast.Name(p.arg), d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        self.aliases = aliases
        changed = True
        while changed:
            changed = False
            for target, value in pairs:
                if isinstance(target, ast.Name):
                    new = self.qualify(value) - aliases.get(target.id, set())
                    if new:
                        aliases.setdefault(target.id, set()).update(new)
                        changed = True
        return aliases

    def _pairs(self, target, value):
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            return [p for t, v in zip(target.elts, value.elts) for p in self._pairs(t, v)]
        return [(target, value)] if isinstance(target, ast.Name) else []

    def qualify(self, node):
        """The dotted names an expression may stand for (empty when it is not a module, a module's member or a
        type named by `type(x)` / `x.__class__`)."""
        if isinstance(node, ast.Name):
            out = set(self.aliases.get(node.id, ()))
            if node.id in BUILTIN_NAMES and (node not in self.parent or not self.is_local(node.id, node)):
                out.add("builtins." + node.id)
            return out
        if isinstance(node, ast.NamedExpr):          # `(t := torch).jit` is torch.jit
            return self.qualify(node.value)
        if isinstance(node, ast.Attribute):
            if node.attr == "__class__":
                return {self.type_of(node.value)}
            return {f"{q}.{node.attr}" for q in self.qualify(node.value) if q.count(".") < MAX_DOTS}
        if isinstance(node, ast.Call) and self.is_builtin(node.func, "getattr") and len(node.args) >= 2:
            name = const_str(node.args[1])
            if name is not None:
                return {f"{q}.{name}" for q in self.qualify(node.args[0]) if q.count(".") < MAX_DOTS}
        if isinstance(node, ast.Call) and is_type(node) and self.is_builtin(node.func, "type"):
            return {self.type_of(node.args[0])}
        return set()

    def type_of(self, node):
        """The name of the type of `node`'s value: `torch.Tensor` for the interface's tensors and torch's results,
        else `type(<node>)`."""
        r = root(node)
        scope = self.scope_of(r)
        if isinstance(r, ast.Name) and isinstance(scope, DEFS) and scope.name in INTERFACE:
            params = [a.arg for a in scope.args.posonlyargs + scope.args.args]
            if r.id in [p for i, p in enumerate(params) if i in INTERFACE[scope.name]]:
                return "torch.Tensor"
        if any(q == "torch" or q.startswith("torch.") for q in self.qualify(r)):
            return "torch.Tensor"
        return f"type({ast.unparse(node)[:40]})"

    def is_builtin(self, node, name):
        return isinstance(node, ast.Name) and node.id == name and f"builtins.{name}" in self.qualify(node)

    def escapes(self, node):
        """Whether a value at `node` escapes the name tracking: an argument, an attribute or class attribute, a
        container element, a return value. Plain aliases (`t = torch` in a function or module) are followed."""
        p = self.parent.get(node)
        g = self.parent.get(p)
        if isinstance(p, ast.Call):
            return not (node is p.func or (p.args and node is p.args[0] and (self.is_builtin(p.func, "getattr")
                                                                             or self.is_builtin(p.func, "hasattr"))))
        if isinstance(p, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            targets = getattr(p, "targets", None) or [p.target]
            return not all(isinstance(n, ast.Name) for t in targets for n in ([t] if isinstance(t, ast.Name) else
                                                                              getattr(t, "elts", [t]))) \
                or isinstance(g, ast.ClassDef)
        if isinstance(p, (ast.Tuple, ast.List)):
            return not ((isinstance(g, (ast.For, ast.AsyncFor, ast.comprehension)) and p is g.iter
                         and isinstance(g.target, ast.Name)) or
                        (isinstance(g, ast.Assign) and p is g.value and not isinstance(self.parent.get(g), ast.ClassDef)
                         and all(isinstance(t, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in t.elts)
                                 for t in g.targets)))
        return not isinstance(p, (ast.Compare, ast.arguments, ast.Expr))

    def is_module(self, node):
        """Whether an expression is (known to be) a module: one the file or the solution imports, or a module of an
        installed package reached by attribute (`torch.nn.functional`, never imported by that name)."""
        known = self.module_values | self.ctx.modules.module_values
        return any(e in known or live_module(e) for q in self.qualify(node) for e in self.ctx.expand(q))
