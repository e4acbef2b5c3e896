"""The rank's own look at itself after each call: which functions of torch, time and builtins were replaced, which
torch function or dispatch modes were left on (they run the solution's code inside every torch call after it, the
rank's own checks included; torch's default-device mode aside), which reduced-precision switches were turned on, and
which threads a call left running (a kept pool's idle workers aside).

These run in the rank's process, after the solution was imported, so a solution can defeat them: they are a second
line only. Nothing the judge decides rests on them alone (the time is the judge's clock, the figures are computed
from `out` in the judge's process); they give a clearer reason when a solution tampers openly."""
import builtins
import concurrent.futures.thread
import os
import sys
import threading
import time
import warnings

_MISSING = object()


def _owners(torch):
    import torch.distributed
    import torch.nn.functional
    owners = {"torch": torch, "torch.nn.functional": torch.nn.functional, "torch.cuda": torch.cuda,
              "torch.distributed": torch.distributed, "time": time, "builtins": builtins}
    for cls in torch.Tensor.__mro__:            # Tensor, its C base, object
        owners[f"{cls.__module__}.{cls.__qualname__}"] = cls
    owners["torch.utils._device.DeviceContext"] = _device_context()    # the mode modes() lets stay on
    return owners


def _device_context():
    from torch.utils._device import DeviceContext
    return DeviceContext


def _callables(owner):
    """{name: value} of what an attribute lookup on `owner` finds, for every callable or class it holds (a class's
    lookup goes through its bases, so a name added to Tensor that shadows its base's counts as a replacement)."""
    if isinstance(owner, type):
        found = {}
        for cls in reversed(owner.__mro__):
            found.update(vars(cls))
    else:
        found = dict(vars(owner))
    # Data (flags such as torch.cuda._initialized, caches) changes legitimately; functions and classes do not.
    with warnings.catch_warnings():     # a deprecated name (torch.distributed.reduce_op) warns when looked at
        warnings.simplefilter("ignore")
        return {k: v for k, v in found.items() if callable(v) or isinstance(v, (staticmethod, classmethod, property))}


def snapshot(torch):
    """Taken before the solution is imported."""
    return {label: _callables(owner) for label, owner in _owners(torch).items()}


def replaced(torch, before):
    """['owner.name', ...] of the functions and classes replaced or removed since `before`."""
    now = snapshot(torch)
    out = []
    for label, names in before.items():
        cur = now.get(label, {})
        out += [f"{label}.{k}" for k, v in names.items() if cur.get(k, _MISSING) is not v and
                not _dynamo_wrapped(torch, cur.get(k), v) and not _default_storage(torch, label, k, cur.get(k))]
        out += [f"{label}.{k}" for k in cur.keys() - names.keys() if _shadows(label, k, before)]
    return sorted(out)


def _dynamo_wrapped(torch, new, old):
    """torch._dynamo's import wraps a few of torch's functions (torch.manual_seed) in its disable wrapper, which calls
    the original and nothing else: that is torch.compile's doing, not the solution's."""
    code = getattr(new, "__code__", None)
    return getattr(new, "__wrapped__", None) is old and code is not None and \
        code.co_filename == os.path.join(os.path.dirname(torch.__file__), "_compile.py")


_STORAGES = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
             "bfloat16": "BFloat16Storage"}


def _default_storage(torch, label, name, new):
    """torch.set_default_dtype points torch.Storage at the storage class of the new default dtype: torch's doing, not
    the solution's (the rank's own checks name every dtype they make)."""
    cls = _STORAGES.get(str(torch.get_default_dtype()).removeprefix("torch."))
    return label == "torch" and name == "Storage" and cls is not None and new is getattr(torch, cls, _MISSING)


def _shadows(label, name, before):
    # A new callable on a module is usually a lazily imported submodule or helper; on a class it hides a base's.
    return label not in ("torch", "torch.cuda", "torch.distributed", "torch.nn.functional", "time", "builtins")


# torch's switches that narrow the arithmetic below the task's rule (bf16 operands, fp32 sums): bf16 and fp16 GEMMs
# that reduce in their own type. TF32 and the float32 matmul precision are not among them: TF32 operands are wider
# than bf16 and sum in fp32, and pipelines switch them on at import.
SWITCHES = ("backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
            "backends.cuda.matmul.allow_fp16_reduced_precision_reduction")


def switches(torch):
    """{name: value} of SWITCHES now."""
    out = {}
    for name in SWITCHES:
        obj = torch
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        out[name] = bool(obj)
    return out


def modes(torch):
    """(torch function modes, torch dispatch modes) on the stacks now, and the precision switches. The function
    modes of torch.set_default_device (torch's DeviceContext, whose code snapshot() keeps) are not counted: they give
    factory calls a device, and a script sets one at import."""
    context = _device_context()
    n = torch._C._len_torch_function_stack()
    own = sum(1 for i in range(n) if type(torch._C._get_function_stack_at(i)) is not context)
    return own, torch._C._len_torch_dispatch_stack(), switches(torch)


def tampered(torch, before, modes_before):
    """['replaced owner.name', 'a torch mode left on', 'a reduced-precision switch turned on'] against a snapshot
    and the modes taken before the import."""
    out = [f"replaced {name}" for name in replaced(torch, before)]
    now = modes(torch)
    if now[:2] != modes_before[:2]:
        out.append(f"torch function or dispatch modes left on ({now[0]} and {now[1]} on the stacks, "
                   f"{modes_before[0]} and {modes_before[1]} before the solution)")
    out += [f"left torch.{k} at {v!r} (it was {modes_before[2][k]!r}): narrower arithmetic"
            for k, v in now[2].items() if k in modes_before[2] and _narrower(v, modes_before[2][k])]
    return out


def _narrower(now, before):
    """A reduced-precision switch turned on."""
    return now and not before


def threads():
    return {t.ident for t in threading.enumerate()}


def threads_left(before):
    """Names of the Python threads started since `before` that are still alive, idle pool workers aside."""
    return [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive() and not _idle_worker(t)]


# Taken when the rank imports this module, before the solution: a worker loop of the solution's own is no stdlib one.
_POOL_WORKER = concurrent.futures.thread._worker.__code__


def _idle_worker(thread):
    """A ThreadPoolExecutor's worker waiting in the stdlib's loop on an empty queue: a pool kept from call to call
    leaves these, and they run nothing until a call gives them work (between calls the group is frozen)."""
    frame = sys._current_frames().get(thread.ident)
    if frame is None or frame.f_code is not _POOL_WORKER:
        return False
    queue = frame.f_locals.get("work_queue")
    return queue is not None and queue.empty()
