"""Cheat (a gate that never ends): an honest decode beside slow.h, never compiled, one line that a regex of the audit
reads in time quadratic in its length (a -D value is scanned to the line's end from every `-D` on it). At the
2 MiB a source may have, the audit would run for hours; the gate's deadline fails it instead."""
from reference import run  # noqa: F401
