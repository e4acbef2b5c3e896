"""audit.py's C/C++/CUDA checks, by text: line splices joined, `//` and `/* */` comments blanked (string literals
kept, so PTX inside `asm("...")` is read), then the rules' regexes (rules.CPP_RULES) and the narrow-numerics rule's
arithmetic, read from calls' arguments (`narrow_calls`: harness/numerics.py's checks for C++). Includes are followed:
every file of the solution an #include may name is audited whatever its suffix, one outside it is a finding.
solution.yml's text is read by the same rules (a `-DX=fopen` macro)."""
import os
import re

from harness import files, rules

INCLUDE = re.compile(r"(?m)^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*(.*)$")


def strip_cpp(text):
    """(code, line_of, comments): the text with line splices joined and comments blanked (string literals kept),
    the original line of every character of code, and (line, text) of every comment.

    A `//` comment ends at the first splice as well as at the newline, so the audit never takes for a comment what
    a compiler might read as code."""
    chars, line_of, splice = [], [], set()
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "\r" and j + 1 < n and text[j + 1] == "\n":
                j += 1
            if j < n and text[j] == "\n":
                line += 1
                i = j + 1
                splice.add(len(chars))
                continue
        chars.append(c)
        line_of.append(line)
        if c == "\n":
            line += 1
        i += 1
    code, comments = chars, []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        nxt = code[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = i + 2
            while j < n and code[j] != "\n" and j not in splice:
                j += 1
            comments.append((line_of[i], "".join(code[i:j])))
            for k in range(i, j):
                code[k] = " "
            i = j
        elif c == "/" and nxt == "*":
            j = i + 2
            while j < n and not (code[j] == "*" and j + 1 < n and code[j + 1] == "/"):
                j += 1
            end = min(j + 2, n)
            start = i
            for k in range(i, end + 1):      # one comment entry per line it covers
                if k == end or code[k] == "\n":
                    comments.append((line_of[start], "".join(code[start:k])))
                    start = k + 1
            for k in range(i, end):
                if code[k] != "\n":
                    code[k] = " "
            i = end
        elif c == '"':
            raw = re.search(r"(?:^|[^\w])(?:u8|u|U|L)?R$", "".join(code[max(0, i - 5):i]))
            if raw:
                k = i + 1
                while k < n and k - i <= 17 and code[k] not in "(\n":
                    k += 1
                delim = ")" + "".join(code[i + 1:k]) + '"'
                end = "".join(code).find(delim, k)
                i = n if end < 0 else end + len(delim)
            else:
                j = i + 1
                while j < n and code[j] not in '"\n':
                    j += 2 if code[j] == "\\" else 1
                i = j + 1
        elif c == "'":
            prev = code[i - 1] if i else ""
            if prev.isalnum() and nxt.isalnum():     # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and code[j] not in "'\n":
                j += 2 if code[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return "".join(code), line_of, comments


def scan_cpp(text, rules):
    """([(line, rule, reason, match)], comments, includes): rule matches over C/C++ text; includes are
    (line, kind, name) with kind '"', '<' or '' (computed)."""
    code, line_of, comments = strip_cpp(text)
    hits, includes = [], []

    def at(pos):
        return line_of[pos] if pos < len(line_of) else (line_of[-1] if line_of else 1)

    for m in INCLUDE.finditer(code):
        directive, arg = m.group(1), m.group(2).strip()
        line = at(m.start())
        q = re.match(r'"([^"]*)"|<([^>]*)>', arg)
        if directive == "embed":
            hits.append((line, "file-io", "embeds a file at build time", arg))
        if q is None:
            hits.append((line, "dynamic-name", f"#{directive} of a computed name `{arg[:40]}`", arg))
            continue
        name = q.group(1) if q.group(1) is not None else q.group(2)
        includes.append((line, '"' if q.group(1) is not None else "<", name))
        for rule, kind, rx, reason in rules:
            if kind == "include" and rx.search(name):
                hits.append((line, rule, f"{reason} <{name}>", name))
    for rule, kind, rx, reason in rules:
        if kind == "text":
            for m in rx.finditer(code):
                hits.append((at(m.start()), rule, f"{reason}: `{m.group(0).strip()[:40]}`", m.group(0)))
    for pos, reason, text in narrow_calls(code):
        hits.append((at(pos), "narrow-numerics", reason, text))
    return hits, comments, includes


# ---------------------------------------------------------------------------------------------------------------
# The narrow-numerics rule's arithmetic in C/C++ (harness/numerics.py's for Python), where a regex alone cannot
# decide: floor/ceil with a scale, clamps to a narrow format's range (also as fminf(fmaxf(..))), casts of tensors to
# 16- or 32-bit integers or of quotients to any, views of their bits as integers, rounded divisions scaled back,
# the constants that round when added and subtracted. libtorch's tensor forms (`x.floor()`, `torch::floor(x)`) are
# judged as Python's are; the scalar forms (`floorf`, `std::floor`, also device code's) only where a scaled value is
# floored and scaled back (`floorf(x / s + 0.5f) * s`), not in index arithmetic (`(int)floorf(y * h)`,
# `std::ceil(n / 2.0)`), as Python's math.floor on numbers is not.

_CALL = re.compile(r"\b(floorf?|ceilf?|clamp(?:_min|_max)?_?|clip_?|to|toType|type|view|div_?|divide_?|"
                   r"true_divide_?|fminf?|fmaxf?|min|max|__hmin|__hmax)\s*(<[^<>()]*>\s*)?\(")
_MINS, _MAXES = ("fmin", "fminf", "min", "__hmin"), ("fmax", "fmaxf", "max", "__hmax")
_LITERAL = re.compile(r"([-+]?)\s*(0[xX][\da-fA-F']*\.?[\da-fA-F']*(?:[pP][-+]?\d+)?|"
                      r"(?:\d[\d']*\.?[\d']*|\.\d[\d']*)(?:[eE][-+]?\d+)?)[fFlLuU]*")
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(0[xX][\da-fA-F']*\.?[\da-fA-F']*[pP][-+]?\d+|(?:\d[\d']*\.[\d']*|\.\d[\d']*)"
                            r"(?:[eE][-+]?\d+)?|\d[\d']*[eE][-+]?\d+|0[xX]0*4[bB][04]00000\b|"
                            r"0[xX]0*433[08]0{12}\b)")
# The bit patterns of 2^23 and 1.5 x 2^23 as fp32 (0x4b000000, 0x4b400000) and of 2^52, 1.5 x 2^52 as fp64.
_ROUNDER_BITS = (0x4B000000, 0x4B400000, 0x4330000000000000, 0x4338000000000000)
_SCALES = re.compile(r"[\w)\].]\s*[*/](?![/*=])|\b(" + "|".join(rules.DIVIDES + rules.MULTIPLIES) + r")\s*\(")
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
    """The top-level comma-separated arguments of a call's text (None for text too long to be worth reading)."""
    if len(text) > 2000:
        return None
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
    for _ in range(64):
        j = _back(code, i)
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
        m = re.compile(r"\s*\)").match(code, i)
        if m:
            i = m.end()
            continue
        m = re.compile(r"\s*(?:\.|->)\s*(\w+)\s*(?:<[^<>()]*>\s*)?\(").match(code, i)
        if not m:
            break
        if m.group(1) in rules.DIVIDES + rules.MULTIPLIES:
            return True
        if m.end() - 1 not in close:
            return False
        i = close[m.end() - 1] + 1
    return bool(re.compile(r"\s*[*/](?![/*=])").match(code, i))


def _bounds(args):
    """(lo, hi, is_float) of a min/max pair's number literals, one of them in a call of the other kind:
    `fminf(fmaxf(v, -127.f), 127.f)`; None when not such a pair."""
    if args is None or len(args) != 2:
        return None
    for outer, inner in ((args[1], args[0]), (args[0], args[1])):
        value, is_float = _literal(outer)
        inner = re.sub(r"^(\w*\s*::\s*)+", "", inner.strip())      # std::max, ::fmaxf
        m = _CALL.match(inner)
        if value is None or not m or m.group(1) not in _MINS + _MAXES:
            continue
        for arg in _split(inner[m.end():inner.rfind(")")]) or ():
            v, f = _literal(arg)
            if v is not None:
                return m.group(1), value, v, is_float or f or m.group(1).startswith(("fm", "__h")) or \
                    "float" in (m.group(2) or "") or "double" in (m.group(2) or "")
    return None


def narrow_calls(code):
    """[(position, reason, text)] of the narrow-numerics rule's arithmetic in C/C++ text (comments blanked)."""
    grid = f"rounds to a coarse grid (quantize/dequantize), which {rules.phrase('narrow-numerics')}"
    found = []
    for m in _FLOAT_LITERAL.finditer(code):
        text = m.group(1).replace("'", "")
        try:
            value = int(text, 16) if re.fullmatch(r"0[xX][\da-fA-F]+", text) else \
                float.fromhex(text) if text[:2].lower() == "0x" else float(text)
        except ValueError:
            continue
        if value in rules.ROUNDERS or (isinstance(value, int) and value in _ROUNDER_BITS):
            found.append((m.start(), f"`{text}` is 2^23 or 2^52 (or 1.5 times it, or its bits), which added and "
                                      f"subtracted rounds to integers (quantize/dequantize), which "
                                      f"{rules.phrase('narrow-numerics')}", text))
    calls = list(_CALL.finditer(code))
    if not calls:
        return found
    close, opener, parent = _brackets(code)
    for m in calls:
        name, start, open_ = m.group(1), m.start(), m.end() - 1
        if open_ not in close:
            continue
        before = code[max(0, start - 40):start].rstrip()
        method = before.endswith((".", "->"))
        ns = re.search(r"(\w+)\s*::$", before)
        tensor = method or bool(ns and ns.group(1) in ("torch", "at"))
        args = _split(code[open_ + 1:close[open_]])
        dot = _back(code, start) - (2 if before.endswith("->") else 1)
        first = _receiver(code, dot, opener) if method else start
        operand = code[first:dot] if method else (args[0] if args else "")
        outer = parent.get(open_, -1)
        enclosing = re.search(r"(\w+)\s*$", code[max(0, outer - 40):outer]) if outer >= 0 else None
        scaled = _scaled_after(code, close[open_] + 1, close) or \
            bool(enclosing and enclosing.group(1) in rules.DIVIDES + rules.MULTIPLIES)
        shown = f"`{' '.join(code[first:close[open_] + 1].split())[:60]}`"
        if name.rstrip("f") in ("floor", "ceil"):
            if (tensor and (scaled or _SCALES.search(operand[:1000]))) or (scaled and _SCALES.search(operand[:1000])):
                found.append((start, f"{shown} with a scale {grid}", shown))
        elif name.startswith(("clamp", "clip")):
            values = (args if method else args[1:]) if args is not None else []
            lo = _literal(values[0])[0] if values else None
            hi = _literal(values[1])[0] if len(values) > 1 else None
            if name.startswith("clamp_max"):
                lo, hi = None, lo
            if (lo, hi) in rules.NARROW_RANGES or (lo is None or hi is None) and \
                    {abs(b) for b in (lo, hi) if b is not None} & set(rules.NARROW_LIMITS):
                found.append((start, f"{shown} clamps to a narrow format's range (quantize/dequantize), which "
                                     f"{rules.phrase('narrow-numerics')}", shown))
        elif name in _MINS + _MAXES:
            pair = _bounds(args)
            if pair and (pair[0] in _MAXES) == (name in _MINS) and pair[3]:
                lo, hi = (pair[2], pair[1]) if name in _MINS else (pair[1], pair[2])
                if (lo, hi) in rules.NARROW_RANGES:
                    found.append((start, f"{shown} clamps to a narrow format's range (quantize/dequantize), which "
                                         f"{rules.phrase('narrow-numerics')}", shown))
        elif method and name in ("to", "toType", "type", "view"):
            text = code[open_ + 1:close[open_]]
            if name == "view" and _INT_DTYPE.search(text):
                found.append((start, f"{shown} reinterprets a tensor's bits as integers (bit masks round to a "
                                     f"coarse grid), which {rules.phrase('narrow-numerics')}", shown))
            elif name != "view" and _ROUNDING_CAST.search(text):
                found.append((start, f"{shown}, a cast to a 16- or 32-bit integer type, {grid}", shown))
            elif name != "view" and _INT_DTYPE.search(text) and (
                    re.search(r"[\w)\]]\s*/(?![/*=])|\b(" + "|".join(rules.DIVIDES) + r")\s*\(", operand[:1000])
                    or scaled and _SCALES.search(operand[:1000])):
                found.append((start, f"{shown}, an integer cast of a quotient, {grid}", shown))
        elif name.startswith(("div", "divide", "true_divide")) and scaled and \
                re.search(r'"(floor|trunc)"', code[open_:close[open_]]):
            found.append((start, f"{shown}, a rounded division scaled back, {grid}", shown))
    return found


_STRING_RULES = [r for r in rules.CPP_RULES if r[2] is not rules.NARROW_TEXT]   # NARROW_TEXT: every string already


def scan_string(s):
    """The C++ rules' hits in a Python string constant that looks like C/C++ or PTX source; [] otherwise."""
    if ";" in s or "{" in s or "#include" in s or "#define" in s:
        return scan_cpp(s, _STRING_RULES)[0]
    return []


def audit_build_files(solution, yml, cpp):
    """The rules over every YAML file's text; solution.yml's sources join `cpp` and its extension's name
    `solution.extensions`. Returns the include folders."""
    include_dirs = [solution.base]
    for f in yml:
        data = solution.read(f)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        unit = solution.unit_for(f, text)
        code, unit.comments = files.yaml_comments(text)
        for line, rule, reason, _ in scan_cpp(code, rules.CPP_RULES)[0]:
            unit.add(line, rule, f"build setting {reason}")
        if os.path.basename(f) in ("solution.yml", "solution.yaml"):
            dirs, ext = files.check_manifest(unit, code, os.path.dirname(f), solution.base, cpp)
            include_dirs += dirs
            if ext:
                solution.extensions.add(ext)
    return include_dirs


def _included(everything, name):
    """The files among `everything` (absolute) that an #include of `name` may name through any include folder
    (`-isystem`, `-iquote`, nvcc's own, which the audit does not model): those whose path ends with it."""
    parts = [p for p in os.path.normpath(name.replace("\\", "/")).split(os.sep) if p not in ("", ".")]
    while parts and parts[0] == "..":
        parts.pop(0)
    tail = os.sep + os.path.join(*parts) if parts else None
    return [f for f in everything if tail and f.endswith(tail)]


def _every_file(base):
    """Every file under the solution's folder, hidden folders and documentation included, links not followed (they
    are findings of their own)."""
    out = []
    for top, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        out += [os.path.join(top, n) for n in names if not os.path.islink(os.path.join(top, n))]
    return out


def audit_sources(solution, cpp, include_dirs, other):
    """The rules over every C/C++/CUDA source and every solution file they include (removed from `other`), whatever
    its suffix: a `notes.txt` or `README.md` #included is C++ to the compiler, found through include folders the
    audit resolves (the source's own, solution.yml's -I) or any other (every file whose path ends with the name)."""
    queue, done, everything = list(cpp), set(), None
    while queue:
        f = queue.pop(0)
        if f in done:
            continue
        done.add(f)
        if f in other:
            other.remove(f)
        data = solution.read(f)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        unit = solution.unit_for(f, text)
        hits, unit.comments, includes = scan_cpp(text, rules.CPP_RULES + rules.CPP_ONLY_RULES)
        for line, rule, reason, _ in hits:
            unit.add(line, rule, reason)
        for line, kind, name in includes:
            found = files.resolve_include(unit, line, kind, name, os.path.dirname(f), include_dirs, solution.base)
            if everything is None and solution.path == solution.base:
                everything = _every_file(solution.base)
            queue += [g for g in [found] + _included(everything or [], name) if g and g not in done]
