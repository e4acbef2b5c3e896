"""audit.py's C/C++/CUDA checks, by text: line splices joined, `//` and `/* */` comments blanked (string literals
kept, so PTX inside `asm("...")` is read), then the rules' regexes (rules.CPP_RULES) and the narrow-numerics rule's
arithmetic, read from calls' arguments (harness/audit/cpp_numerics.py: harness/audit/numerics.py's checks for C++).
Includes are followed: every file of the solution an #include may name is audited whatever its suffix, one outside it is
a finding. solution.yml's text is read by the same rules (a `-DX=fopen` macro)."""
import os
import re
import shutil
import subprocess

from harness.audit import files, patterns, rules
from harness.audit.cpp_numerics import narrow_calls
from harness.load import tree
from harness.load.solution import SolutionError, describe

INCLUDE = re.compile(r"(?m)^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*(.*)$")
TRIGRAPHS = dict(zip("=/'()!<>-", "#\\^[]|{}~"))     # `??=` is `#`: C, and C++ before C++17 (-std=c++14)
DIGRAPHS = {"%:%:": "##  ", "%:": "# ", "<:": "[ ", ":>": " ]", "<%": "{ ", "%>": " }"}    # same length: lines kept


def _phase1(text, trigraphs=True):
    """(chars, lines): the text as the preprocessor's first phase reads it, each character with its line: a leading
    byte order mark dropped, `\\r\\n` and a lone `\\r` one line end, trigraphs replaced (C's ISO modes; not C++17's,
    which torch's headers need: scan_cpp reads both), form feed and vertical tab blanks (`#\\finclude` is
    `# include`)."""
    chars, lines = [], []
    i, line, n = (1 if text.startswith("\ufeff") else 0), 1, len(text)
    while i < n:
        c = text[i]
        if trigraphs and c == "?" and text.startswith("??", i) and i + 2 < n and text[i + 2] in TRIGRAPHS:
            chars.append(TRIGRAPHS[text[i + 2]])
            lines.append(line)
            i += 3
            continue
        if c == "\r":
            c = "\n"
            i += 1 if text.startswith("\r\n", i) else 0
        chars.append(" " if c in "\f\v" else c)
        lines.append(line)
        line += c == "\n"
        i += 1
    return chars, lines


def strip_cpp(text, trigraphs=True):
    """(code, line_of, comments): the text as the compiler reads it (harness/audit/cpp.py's _phase1: BOM, line ends,
    trigraphs where asked, blanks), line splices joined, comments blanked (string literals kept), digraphs outside
    literals spelled as their tokens (`%:include` is `# include`), the original line of every character of code, and
    (line, text) of every comment. Every C++ scan reads this text, with trigraphs and without (scan_cpp).

    A `//` comment ends at the first splice as well as at the newline, so the audit never takes for a comment what
    a compiler might read as code; a `/* */` comment is blanks, its line ends too (one space to the compiler: a
    directive may span it)."""
    return _strip(text, trigraphs)[:3]


def _strip(text, trigraphs):
    """strip_cpp's (code, line_of, comments), then the spliced text before comments and digraphs and the positions
    in it of every comment's characters (compiler_disagrees compares them with the compiler's)."""
    src, src_line = _phase1(text, trigraphs)
    chars, line_of, splice = [], [], set()
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            j = i + 1
            while j < n and src[j] in " \t":
                j += 1
            if j < n and src[j] == "\n":
                i = j + 1
                splice.add(len(chars))
                continue
        chars.append(c)
        line_of.append(src_line[i])
        i += 1
    spliced, blanked = "".join(chars), set()
    code, comments = chars, []
    i, n, prefix = 0, len(code), (-1, "")
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
            blanked.update(range(i, j))
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
                code[k] = " "
            blanked.update(range(i, end))
            i = end
        elif c == "<" and _header_name_at(code, i):
            # a header name (`#include <x/*y>`, `__has_include(<none/*>)`) holds no comment to the compiler
            j = i + 1
            while j < n and code[j] not in ">\n":
                j += 1
            i = j + 1 if j < n and code[j] == ">" else i + 1
        elif c == '"':
            if prefix == (i, "raw"):      # R"d(...)d" right after its prefix, an identifier read whole
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
        elif _ident(c):
            # an identifier, whole (`$` and every non-ASCII character in it, as g++ reads them): its digits start no
            # number, and a prefix (`L'a"'`, `u8R"(`) is read before the literal it opens
            j = i + 1
            while j < n and (_ident(code[j]) or code[j].isdigit()):
                j += 1
            prefix = (j, "raw" if "".join(code[i:j]) in RAW_PREFIXES else "")
            i = j
        elif c.isdigit() or (c == "." and nxt.isdigit()):
            # a preprocessing number, whole, as C++ reads one: digit separators (`1'000`, `.1'x`) and exponent
            # signs inside it, so that a `'` after it opens a character literal
            j = i + 1
            while j < n:
                d = code[j]
                if d in "eEpP" and j + 1 < n and code[j + 1] in "+-":
                    j += 2
                elif d.isdigit() or d == "." or _ident(d):
                    j += 1
                elif d == "'" and j + 1 < n and (code[j + 1].isdigit() or _ident(code[j + 1])):
                    j += 2
                else:
                    break
            i = j
        elif c == "'":
            j = i + 1
            while j < n and code[j] not in "'\n":
                j += 2 if code[j] == "\\" else 1
            i = j + 1
        else:
            pair = "".join(code[i:i + 4])
            digraph = next((d for d in DIGRAPHS if pair.startswith(d)), None)
            if digraph == "<:" and pair[2:3] == ":" and pair[3:4] not in (":", ">"):
                digraph = None                      # C++11: `<::` not followed by `:` or `>` is `<` `::`
            if digraph:
                code[i:i + len(digraph)] = DIGRAPHS[digraph]
            i += len(digraph) if digraph else 1
    return "".join(code), line_of, comments, spliced, blanked


def _ident(c):
    return c.isalpha() or c in "_$" or ord(c) > 127


RAW_PREFIXES = {"R", "u8R", "uR", "UR", "LR"}
_HEADER_DIRECTIVE = re.compile(r"(?:#|%:)[ \t]*(?:include_next|include|import|embed)[ \t]*$")
_HEADER_OPERATOR = re.compile(r"__has_(?:include_next|include|embed)[ \t]*\([ \t]*$")


def _header_name_at(code, i):
    """Whether the `<` at position i of `code` opens a header name: right after `#include` (`_next`, `#import`,
    `#embed`) at a line's start, or inside `__has_include(` (`_next`, `__has_embed(`)."""
    k = i
    while k > 0 and code[k - 1] != "\n":
        k -= 1
    before = "".join(code[k:i])
    return bool(_HEADER_DIRECTIVE.fullmatch(before.lstrip(" \t")) or _HEADER_OPERATOR.search(before))


def scan_cpp(text, rules):
    """([(line, rule, reason, match)], comments, includes): rule matches over C/C++ text; includes are
    (line, kind, name) with kind '"', '<' or '' (computed). Read with and without trigraphs (a C build in an ISO mode
    has them, C++17 has none: what either hides in a comment the other reads), the text rules also over adjacent
    string literals joined (`"op" "en"` is `"open"`, as the compiler joins them); the comments are C++17's."""
    hits, includes, comments = [], [], None
    for trigraphs in (False, True):
        code, line_of, found = strip_cpp(text, trigraphs)
        comments = found if comments is None else comments
        for view in (code, join_literals(code)):
            h, i = _scan_view(view, line_of, rules, includes=view is code)
            hits += [x for x in h if x not in hits]
            includes += [x for x in i if x not in includes]
    return hits, comments, includes


def compiler_disagrees(text):
    """Why the compiler reads code where the audit's C++17 reading sees a comment (so the rules never read it), or
    None where it does not or no compiler is there (nothing is built without one). Asked with `-fpreprocessed`, which
    removes comments and nothing else (no macro, no include), given the text after the first phases (splices
    joined), so that both read one stream, line by line: each line's code to the compiler (blanks aside) must be the
    audit's code on that line or its start (the audit may read more as code: a `//` comment it ends at a splice)."""
    cxx = shutil.which(os.environ.get("CXX") or "c++")
    if cxx is None:
        return None
    _, _, _, spliced, blanked = _strip(text, trigraphs=False)
    # Every other character as an ASCII letter: g++ reads one in code as an identifier's (or refuses it), as the
    # audit does, and writes it back as a UCN.
    spliced = re.sub(r"[^\x00-\x7f]", "a", spliced)
    if _LINE_DIRECTIVE.search(spliced):
        return "a line directive (`#line`, `# N \"file\"`) renumbers the lines the compiler reports"
    try:
        p = subprocess.run([cxx, "-x", "c++", "-std=c++17", "-fpreprocessed", "-dD", "-E", "-w", "-"],
                           input=spliced.encode(), capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the compiler's preprocessor could not read it ({e})"
    if p.returncode != 0:
        why = next((ln for ln in p.stderr.decode("utf-8", "replace").splitlines() if "error" in ln), "")
        return f"the compiler's preprocessor refused it: {why.strip()[:160]}"
    ours = "".join("\n" if c == "\n" else " " if i in blanked else c for i, c in enumerate(spliced)).split("\n")
    line = 1
    for row in p.stdout.decode("ascii", "replace").split("\n"):
        m = _MARKER.match(row)
        if m:
            line = int(m.group(1))
            continue
        theirs, mine = "".join(row.split()), "".join(ours[line - 1].split()) if line <= len(ours) else ""
        # The same code, or its start (the audit may read more as code: a `//` comment it ends at a splice; `#pragma
        # once`, which the compiler drops from a main file); anything else is text the audit did not read as code.
        if not mine.startswith(theirs):
            return (f"the compiler reads code on line {line} where the audit reads a comment (`{theirs[:60]}`): its "
                    f"comments and literals are read otherwise than the compiler reads them")
        line += 1
    return None


_LINE_DIRECTIVE = re.compile(r"(?m)^[ \t]*#[ \t]*(line\b|\d)")
_MARKER = re.compile(r'# (\d+) "<stdin>"(?: \d+)*$')


def join_literals(code):
    """`code` with each run of adjacent string literals made one (`"op" "en"` -> `"open"` and blanks after it, so
    that every position keeps its line)."""
    out, i, n = list(code), 0, len(code)
    while i < n:
        m = _LITERAL_RUN.match(code, i)
        if m is None:
            i += 1
            continue
        parts = _ONE_LITERAL.findall(m.group(0))
        if len(parts) > 1:
            joined = '"' + "".join(parts) + '"'
            out[i:m.end()] = joined + " " * (m.end() - i - len(joined))
        i = m.end()
    return "".join(out)


_ONE_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_LITERAL_RUN = re.compile(r'"(?:[^"\\\n]|\\.)*"(?:\s*(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")+')


def _scan_view(code, line_of, rules, includes=True):
    hits, found = [], []

    def at(pos):
        return line_of[pos] if pos < len(line_of) else (line_of[-1] if line_of else 1)

    for m in INCLUDE.finditer(code) if includes else ():
        directive, arg = m.group(1), m.group(2).strip()
        line = at(m.start())
        q = re.match(r'"([^"]*)"|<([^>]*)>', arg)
        if directive == "embed":
            hits.append((line, "file-io", "embeds a file at build time", arg))
        if q is None:
            hits.append((line, "dynamic-name", f"#{directive} of a computed name `{arg[:40]}`", arg))
            continue
        name = q.group(1) if q.group(1) is not None else q.group(2)
        found.append((line, '"' if q.group(1) is not None else "<", name))
        for rule, kind, rx, reason in rules:
            if kind == "include" and rx.search(name):
                hits.append((line, rule, f"{reason} <{name}>", name))
    for rule, kind, rx, reason in rules:
        if kind == "text":
            for m in rx.finditer(code):
                hits.append((at(m.start()), rule, f"{reason}: `{m.group(0).strip()[:40]}`", m.group(0)))
    for pos, reason, text in narrow_calls(code):
        hits.append((at(pos), "narrow-numerics", reason, text))
    return hits, found


_STRING_RULES = [r for r in rules.CPP_RULES if r[2] is not patterns.NARROW_TEXT]   # NARROW_TEXT: every string already


def scan_string(s):
    """The C++ rules' hits in a Python string constant that looks like C/C++ or PTX source; [] otherwise."""
    if ";" in s or "{" in s or "%>" in s or "??>" in s or re.search(r"(#|%:|\?\?=)\s*(include|define)", s):
        return scan_cpp(s, _STRING_RULES)[0]
    return []


def audit_build_files(solution, yml, cpp):
    """The rules over every YAML file's text; the manifest, the one file loader.describe reads (a folder's top-level
    `solution.yml`, no other YAML file), adds its sources to `cpp` and its extension's name to `solution.extensions`
    (what the loader builds and the solution may import). Returns the include folders."""
    include_dirs = [solution.base]
    manifest = os.path.join(solution.path, "solution.yml") if solution.path == solution.base else None
    for f in yml:
        data = solution.read(f)
        if data is None:
            continue
        text = data.decode("utf-8", "replace")
        unit = solution.unit_for(f, text)
        code, unit.comments = files.yaml_comments(text)
        for line, rule, reason, _ in scan_cpp(code, rules.CPP_RULES)[0]:
            unit.add(line, rule, f"build setting {reason}")
        if f == manifest:
            dirs, ext = files.check_manifest(unit, text, solution.base, cpp)
            include_dirs += dirs
            if ext and ext == _loaders_extension(solution.path):
                solution.extensions.add(ext)
    return include_dirs


def _loaders_extension(path):
    """The extension the loader would build for the solution at `path` (None where it refuses the solution)."""
    try:
        return describe(path).manifest.get("extension")
    except SolutionError:
        return None


def _included(everything, name):
    """The files among `everything` (absolute) that an #include of `name` may name through any include folder
    (`-isystem`, `-iquote`, nvcc's own, which the audit does not model): those whose path ends with it."""
    parts = [p for p in os.path.normpath(name.replace("\\", "/")).split(os.sep) if p not in ("", ".")]
    while parts and parts[0] == "..":
        parts.pop(0)
    tail = os.sep + os.path.join(*parts) if parts else None
    return [f for f in everything if tail and f.endswith(tail)]


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
        differs = compiler_disagrees(text)      # every file as C++: the build's compiler (g++) reads a `.c` so
        if differs:
            unit.add(1, "unaudited-file", differs)
        for line, kind, name in includes:
            found = files.resolve_include(unit, line, kind, name, os.path.dirname(f), include_dirs, solution.base)
            if everything is None and solution.path == solution.base:
                everything = tree.walk(solution.base).files     # hidden folders and documentation included
            queue += [g for g in [found] + _included(everything or [], name) if g and g not in done]
