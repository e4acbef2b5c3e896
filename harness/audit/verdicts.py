"""What a finding of each rule of harness/audit/rules.py's table does at the gate: it fails it (FAILS, and why) or
it is a review note (LOOK, and what a reviewer checks). Every rule is in exactly one of the two."""
from harness.audit.rules import RULES

# What a finding of each rule does at the gate. FAILS: the rule fails the gate, and why (a rule the audit is the
# only check of, whose construct no honest solution needs). Every other rule's finding is a review note: the runtime
# checks stand behind what the construct could do, and honest decoders use it; LOOK says what a reviewer checks.
FAILS = {
    "file-io": "the task's own rule (spec.RULES['file-io']), and the audit is its check",
    "unaudited-file": "a compiled module, bytecode unlike its source or a source that does not parse is code the "
                      "file-io rule is never checked on; the harness builds a solution's sources, so none needs one",
}
LOOK = {
    "network": "what the connection reaches (a group has a network namespace of its own on the CPU and at world 1)",
    "process": "that every thread or process ends or waits idle within the call (the runtime fails threads and "
               "processes left running, a kept pool's idle workers aside)",
    "environment": "that no setting of the environment changes the decode (a rank's environment is the platform's)",
    "foreign-code": "what the loaded or generated code does (the sandbox still holds it)",
    "monkeypatch": "what is changed, and that it is put back (the runtime compares torch's functions after each call)",
    "state": "that what is kept is weights, modules or workspaces, never an output (every timed call gets fresh "
             "latents)",
    "harness-import": "why the solution needs the harness (the judge trusts nothing a rank says)",
    "introspection": "what is read of the interpreter (the judge runs in another process)",
    "dynamic-name": "which names are built (the runtime checks hold whatever is called)",
    "narrow-numerics": "the task's numerics rule, a rule for the reviewers (the precision census reads what prepare "
                       "returns; every call is checked against the fp32 decode)",
    "private-name": "that the private name does what its public form would",
    "data-file": "what the file holds and who reads it",
    "allowance": "the allowance comment's form",
}
assert set(FAILS) | set(LOOK) == set(RULES) and not set(FAILS) & set(LOOK)
