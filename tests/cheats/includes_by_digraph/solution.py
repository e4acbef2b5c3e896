"""Cheat (an #include the audit's pattern did not see): ext.cpp includes notes.txt by the digraph `%:include`, which
the compiler reads as `#include`; notes.txt (documentation to the audit unless included) holds int8 code. The decode
itself is the reference's; FLAVOUR says which code the extension was built from."""
import reference
import wan_digraph_ext

FLAVOUR = wan_digraph_ext.flavour()


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
