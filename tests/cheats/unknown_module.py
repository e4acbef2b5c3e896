"""Cheat (code through a module the audit does not know): `pydoc.locate` returns any object by its dotted name, here
builtins' exec, which then runs text that rounds the weights to an int8 grid inside run(). The audit knows a list of
modules (module_names.KNOWN_MODULES and those its rules name); any other import is foreign code."""
import pydoc

import reference
import spec

_run_text = pydoc.locate("built" + "ins.ex" + "ec")
CODE = ("import torch\n"
        "s = w.float().abs().amax(dim=tuple(range(1, w.dim())), keepdim=True).clamp_min(1e-12) / 127\n"
        "w = ((w.float() / s).ro" "und().clamp(-127, 127) * s).to(torch.bfloat16)\n")


def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    names = [n for n, _ in spec.weight_list(spec.geometry_of(weights))]
    narrow = []
    for name, w in zip(names, weights):
        if name.startswith(("decoder.up_blocks.2.", "decoder.up_blocks.3.", "decoder.conv_out.")) and w.dim() >= 4:
            env = {"w": w}
            _run_text(CODE, env)
            w = env["w"]
        narrow.append(w)
    reference.run(z, narrow, rank, world, pg, out)
