"""audit.py's arithmetic checks of one call (the narrow-numerics rule's, and dtypes named at run time): int8 dtypes as
arguments, rounding to a grid (floor/ceil/trunc with a scale, integer casts, clamps to a narrow format's range,
rounded divisions scaled back), tensors viewed as integers, Triton dtypes built from text and `tl.dot` accumulating
below fp32, torch.compile with a backend of the solution's own."""
import ast
import re

from harness.audit import arithmetic, rules
from harness.audit.names import const_str, number


def scaling(node, ops=(ast.Div, ast.Mult)):
    """Whether `node` divides or multiplies: `a / s`, `a * s`, `a.div(s)`, `torch.mul(a, s)`."""
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ops)
    f = node.func if isinstance(node, ast.Call) else None
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return name in arithmetic.DIVIDES + (arithmetic.MULTIPLIES if ast.Mult in ops else ())


FP32 = {"triton.language.float32", "triton.language.core.float32"}
# Where Triton's tensor makers and cast take their dtype positionally
DTYPE_AT = {"triton.language.zeros": 1, "triton.language.full": 2, "triton.language.cast": 1}


def _is_dot(quals):
    """A Triton matmul by any path to it (`tl.dot`, `tl.core.dot`, `triton.language.standard.dot`)."""
    return any(q.startswith("triton.") and q.rsplit(".", 1)[-1] == "dot" for q in quals)


def _is_fp32(self, node):
    """Whether a dtype is fp32 on every path: every value its name has is fp32 (a module-level name bound twice has
    both), and it is no parameter (a launch may pass any dtype for a constexpr, whatever its default)."""
    if isinstance(node, ast.Name):
        scope = self.names.scope_of(node)
        if scope is not None and any(isinstance(a, ast.arg) and a.arg == node.id for a in ast.walk(scope)):
            return False
    quals = self.names.qualify(node)
    return bool(quals) and quals <= FP32
# Tensor.type's names of the legacy tensor types ("torch.CharTensor", "torch.cuda.ShortTensor")
LEGACY = {"Char": "torch.int8", "Byte": "torch.uint8", "Short": "torch.int16", "Int": "torch.int32",
          "Long": "torch.int64", "Half": "torch.float16", "BFloat16": "torch.bfloat16", "Float": "torch.float32",
          "Double": "torch.float64", "Bool": "torch.bool"}


def text_dtypes(s):
    """The dtypes a text names where a dtype is expected: the text itself, a legacy tensor type's dtype, and what
    numpy reads in it ("i1", "b", "<u1": numpy.int8, numpy.uint8), resolved by numpy in the audit's own process."""
    if not isinstance(s, str):
        return set()
    out = {s}
    m = re.fullmatch(r"\s*torch\.(?:cuda\.)?(\w+)Tensor\s*", s)
    if m and m.group(1) in LEGACY:
        out.add(LEGACY[m.group(1)])
    try:
        import numpy
        out.add(f"numpy.{numpy.dtype(s).name}")
    except Exception:       # not a dtype numpy knows, or no numpy
        pass
    return out


def _bound(target, value):
    """(name, value) for each name an assignment of `value` to `target` binds; the value None where the audit cannot
    pair it with the name (an unpacked call, a starred target, a loop's items)."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) and \
            not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)
        for k, e in enumerate(target.elts):
            yield from _bound(e.value if isinstance(e, ast.Starred) else e, value.elts[k] if paired else None)


def _values_of(name, scope):
    """Every value `name` gets in `scope`, None for a binding whose value the audit cannot pair with it (a parameter,
    a loop target, an unpacked call); `acc += ...` keeps the dtype, so it adds none."""
    out = [None for a in ast.walk(scope) if isinstance(a, ast.arg) and a.arg == name]
    for n in ast.walk(scope):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            targets, value = n.targets if isinstance(n, ast.Assign) else [n.target], n.value
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets, value = [n.target], None
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets, value = [n.optional_vars], None
        else:
            continue
        out += [v for t in targets for bound, v in _bound(t, value) if bound == name]
    return out


def _accumulates_in_fp32(self, value, seen):
    """Whether `value` (a tl.dot call, or the accumulator given to one) holds fp32: a dot's result takes its
    accumulator's dtype (`acc`, positional or by keyword), else its out_dtype (fp32 unless given); an accumulator is
    fp32 where every value its name gets in the function is (tl.zeros/tl.full of fp32, a cast to fp32, a dot's),
    and `acc += ...` keeps it. A parameter or any other expression: not traced, not fp32."""
    q = self.names.qualify
    if isinstance(value, ast.Call):
        kw = {k.arg: k.value for k in value.keywords}
        quals = q(value.func)
        if _is_dot(quals):
            acc = value.args[2] if len(value.args) > 2 else kw.get("acc")
            if acc is not None:
                return _accumulates_in_fp32(self, acc, seen)
            return "out_dtype" not in kw or _is_fp32(self, kw["out_dtype"])
        dtype = next((kw.get("dtype", value.args[DTYPE_AT[n]] if len(value.args) > DTYPE_AT[n] else None)
                      for n in quals if n in DTYPE_AT and n != "triton.language.cast"), None)
        if dtype is not None:
            return _is_fp32(self, dtype)
        if isinstance(value.func, ast.Attribute) and value.func.attr == "to" and value.args:
            return _is_fp32(self, value.args[0])
        return False
    if isinstance(value, ast.BinOp):        # `tl.zeros(..., tl.float32) + 1.0`: fp32 with fp32 or a Python number
        return all(isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) or
                   _accumulates_in_fp32(self, v, seen) for v in (value.left, value.right)) and \
            not all(isinstance(v, ast.Constant) for v in (value.left, value.right))
    if isinstance(value, ast.Name) and value.id not in seen:
        seen.add(value.id)
        scope = self.names.scope_of(value)
        given = _values_of(value.id, scope) if scope is not None else None
        return bool(given) and all(v is not None and _accumulates_in_fp32(self, v, seen) for v in given)
    return isinstance(value, ast.Name)      # a name met again: its other values decide


INTS = {f"triton.language.{t}" for t in ("int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                         "uint64")}


def _kernel_of(self, node):
    """The function `node` lies in, where it is a Triton kernel: decorated by Triton (`@triton.jit`,
    `@triton.autotune(...)`) or given to a Triton call anywhere in the file (`k = triton.jit(_k)`)."""
    f = self.parent.get(node)
    while f is not None and not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
        f = self.parent.get(f)
    if f is None:
        return None
    q = self.names.qualify
    if any(n.startswith("triton.") for d in f.decorator_list for n in q(d.func if isinstance(d, ast.Call) else d)):
        return f
    wrapped = any(isinstance(c, ast.Call) and any(n.startswith("triton.") for n in q(c.func)) and
                  any(isinstance(a, ast.Name) and a.id == f.name for a in c.args) for c in ast.walk(self.tree))
    return f if wrapped else None


def _names(target):
    """The names an assignment target binds (tuples unpacked)."""
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _carried(loop):
    """The names a loop carries from one iteration to the next: augmented, assigned from themselves, or read in a
    statement before the first that assigns them."""
    stmts = [n for n in ast.walk(loop) if isinstance(n, ast.stmt) and n is not loop]
    first, out = {}, set()
    for n in stmts:
        if isinstance(n, ast.AugAssign):
            out.update(_names(n.target))
        elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            read = {v.id for v in ast.walk(n.value) if isinstance(v, ast.Name)}
            for name in (x for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for x in _names(t)):
                first[name] = min(first.get(name, n.lineno), n.lineno)
                if name in read:
                    out.add(name)
    for n in stmts:
        for v in ast.walk(n):
            if isinstance(v, ast.Name) and isinstance(v.ctx, ast.Load) and v.id in first and n.lineno < first[v.id]:
                out.add(v.id)
    return out


def _unsure_dtype(self, value):
    """Whether a value sets a dtype that is neither fp32 (where no launch can change it) nor an integer one: a cast
    or a tensor made in fp16, bf16, a dtype named by text or taken from a pointer (`p.dtype.element_ty`)."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    quals = self.names.qualify(f)
    if name in ("to", "astype") and value.args:
        dtypes = value.args[:1]
    elif quals & set(DTYPE_AT):
        at = min(DTYPE_AT[n] for n in quals if n in DTYPE_AT)
        dtypes = [k.value for k in value.keywords if k.arg == "dtype"] + value.args[at:at + 1]
    elif isinstance(f, ast.Name):       # a kernel's helper of the solution's own: any cast in it
        helper = next((d for d in ast.walk(self.tree) if isinstance(d, ast.FunctionDef) and d.name == f.id and
                       _kernel_of(self, d.body[0]) is d), None)
        return helper is not None and any(_unsure_dtype(self, c) for c in ast.walk(helper)
                                          if isinstance(c, ast.Call) and c is not value and not (
                                              isinstance(c.func, ast.Name) and c.func.id == f.id))
    else:
        return False
    return any(not _is_fp32(self, d) and not (self.names.qualify(d) and self.names.qualify(d) <= INTS) for d in dtypes)


def _pointer(self, node, scope, varying):
    """A pointer expression that stays the same across a loop's iterations (`varying`: the names the loop assigns),
    a name replaced by its one value in the kernel (`p = c_ptr + r` then `tl.store(p)`); None where it moves."""
    if isinstance(node, ast.Name) and node.id not in varying:
        given = _values_of(node.id, scope)
        if len(given) == 1 and given[0] is not None:
            node = given[0]
    return None if {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & varying else ast.dump(node)


def check_loop(self, loop):
    """In a Triton kernel, a sum carried across a loop's iterations in a dtype that is not sure to be fp32 (a variable
    made or cast to fp16 or bf16, or to a dtype named by text or taken from a pointer, anywhere in the kernel:
    `acc = t.to(tl.float16)`, `acc += x.to(tl.bfloat16)`), or through memory (a store in the loop to a pointer it
    loads from, an atomic add in the loop), whose dtype the host decides where the audit cannot see it."""
    scope = _kernel_of(self, loop)
    if scope is None:
        return
    q = self.names.qualify
    for name in sorted(_carried(loop)):
        values = _values_of(name, scope)
        values += [n.value for n in ast.walk(loop) if isinstance(n, ast.AugAssign) and name in _names(n.target)]
        if any(_unsure_dtype(self, v) for v in values if v is not None):
            self.add(loop, "narrow-numerics", f"`{name}` is summed across the loop in a dtype that may be 16 bits "
                                              f"(fp16/bf16, or one named at run time): the task's sums are fp32")
    varying = {x for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for x in _names(t)}
    calls = [n for n in ast.walk(loop) if isinstance(n, ast.Call) and n.args]
    loads = {_pointer(self, n.args[0], scope, varying) for n in calls if "triton.language.load" in q(n.func)} - {None}
    for n in calls:
        where = _pointer(self, n.args[0], scope, varying)
        if where is not None and ("triton.language.store" in q(n.func) and where in loads or
                                  any(x.startswith("triton.language.atomic_") for x in q(n.func))):
            self.add(n, "narrow-numerics", f"`{ast.unparse(n)[:60]}` sums through memory across the loop, in a "
                                           f"dtype the audit cannot see (the task's sums are fp32 in registers)")


def _summed_in_fp32(self, dot):
    """Whether the variable a dot's result is summed into (`acc += tl.dot(a, b)`, `acc = acc + tl.dot(a, b)`) holds
    fp32: the sum over K is the accumulation, whatever each dot's own dtype."""
    stmt = self.parent.get(dot)
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = self.parent.get(stmt)
    if isinstance(stmt, ast.AugAssign):
        target = stmt.target
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and \
            any(isinstance(n, ast.Name) and n.id == stmt.targets[0].id for n in ast.walk(stmt.value)):
        target = stmt.targets[0]
    else:
        return True
    return isinstance(target, ast.Name) and _accumulates_in_fp32(self, target, set())


def check(self, node):
    """Findings of the call `node` through `self`, the file's python_rules.Checker: int8 dtypes as arguments;
    rounding to a grid: floor/ceil/trunc with a scale, an integer cast of a quotient, clamps to a narrow format's
    range, division rounding modes applied to a scale."""
    f = node.func
    method = isinstance(f, ast.Attribute) and not self.names.qualify(f.value)   # a value's method, not a module's
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    library = any(q.split(".")[0] in ("torch", "numpy", "triton") for q in self.names.qualify(f))
    operand = f.value if method else node.args[0] if node.args else None
    args = node.args if method else node.args[1:]
    values = node.args + [k.value for k in node.keywords]
    kw_dtype = [k.value for k in node.keywords if k.arg == "dtype"]
    outer = self.parent.get(node)     # the result scaled back: `r * s`, `r.mul(s)`, `torch.div(r, s)`,
    for _ in range(4):                # also after casts back: `r.float() * s`, `r.to(dtype).mul(s)`
        if not isinstance(outer, (ast.Attribute, ast.Call)) or scaling(outer):
            break
        outer = self.parent.get(outer)
    scaled_result = outer is not None and scaling(outer)
    typed = name in ("to", "type", "astype", "view", "dtype")
    numpy = any(q.split(".")[0] == "numpy" for q in self.names.qualify(f))

    def dtypes(a):
        return self.names.qualify(a) | (text_dtypes(const_str(a)) if typed or numpy or a in kw_dtype else set())
    for a in values:
        dtype = dtypes(a) & set(arithmetic.NARROW_DTYPES)
        if dtype:
            self.add(node, "narrow-numerics", f"`{ast.unparse(node)[:60]}` uses the dtype `{min(dtype, key=len)}`, "
                                              f"which {rules.phrase('narrow-numerics')}")
    if name == "type" and method and values and not all(self.names.qualify(a) or const_str(a) for a in values):
        # Tensor.type takes a type's name as text: one built at run time hides the dtype ("torch.CharTensor")
        self.add(node, "dynamic-name", f"`{ast.unparse(node)[:60]}` casts to a type named at run time")
    quals = self.names.qualify(f)
    backend = next((k.value for k in node.keywords if k.arg == "backend"), None)
    if "torch.compile" in quals and backend is not None and const_str(backend) not in rules.COMPILE_BACKENDS:
        self.add(node, "foreign-code", f"`{ast.unparse(node)[:60]}`: a backend of the solution's own rewrites the "
                                       f"traced graph by names the audit cannot follow")
    if "torch.compile" in quals and any(k.arg in ("options", None) for k in node.keywords):
        self.add(node, "foreign-code", f"`{ast.unparse(node)[:60]}`: options set the compiler's configuration "
                                       f"(compilers it runs, folders it writes) by text the audit does not read")
    if quals & {"triton.language.dtype", "torch.dtype"} and not all(const_str(a) for a in values):
        self.add(node, "dynamic-name", f"`{ast.unparse(node)[:60]}` makes a dtype from a name built at run time")
    if _is_dot(quals) and not (_accumulates_in_fp32(self, node, set()) and _summed_in_fp32(self, node)):
        self.add(node, "narrow-numerics", f"`{ast.unparse(node)[:60]}` accumulates in less than fp32 (or in an "
                                          f"accumulator the audit cannot trace to an fp32 one), which "
                                          f"{rules.phrase('narrow-numerics')}")
    if name == "view" and any(dtypes(a) & set(arithmetic.INT_DTYPES) for a in values):
        self.add(node, "narrow-numerics", f"`{ast.unparse(node)[:60]}` reinterprets a tensor's bits as integers "
                                          f"(bit masks round to a coarse grid), which "
                                          f"{rules.phrase('narrow-numerics')}")
    if not (method or library):
        return
    shown = f"`{ast.unparse(node)[:60]}`"
    grid = f"rounds to a coarse grid (quantize/dequantize), which {rules.phrase('narrow-numerics')}"
    if name in arithmetic.FLOORS and operand is not None and \
            (scaled_result or any(map(scaling, ast.walk(operand)))):
        self.add(node, "narrow-numerics", f"{shown} with a scale {grid}")
    elif name.startswith(("trunc", "fix")) and operand is not None:     # no index needs them, scale or not
        self.add(node, "narrow-numerics", f"{shown} truncates a tensor to integers: {grid}")
    int_cast = name in arithmetic.INT_CASTS and not values or name in ("to", "type", "astype") and any(
        dtypes(a) & set(arithmetic.INT_DTYPES) for a in values)
    if method and int_cast and (any(scaling(n, (ast.Div,)) for n in ast.walk(f.value)) or
                                scaled_result and any(scaling(n) for n in ast.walk(f.value))):
        self.add(node, "narrow-numerics", f"{shown}, an integer cast of a quotient, {grid}")
    elif method and (name in ("int", "short") and not values or name in ("to", "type", "astype") and any(
            dtypes(a) & set(arithmetic.ROUNDING_CASTS) for a in values)):
        # the quotient may be lines away; indices need int64 only
        self.add(node, "narrow-numerics", f"{shown}, a cast to a 16- or 32-bit integer type, {grid}")
    if any(k.arg == "rounding_mode" and const_str(k.value) in ("floor", "trunc") for k in node.keywords) \
            and scaled_result:
        self.add(node, "narrow-numerics", f"{shown}, a rounded division scaled back, {grid}")
    if name in arithmetic.CLAMPS:
        keys = {k.arg: number(k.value) for k in node.keywords}
        lo = number(args[0]) if args else keys.get("min", keys.get("a_min"))
        hi = number(args[1]) if len(args) > 1 else keys.get("max", keys.get("a_max"))
        if (lo, hi) in arithmetic.NARROW_RANGES or (lo is None or hi is None) and \
                {abs(b) for b in (lo, hi) if b is not None} & set(arithmetic.NARROW_LIMITS):
            self.add(node, "narrow-numerics", f"{shown} clamps to a narrow format's range (quantize/dequantize), "
                                              f"which {rules.phrase('narrow-numerics')}")
