"""The twins of the build cache (tests/cheats/shares_a_build): the same files but kern.inl, which ext.cpp includes;
the decode itself is the reference's. FLAVOUR says which kern.inl was built into the extension imported."""
import reference
import wan_twin_ext

FLAVOUR = wan_twin_ext.flavour()


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
