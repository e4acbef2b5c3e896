"""The harness behind bench.py, ci.py, audit.py, bounds.py and loader.py: one job per module (see README, Layout)."""
