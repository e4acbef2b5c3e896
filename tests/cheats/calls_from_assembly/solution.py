"""Cheat (a libc function called from assembly through a register, ext.cpp): `system` runs a shell command in the
rank during the call; no call of `system(` is in the text, only `movabs $system` and `call *%rax`. Host assembly
(x86 registers, calls and jumps of any operand) is a finding."""
import wan_asm_ext

import reference


def run(z, weights, rank, world, pg, out):
    if wan_asm_ext.hidden("exit 0") != 0:
        raise RuntimeError("the shell did not run")
    reference.run(z, weights, rank, world, pg, out)
