"""Cheat (the build step): its extension's global constructor, run where the judge builds it, looks for the judge's
secrets and leaves a helper process running (escape.cpp); the decode itself is the reference's."""
import reference
import wan_escape_ext  # noqa: F401


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
