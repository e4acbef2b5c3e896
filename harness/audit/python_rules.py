"""audit.py's Python checks, by syntax tree (`ast`): every name and attribute judged through names.FileNames and the
rules table, stores into other modules' objects and into state that outlives a call, narrow numerics (formats,
int8 casts, rounding to a grid), format strings that read attributes, strings that hold C/C++ source.

Comments never reach the tree; docstrings and bare string statements are skipped; other string constants are
scanned for narrow formats and, when they look like C/C++ or PTX source, by the C++ rules too. spec.py and
reference.py are read by the same checks (project mode): their functions that do what a solution may not are
banned through them (`spec.load_reference`). Which files are read, and in what context, is
harness/audit/python_sources.py's.
"""
import ast
import os
import string

from harness.audit import arithmetic, cpp, files, module_names, names, numerics, patterns, rules, streams
from harness.audit.names import const_number, const_str, is_type, number, root

def _format_fields(template):
    """The field names of a str.format template, nested ones included; ValueError when it is malformed."""
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is not None:
            yield field
            yield from _format_fields(spec or "")


class Checker(ast.NodeVisitor):
    """Report a Python file's findings into a unit. In project mode (spec.py, reference.py) it also records which
    top-level function each finding is in and which module-level names each function uses."""

    def __init__(self, unit, tree, ctx, project=False, file=None):
        self.unit, self.tree, self.ctx, self.project = unit, tree, ctx, project
        self.names = names.FileNames(ctx, tree, file)
        self.parent, self.skip = self.names.parent, set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list):   # docstrings and bare string statements are prose, not values
                self.skip |= {id(s.value) for s in body
                              if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)}
        self.by_function, self.uses = {}, {}   # project mode

    # --- reporting -----------------------------------------------------------------------------------------
    def add(self, node, rule, reason):
        line = getattr(node, "lineno", 1)
        self.unit.add(line, rule, reason)
        top = self._top(node) if self.project else None
        if top:
            self.by_function.setdefault(top, []).append((rule, f"{os.path.basename(self.unit.rel)}:{line}: {reason}"))

    def _top(self, node):
        while node in self.parent and not isinstance(self.parent[node], ast.Module):
            node = self.parent[node]
        return node.name if isinstance(node, names.DEFS) else None

    def _use(self, node, name):
        top = self._top(node) if self.project else None
        if top:
            self.uses.setdefault(top, set()).add(name)

    # --- checks --------------------------------------------------------------------------------------------
    def check_dotted(self, node, quals):
        for q in sorted(quals):
            if self._called_without_files(node, q):
                continue
            v = self.ctx.verdict(q)
            if v:
                self.add(node, *v)
                return True
        return False

    def _called_without_files(self, node, q):
        """`node` (naming q) is called, and q touches files only through keywords the call does not pass."""
        keys, call = rules.FILE_KEYWORDS.get(q), self.parent.get(node)
        return keys is not None and isinstance(call, ast.Call) and call.func is node and \
            not any(k.arg is None or k.arg in keys for k in call.keywords)

    def check_identifier(self, node, name):
        if name and patterns.NARROW_PY.search(name):
            self.add(node, "narrow-numerics", f"`{name}` names a number format narrower than bf16")

    def module_as_value(self, node):
        """A module used as a value escapes the name tracking (names.FileNames.escapes)."""
        if self.names.escapes(node) and self.names.is_module(node):
            self.add(node, "dynamic-name", f"the module `{self.ctx.show(ast.unparse(node))}` used as a value: the "
                                           f"audit cannot follow it further")

    def check_store(self, node, target, how="assigns"):
        """A store into an attribute or item of another module's object (or of a type, `type(x).f = g`) is a
        monkeypatch; one into module-level or default-argument state, from a function, keeps state."""
        r = root(target)
        shown = ast.unparse(target)[:80]
        quals = self.names.qualify(r) if isinstance(r, ast.Name) or is_type(r) else set()
        if is_type(r) and not quals and isinstance(r, ast.Call):    # a local `type`: an ordinary call's result
            r = root(r.func)
            quals = self.names.qualify(r)
        if quals:
            self.add(node, "monkeypatch", f"{how} `{shown}`, state of `{self.ctx.show(sorted(quals)[0])}`")
        elif isinstance(r, ast.Name):
            self.check_state(node, r, f"{how} `{shown}`")
        else:
            self.add(node, "monkeypatch", f"{how} `{shown}` through an expression the audit cannot trace")

    def check_state(self, node, name, what):
        """`what` (a store or mutation through `name`, in a function) writes state that outlives the call: the
        module's variables, functions and classes, a parameter's default value, the closure of a function made at
        import (`run = make()`), the object a method of a class instantiated at import is called on."""
        scope, made = self.names.scope_of(node), self.names.made_at_import
        if scope is None or self.names.qualify(name):
            return          # module level runs once; modules and their members are the monkeypatch rule's
        binder = self.names.binder(name.id, name)
        cls = self.parent.get(binder)
        first = [a.arg for a in binder.args.posonlyargs + binder.args.args][:1] if isinstance(binder, names.DEFS) \
            else []
        if binder is None and name.id in self.names.module_level:
            where = f"module-level `{name.id}`"
        elif binder is not None and name.id in self.names.defaulted(binder):
            where = f"the default value of `{name.id}`"
        elif binder is not scope and isinstance(binder, names.DEFS) and binder.name in made \
                and self.names.returns_function(binder):
            where = f"`{name.id}` of `{binder.name}()`, called at import,"
        elif binder is scope and isinstance(cls, ast.ClassDef) and cls.name in made and first == [name.id] \
                and binder.name not in ("__init__", "__new__", "__post_init__"):
            where = f"an object of `{cls.name}`, made at import,"
        else:
            return
        self.add(node, "state", f"{what}: {where} {rules.phrase('state')}")

    def check_string(self, node, s):
        if len(s) > files.BIG_CONSTANT:
            self.add(node, "data-file", f"a {len(s)}-character constant is data, not code")
        if patterns.NARROW_TEXT.search(s):
            self.add(node, "narrow-numerics", f"the string {s[:40]!r} names a number format narrower than bf16")
        rule = rules.ATTRS.get(s) or rules.NAME_RULES.get(s)
        if rule:
            self.add(node, rule, f"the string {s!r} names `{s}`, which {rules.phrase(rule, s)}")
        for line, rule, reason, _ in cpp.scan_string(s):
            self.unit.add(node.lineno + line - 1, rule, f"source text in a string {reason}")
            if self.project and self._top(node):
                self.by_function.setdefault(self._top(node), []).append((rule, reason))

    def check_format(self, node, template):
        """`template.format(...)` / `.format_map`: a field such as `{0.__class__}` or `{0[k]}` reads an attribute or
        item by name, which the audit cannot follow; so does a template it cannot read."""
        s = const_str(template) if template is not None else None
        if s is None and isinstance(template, ast.Name):
            s = self.names.constants.get(template.id)
        if s is None:
            self.add(node, "dynamic-name", "a format string the audit cannot read may reach attributes through its "
                                           f"fields: it {rules.phrase('dynamic-name')}")
            return
        try:
            fields = list(_format_fields(s))
        except ValueError:
            fields = ["(malformed)."]
        for field in fields:
            if "." in field or "[" in field:
                self.add(node, "dynamic-name", f"the format field `{{{field[:40]}}}` reads attributes or items by "
                                               f"name (reflection): it {rules.phrase('dynamic-name')}")
            for attr in field.replace("[", ".").replace("]", ".").split(".")[1:]:
                if attr in rules.ATTRS:
                    self.add(node, rules.ATTRS[attr], f"the format field `{{{field[:40]}}}` reads `.{attr}`, which "
                                                      f"{rules.phrase(rules.ATTRS[attr], attr)}")

    # --- visitors ------------------------------------------------------------------------------------------
    def visit_Import(self, node):
        for a in node.names:
            self.check_identifier(node, a.asname)
            self._import(node, a.name)

    def visit_ImportFrom(self, node):
        module = "." * node.level + (node.module or "")
        for a in node.names:
            self.check_identifier(node, a.asname or a.name)
            if a.name == "*":
                self.add(node, "dynamic-name", f"`from {module} import *` binds names the audit cannot see")
            if not node.level:   # the solution's own modules are audited themselves, and followed by aliases
                self._import(node, node.module if a.name == "*" else f"{node.module}.{a.name}")

    def _import(self, node, dotted):
        self.check_identifier(node, dotted)
        head = dotted.split(".")[0]
        if head in module_names.HARNESS:
            self.add(node, "harness-import", f"imports `{dotted}`, part of the harness")
        elif dotted not in rules.FILE_KEYWORDS:     # judged where it is used (check_dotted)
            v = self.ctx.verdict(dotted)
            if v:
                self.add(node, *v)
            elif not self.known_module(head):
                self.add(node, "foreign-code", f"imports `{dotted}`, a module the audit does not know (what it may "
                                               f"do is not read)")
            else:
                self.check_private(node, dotted.split("."))

    def known_module(self, head):
        own = {m.split(".")[0] for m in self.ctx.modules.shown.values()} | self.ctx.modules.extensions
        return head in module_names.KNOWN_MODULES or head in rules.RULE_MODULES or head in module_names.PROJECT \
            or head in module_names.MODULE_ALIASES or head in own

    def check_private(self, node, parts):
        """A private name of a library (`torch._int_mm`), or a dunder name outside rules.DUNDERS anywhere."""
        for part in parts[1:]:
            dunder = part.startswith("__") and part.endswith("__")
            if dunder and part not in rules.DUNDERS or \
                    not dunder and part.startswith("_") and parts[0] in module_names.LIBRARIES:
                self.add(node, "private-name", f"`{'.'.join(parts)[:80]}` {rules.phrase('private-name')} "
                                               f"(`{part}`)")
                return True
        return False

    def visit_Name(self, node):
        self.check_identifier(node, node.id)
        if node.id in rules.NAME_RULES:
            rule = rules.NAME_RULES[node.id]
            self.add(node, rule, f"`{node.id}` {rules.phrase(rule)}")
        if isinstance(node.ctx, ast.Load):
            self.check_dotted(node, self.names.qualify(node))
            self.module_as_value(node)
            streams.check(self, node)
            self._use(node, node.id)
        else:
            scope = self.names.scope_of(node)
            if scope is not None and node.id in self.names.bound(scope)[1]:
                self.add(node, "state", f"rebinds the global `{node.id}`, which {rules.phrase('state')}")

    def visit_Attribute(self, node):
        chain, r = [], node          # the whole chain is judged here, at its outermost attribute
        while isinstance(r, ast.Attribute):
            chain.append(r.attr)
            r = r.value
        chain.reverse()
        for attr in chain:
            self.check_identifier(node, attr)
            if patterns.ATTR_PATTERN.match(attr):     # before `._C`: the more precise reason of the two
                self.add(node, "monkeypatch", f"`.{attr}` switches torch's dispatcher")
        for attr in chain:
            if attr in rules.ATTRS:
                self.add(node, rules.ATTRS[attr], f"`.{attr}` {rules.phrase(rules.ATTRS[attr], attr)}")
        if not any(a in rules.ATTRS for a in chain):
            quals = sorted(self.names.qualify(node))
            if not any(self.check_private(node, q.split(".")) for q in quals):
                self.check_private(node, ["?"] + chain)      # dunders on any value
        if not self.check_dotted(node, self.names.qualify(node)):
            head = [r.id] if isinstance(r, ast.Name) else []   # `self.os.environ`: the tails from a module name on
            v = self.ctx.verdict(".".join(head + chain), suffixes_from=1 if head else 0)
            if v and not self.names.qualify(r):
                self.add(node, *v)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node, node, "assigns" if isinstance(node.ctx, ast.Store) else "deletes")
        else:
            self.module_as_value(node)
            streams.check(self, node)
        if isinstance(r, ast.Name):
            self.check_identifier(r, r.id)
            if r.id in rules.NAME_RULES:
                self.add(r, rules.NAME_RULES[r.id], f"`{r.id}` {rules.phrase(rules.NAME_RULES[r.id])}")
            self._use(node, r.id)
        else:
            self.visit(r)

    def visit_match_case(self, node):
        """A class pattern reads the subject's attributes by names that are no attribute nodes (`case
        object(int8=i8)` is getattr(subject, "int8")); a mapping pattern reads its items by key (`case {"open": f}`
        on a module's dict): the audit cannot judge what either reads."""
        for p in ast.walk(node.pattern):
            if isinstance(p, (ast.MatchClass, ast.MatchMapping)):
                kind = "class" if isinstance(p, ast.MatchClass) else "mapping"
                self.add(p, "dynamic-name", f"a `match` {kind} pattern reads the subject's "
                                            f"{'attributes' if kind == 'class' else 'items'} by name, unseen by the audit")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node, node, "assigns" if isinstance(node.ctx, ast.Store) else "deletes")
        self.generic_visit(node)

    def visit_For(self, node):
        numerics.check_loop(self, node)
        self.generic_visit(node)

    visit_While = visit_AsyncFor = visit_For

    def visit_Call(self, node):
        f = node.func
        if self.names.is_builtin(f, "getattr"):
            name = const_str(node.args[1]) if len(node.args) >= 2 else None
            if name is None:
                self.add(node, "dynamic-name", "getattr with a name computed at run time")
            else:
                self.check_dotted(node, self.names.qualify(node))
                target = sorted(self.names.qualify(node.args[0])) or ["?"]
                self.check_private(node, target[0].split(".") + [name])
                if name in rules.ATTRS:
                    self.add(node, rules.ATTRS[name], f"getattr of `{name}` {rules.phrase(rules.ATTRS[name], name)}")
            self._visit_args(node)
            return
        if self.names.is_builtin(f, "setattr") or self.names.is_builtin(f, "delattr"):
            if node.args:
                self.check_store(node, node.args[0], f"calls {f.id} on")
            self._visit_args(node)
            return
        numerics.check(self, node)
        if isinstance(f, ast.Attribute):
            receiver = root(f.value)
            if f.attr in rules.MUTATORS and isinstance(f.value, (ast.Attribute, ast.Subscript)):
                quals = self.names.qualify(receiver)
                if quals:
                    self.add(node, "monkeypatch", f"`{ast.unparse(f)[:80]}` mutates state of "
                                                  f"`{self.ctx.show(sorted(quals)[0])}`")
            in_place = f.attr.endswith("_") and not f.attr.startswith("_")
            if (f.attr in rules.MUTATORS or in_place) and isinstance(receiver, ast.Name):
                self.check_state(node, receiver, f"`{ast.unparse(f)[:80]}` mutates it")
            if f.attr in ("format", "format_map"):
                if "builtins.str" in self.names.qualify(f.value):
                    self.check_format(node, node.args[0] if node.args else None)
                elif not self.names.qualify(f.value):
                    self.check_format(node, f.value)
        self.generic_visit(node)

    def _visit_args(self, node):
        for a in node.args + node.keywords:
            self.visit(a)

    def _visit_named(self, node):
        name = node.arg if isinstance(node, (ast.arg, ast.keyword)) else node.name
        self.check_identifier(node, name)
        if isinstance(node, names.DEFS) and name in rules.DEF_RULES:
            rule = rules.DEF_RULES[name]
            self.add(node, rule, f"defines `{name}`, which {rules.phrase(rule)}")
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_arg = visit_keyword = _visit_named

    def visit_Constant(self, node):
        if id(node) in self.skip:
            return
        if isinstance(node.value, str):
            self.check_string(node, node.value)
        elif isinstance(node.value, bytes):
            self.check_string(node, node.value.decode("latin-1"))
        else:
            self.check_rounder(node, number(node))

    def check_rounder(self, node, value):
        if value is not None and abs(value) in arithmetic.ROUNDERS:
            self.add(node, "narrow-numerics", f"`{ast.unparse(node)[:40]}` is {abs(value):.0f}, which added and "
                                              f"subtracted rounds to integers (quantize/dequantize), which "
                                              f"{rules.phrase('narrow-numerics')}")

    def visit_BinOp(self, node):
        if not isinstance(self.parent.get(node), ast.BinOp):     # a whole expression of numbers: 1.5 * 2 ** 23
            self.check_rounder(node, const_number(node))
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and number(node.right) == 1:   # pointless on integers
            self.add(node, "narrow-numerics", f"`{ast.unparse(node)[:40]}` floors a float (its integer or fraction "
                                              f"part), which rounds to a coarse grid (quantize/dequantize) and "
                                              f"{rules.phrase('narrow-numerics')}")
        s = const_str(node)
        if s is not None and not (isinstance(self.parent.get(node), ast.BinOp) and const_str(self.parent[node])):
            self.check_string(node, s)    # the whole of "fo" + "pen"
        self.generic_visit(node)

    def visit_JoinedStr(self, node):
        s = const_str(node)
        if s is not None:
            self.check_string(node, s)
        else:
            self.generic_visit(node)


def _is_main_block(stmt):
    """`if __name__ == "__main__":` with no else: a script's block, which an imported module never runs."""
    t = getattr(stmt, "test", None)
    return (isinstance(stmt, ast.If) and not stmt.orelse and isinstance(t, ast.Compare) and len(t.ops) == 1
            and isinstance(t.ops[0], ast.Eq) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
            and const_str(t.comparators[0]) == "__main__")


def _binds_name(tree):
    return any(isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load) or
               isinstance(n, (ast.Global, ast.Nonlocal)) and "__name__" in n.names for n in ast.walk(tree))


def parse(unit, data, ctx, project=False, file=None):
    """The checker of a Python source, its names resolved but not yet visited; None when it does not parse. A
    module-level `if __name__ == "__main__":` block is left out (a solution's self-test: the harness imports the
    module, so the block never runs), unless the module binds `__name__` itself."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        unit.add(getattr(e, "lineno", None) or 1, "unaudited-file",
                 f"does not parse, so it cannot be audited: {type(e).__name__}: {e}")
        return None
    if not _binds_name(tree):
        tree.body = [s for s in tree.body if not _is_main_block(s)]
    unit.comments += files.python_comments(data)
    try:
        return Checker(unit, tree, ctx, project, file)
    except RecursionError:
        unit.add(1, "unaudited-file", "nested too deeply for the audit to read it all")
        return None
