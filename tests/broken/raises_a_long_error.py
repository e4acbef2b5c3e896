"""Broken (not a cheat): run raises an error whose message is megabytes long, as a compiler's can be (quoting the
generated source); its traceback must still arrive as this solution's runtime error."""


def run(z, weights, rank, world, pg, out):
    raise RuntimeError("compile failed:\n" + "    generated line of source\n" * (1 << 16))
