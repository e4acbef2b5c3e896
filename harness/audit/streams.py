"""audit.py's check of sys.stdout and sys.stderr: print's `file=` only (their `.write` and `.flush` are names of their
own in the rule table). As values they lead to their buffer, whose type opens files (`type(sys.stdout.buffer)(path)`:
io.FileIO in a rank, whose stdout is unbuffered)."""
import ast
import functools

STREAMS = {"sys.stdout", "sys.stderr"}


@functools.lru_cache(maxsize=64)
def _print_bound(tree):
    """Whether a file binds the name `print` anywhere (a def, an import, an assignment, a parameter): its `print` may
    be the solution's own, which could do anything with a stream."""
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == "print" or
               isinstance(n, ast.Name) and n.id == "print" and not isinstance(n.ctx, ast.Load) or
               isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == "print" or
               isinstance(n, ast.arg) and n.arg == "print" for n in ast.walk(tree))


def check(checker, node):
    """A finding of `checker` (python_rules.Checker) where `node` stands for a stream other than as the builtin
    print's `file=`."""
    if not checker.names.qualify(node) & STREAMS:
        return
    up, call = checker.parent.get(node), None
    if isinstance(up, ast.keyword) and up.arg == "file":
        call = checker.parent.get(up)
    if not (isinstance(call, ast.Call) and "builtins.print" in checker.names.qualify(call.func)) or \
            _print_bound(checker.tree):
        checker.add(node, "file-io", f"`{ast.unparse(node)[:40]}` as a value (not print's file=) reaches its "
                                     f"buffer, whose type opens files")
