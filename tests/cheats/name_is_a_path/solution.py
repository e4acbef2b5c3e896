"""Cheat (write where the judge writes): an honest decode whose solution.yml names it with a path. The judge names
files after a solution (its ranks' logs, its build folder): with this name the judge, unconfined, would write the
rank's output outside its run folder (into the data, or beside the solution for a later rank to read)."""
import reference


def run(z, weights, rank, world, pg, out):
    print("planted by the rank")
    reference.run(z, weights, rank, world, pg, out)
