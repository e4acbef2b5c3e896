"""The judge: runs a solution's ranks, checks and times their calls, and plans bench's and the gate's runs."""
