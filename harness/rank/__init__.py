"""A rank's process: the solution's side of the protocol, its in-process checks and the precision census."""
