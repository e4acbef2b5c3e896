"""The harness behind bench.py, ci.py, audit.py, bounds.py and loader.py, in subsystems (docs/layout.md): judge/ (the
judge's side of a run: groups of ranks, checks, bench's and the gate's plans), rank/ (a rank's process), isolation/
(what confines and caps a solution's processes), audit/ (the static rules), load/ (a solution's files, its loader and
build) and report/ (the console, JSON, HTML report, error maps, traces)."""
