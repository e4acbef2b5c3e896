"""The narrow-numerics rule's arithmetic in C/C++ (harness/audit/numerics.py's for Python), where a regex alone cannot
decide: floor/ceil with a scale, clamps to a narrow format's range (also as fminf(fmaxf(..))), casts of tensors to 16-
or 32-bit integers or of quotients to any, views of their bits as integers, rounded divisions scaled back, the constants
that round when added and subtracted. libtorch's tensor forms (`x.floor()`, `torch::floor(x)`) are judged as Python's
are; the scalar forms (`floorf`, `std::floor`, also device code's) only where a scaled value is floored and scaled back
(`floorf(x / s + 0.5f) * s`), not in index and size arithmetic (`(int)floorf(y * h)`, `std::ceil(n / 2.0)`,
`(int)std::ceil(n / 64.0) * 64`), as Python's math.floor on numbers is not."""
import re

from harness.audit import arithmetic, rules

_CALL = re.compile(r"\b((?:floor|ceil)[f_]?|clamp(?:_min|_max)?_?|clip_?|to|toType|type|view|div_?|divide_?|"
                   r"true_divide_?|fminf?|fmaxf?|min|max|__hmin|__hmax)\s*(<[^<>()]*>\s*)?\(")
_MINS, _MAXES = ("fmin", "fminf", "min", "__hmin"), ("fmax", "fmaxf", "max", "__hmax")
_LITERAL = re.compile(r"([-+]?)\s*(0[xX][\da-fA-F']*\.?[\da-fA-F']*(?:[pP][-+]?\d+)?|"
                      r"(?:\d[\d']*\.?[\d']*|\.\d[\d']*)(?:[eE][-+]?\d+)?)[fFlLuU]*")
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(0[xX][\da-fA-F']*\.?[\da-fA-F']*[pP][-+]?\d+|(?:\d[\d']*\.[\d']*|\.\d[\d']*)"
                            r"(?:[eE][-+]?\d+)?|\d[\d']*[eE][-+]?\d+|0[xX]0*4[bB][04]00000\b|"
                            r"0[xX]0*433[08]0{12}\b)")
# The bit patterns of 2^23 and 1.5 x 2^23 as fp32 (0x4b000000, 0x4b400000) and of 2^52, 1.5 x 2^52 as fp64.
_ROUNDER_BITS = (0x4B000000, 0x4B400000, 0x4330000000000000, 0x4338000000000000)
_SCALES = re.compile(r"[\w)\].]\s*[*/](?![/*=])|\b(" + "|".join(arithmetic.DIVIDES + arithmetic.MULTIPLIES) +
                     r")\s*\(")
_DIVIDES = re.compile(r"[\w)\]]\s*/(?![/*=])|\b(" + "|".join(arithmetic.DIVIDES) + r")\s*\(")
_CLOSING, _TIMES = re.compile(r"\s*\)"), re.compile(r"\s*[*/](?![/*=])")
_METHOD = re.compile(r"\s*(?:\.|->)\s*(\w+)\s*(?:<[^<>()]*>\s*)?\(")
_INT_CAST = re.compile(r"(\(\s*((un)?signed\s+)?(int|long|long\s+long|short|char|size_t|(__)?u?int(8|16|32|64)_t|index_t)"
                       r"\s*\)|static_cast\s*<[^<>]*\b(int|long|short|char|size_t|(__)?u?int(8|16|32|64)_t|index_t)\s*>\s*\()"
                       r"\s*(\w*\s*::\s*)*$")
_ARGS_CAP = 2000     # characters of a call's arguments read: numbers and dtypes are short, a longer call is not split
_ROUNDING_CAST = re.compile(r"\b(k|ScalarType\s*::\s*)(Int|Int32|Short|Int16)\b")
_INT_DTYPE = re.compile(r"\b(k|ScalarType\s*::\s*)(Int|Int32|Short|Int16|Long|Int64|UInt16|UInt32|UInt64)\b")


def _literal(text):
    """(value, is_float) of a C/C++ number literal (`-127`, `127.f`, `0x7f`, `(1e2)`); (None, False) otherwise."""
    t = text.strip()
    while t.startswith("(") and t.endswith(")"):
        t = t[1:-1].strip()
    m = _LITERAL.fullmatch(t)
    if not m or not any(c.isdigit() for c in m.group(2)):
        return None, False
    body = m.group(2).replace("'", "")
    hexa = body[:2].lower() == "0x"
    is_float = "." in body or ("p" in body.lower() if hexa else "e" in body.lower())
    try:
        value = float.fromhex(body) if hexa else float(body) if is_float else \
            int(body, 8) if re.fullmatch(r"0[0-7]+", body) else int(body)
    except ValueError:
        return None, False
    return (-value if m.group(1) == "-" else value), is_float


def _brackets(code):
    """(close, opener, parent): the matching `)`/`]` of every `(`/`[`, the reverse, and the bracket each opening one
    sits in (-1 at the top level)."""
    close, opener, parent, stack = {}, {}, {}, []
    for m in re.finditer(r"[()\[\]]", code):
        i = m.start()
        if code[i] in "([":
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        elif stack:
            j = stack.pop()
            close[j], opener[i] = i, j
    return close, opener, parent


def _split(text):
    """The top-level comma-separated arguments of a call's text."""
    args, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i])
            start = i + 1
    return args + [text[start:]] if text.strip() else []


def _back(code, i):
    while i > 0 and code[i - 1].isspace():
        i -= 1
    return i


def _receiver(code, dot, opener):
    """Where the expression a method is called on starts, which ends where `.`/`->` starts at `dot`:
    `torch::div(x, s)`, `(x / s)`, `t.abs()`, `w[i]`."""
    i = dot
    for _ in range(8):
        j = _back(code, i)
        if dot - j > 500:
            break
        if j and code[j - 1] in ")]" and j - 1 in opener:
            i = opener[j - 1]          # arguments or a subscript: what precedes them is part of the operand
            continue
        k = j
        while k and (code[k - 1].isalnum() or code[k - 1] == "_"):
            k -= 1
        if k == j:
            break
        i, j = k, _back(code, k)
        if code[j - 1:j] == ".":
            i = j - 1
        elif code[max(0, j - 2):j] in ("->", "::"):
            i = j - 2
        else:
            break
    return i


def _scaled_after(code, end, close):
    """Whether the value that ends before `end` is scaled back: `r * s`, `r / s`, `r.mul(s)`, also after further
    methods or closing parentheses (`(r).to(kFloat).mul(s)`)."""
    i = end
    for _ in range(6):
        m = _CLOSING.match(code, i)
        if m:
            i = m.end()
            continue
        m = _METHOD.match(code, i)
        if not m:
            break
        if m.group(1) in arithmetic.DIVIDES + arithmetic.MULTIPLIES:
            return True
        if m.end() - 1 not in close:
            return False
        i = close[m.end() - 1] + 1
    return bool(_TIMES.match(code, i))


def _bounds(name, args):
    """(lo, hi) of a clamp written as a min of a max (or a max of a min) of number literals in floating point:
    `fminf(fmaxf(v, -127.f), 127.f)`, `std::min(std::max(v, -128.0f), 127.0f)`; None otherwise (integer bounds:
    `min(max(i, 0), 15)` clamps an index)."""
    if args is None or len(args) != 2:
        return None
    others = _MAXES if name in _MINS else _MINS
    for outer, inner in ((args[1], args[0]), (args[0], args[1])):
        value, is_float = _literal(outer)
        inner = re.sub(r"^(\w*\s*::\s*)+", "", inner.strip())      # std::max, ::fmaxf
        m = _CALL.match(inner)
        if value is None or not m or m.group(1) not in others:
            continue
        for arg in _split(inner[m.end():inner.rfind(")")]):
            v, f = _literal(arg)
            if v is not None and (is_float or f or re.search(r"\b(fm|__h)|float|double|half|bfloat16",
                                                              name + m.group(0))):
                return (v, value) if name in _MINS else (value, v)
    return None


def _rounders(code):
    """[(position, reason, text)] of the literals that round when added and subtracted: 2^23 and 1.5 x 2^23 (fp32),
    2^52 and 1.5 x 2^52 (fp64), written as floats or as their bits (`__int_as_float(0x4b400000)`)."""
    found = []
    for m in _FLOAT_LITERAL.finditer(code):
        text = m.group(1).replace("'", "")
        try:
            value = int(text, 16) if re.fullmatch(r"0[xX][\da-fA-F]+", text) else \
                float.fromhex(text) if text[:2].lower() == "0x" else float(text)
        except ValueError:
            continue
        if value in arithmetic.ROUNDERS or (isinstance(value, int) and value in _ROUNDER_BITS):
            found.append((m.start(), f"`{text}` is 2^23 or 2^52 (or 1.5 times it, or its bits), which added and "
                                      f"subtracted rounds to integers (quantize/dequantize), which "
                                      f"{rules.phrase('narrow-numerics')}", text))
    return found


def narrow_calls(code):
    """[(position, reason, text)] of the narrow-numerics rule's arithmetic in C/C++ text (comments blanked)."""
    narrower = rules.phrase("narrow-numerics")
    grid = f"rounds to a coarse grid (quantize/dequantize), which {narrower}"
    found = _rounders(code)
    calls = list(_CALL.finditer(code))
    if not calls:
        return found
    close, opener, parent = _brackets(code)
    for m in calls:
        name, start, open_ = m.group(1), m.start(), m.end() - 1
        end = close.get(open_)
        if end is None:
            continue
        inside = code[open_ + 1:min(end, open_ + 1 + _ARGS_CAP)]
        args = _split(inside) if end - open_ <= _ARGS_CAP else None
        before = code[max(0, start - 40):start].rstrip()
        method = before.endswith((".", "->"))
        first = _receiver(code, _back(code, start) - (2 if before.endswith("->") else 1), opener) if method \
            else start
        operand = code[first:start][:1000] if method else (args[0] if args else "")
        shown = f"`{' '.join(code[first:min(end + 1, first + 200)].split())[:60]}`"

        def scaled():      # the result scaled back: `r * s`, `r.mul(s)`, `torch::mul(r, s)`
            outer = parent.get(open_, -1)
            enclosing = re.search(r"(\w+)\s*$", code[max(0, outer - 40):outer]) if outer >= 0 else None
            return _scaled_after(code, end + 1, close) or \
                bool(enclosing and enclosing.group(1) in arithmetic.DIVIDES + arithmetic.MULTIPLIES)

        if name.rstrip("f_") in ("floor", "ceil"):
            ns = re.search(r"(\w+)\s*::$", before)
            tensor = method or bool(ns and ns.group(1) in ("torch", "at"))     # libtorch's, not std::floor
            sized = not tensor and _INT_CAST.search(before)      # `(int)std::ceil(n / 64.0) * 64`: a size
            if _SCALES.search(operand) and (tensor or not sized and scaled()) or tensor and scaled():
                found.append((start, f"{shown} with a scale {grid}", shown))
        elif name.startswith(("clamp", "clip")):
            values = (args if method else args[1:]) if args else []
            lo = _literal(values[0])[0] if values else None
            hi = _literal(values[1])[0] if len(values) > 1 else None
            if name.startswith("clamp_max"):
                lo, hi = None, lo
            if (lo, hi) in arithmetic.NARROW_RANGES or (lo is None or hi is None) and \
                    {abs(b) for b in (lo, hi) if b is not None} & set(arithmetic.NARROW_LIMITS):
                found.append((start, f"{shown} clamps to a narrow format's range (quantize/dequantize), which "
                                     f"{narrower}", shown))
        elif name in _MINS + _MAXES:
            if _bounds(name, args) in arithmetic.NARROW_RANGES:
                found.append((start, f"{shown} clamps to a narrow format's range (quantize/dequantize), which "
                                     f"{narrower}", shown))
        elif method and name == "view":
            if _INT_DTYPE.search(inside):
                found.append((start, f"{shown} reinterprets a tensor's bits as integers (bit masks round to a "
                                     f"coarse grid), which {narrower}", shown))
        elif method and name in ("to", "toType", "type"):
            if _ROUNDING_CAST.search(inside):       # no index needs them: indices are int64
                found.append((start, f"{shown}, a cast to a 16- or 32-bit integer type, {grid}", shown))
            elif _INT_DTYPE.search(inside) and (_DIVIDES.search(operand) or _SCALES.search(operand) and scaled()):
                found.append((start, f"{shown}, an integer cast of a quotient, {grid}", shown))
        elif name.startswith(("div", "divide", "true_divide")):
            if re.search(r'"(floor|trunc)"', inside) and scaled():
                found.append((start, f"{shown}, a rounded division scaled back, {grid}", shown))
    return found
