"""harness/rank/guards.py: the rank's look at torch after prepare and each call."""
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from harness.rank import guards


class _Through(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_a_mode_left_on_is_tampering_and_one_left_properly_is_not():
    before, modes = guards.snapshot(torch), guards.modes(torch)
    with _Through(), torch.device("cpu"):        # torch's device context is not counted
        assert guards.tampered(torch, before, modes) == [
            "torch function or dispatch modes left on (1 and 0 on the stacks, 0 and 0 before the solution)"]
    assert guards.tampered(torch, before, modes) == []
    mode = TorchDispatchMode()
    mode.__enter__()
    try:
        assert guards.tampered(torch, before, modes)[0].startswith("torch function or dispatch modes left on (0 and 1")
    finally:
        mode.__exit__(None, None, None)


def test_a_replaced_function_is_named():
    before, modes = guards.snapshot(torch), guards.modes(torch)
    real = torch.Tensor.sort
    torch.Tensor.sort = lambda self, *a, **k: real(self, *a, **k)
    try:
        assert guards.tampered(torch, before, modes) == ["replaced torch.Tensor.sort"]
    finally:
        torch.Tensor.sort = real
    assert guards.tampered(torch, before, modes) == []


def test_a_precision_switch_left_narrower_is_tampering_and_one_made_stricter_is_not():
    """torch's reduced-precision switches turned on after the snapshot make every later bf16 or fp16 GEMM sum in its
    own type, below the rule's fp32 sums; a switch turned off narrows nothing."""
    saved = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        before, modes = guards.snapshot(torch), guards.modes(torch)
        torch.backends.cudnn.allow_tf32 = False          # stricter: fine
        assert guards.tampered(torch, before, modes) == []
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        assert guards.tampered(torch, before, modes) == [
            "left torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction at True (it was False): narrower "
            "arithmetic"]
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction, torch.backends.cudnn.allow_tf32 = saved


def test_tf32_left_on_is_not_tampering():
    """TF32 (operands wider than bf16, fp32 sums) is within the task's numerics rule: a pipeline's setup lines that
    switch it on for the process, and lower the float32 matmul precision to use it, are no finding."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        before, modes = guards.snapshot(torch), guards.modes(torch)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
        assert guards.tampered(torch, before, modes) == []
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def test_torch_compiles_own_wrapper_is_not_tampering_and_a_lookalike_is():
    """Importing torch._dynamo (torch.compile's first use) wraps torch.manual_seed in its disable wrapper, which calls
    the original only: an honest solution's compile is not tampering. A wrapper of the solution's own, even one that
    names the original as __wrapped__, is."""
    import functools
    import torch._dynamo  # noqa: F401
    wrapped = torch.manual_seed
    orig = getattr(wrapped, "__wrapped__", None)
    assert orig is not None and orig is not wrapped, "torch._dynamo no longer wraps torch.manual_seed"
    torch.manual_seed = orig
    try:
        before, modes = guards.snapshot(torch), guards.modes(torch)
        torch.manual_seed = wrapped
        assert guards.tampered(torch, before, modes) == []

        @functools.wraps(orig)
        def lookalike(*args, **kwargs):
            return orig(*args, **kwargs)
        torch.manual_seed = lookalike
        assert guards.tampered(torch, before, modes) == ["replaced torch.manual_seed"]
    finally:
        torch.manual_seed = wrapped


def test_a_default_dtype_is_no_replacement_and_a_storage_of_the_solutions_is():
    """torch.set_default_dtype points torch.Storage at the default dtype's storage class: torch's doing. The same
    class put there by the solution with the default unchanged is a replacement."""
    saved = torch.get_default_dtype(), torch.Storage
    try:
        before, modes = guards.snapshot(torch), guards.modes(torch)
        torch.set_default_dtype(torch.bfloat16)
        assert guards.tampered(torch, before, modes) == []
        torch.set_default_dtype(saved[0])
        torch.Storage = torch.BFloat16Storage
        assert guards.tampered(torch, before, modes) == ["replaced torch.Storage"]
    finally:
        torch.set_default_dtype(saved[0])
        torch.Storage = saved[1]


def test_a_default_device_left_on_is_not_tampering_unless_its_mode_is_changed():
    """torch.set_default_device pushes torch's DeviceContext, a function mode that gives factory calls a device, as
    scripts do at import: no finding. Its __torch_function__ replaced is a replacement."""
    from torch.utils._device import DeviceContext
    before, modes = guards.snapshot(torch), guards.modes(torch)
    real = DeviceContext.__torch_function__
    torch.set_default_device("cpu")
    try:
        assert torch._C._len_torch_function_stack() == 1 and guards.tampered(torch, before, modes) == []
        DeviceContext.__torch_function__ = lambda self, func, types, args=(), kwargs=None: real(
            self, func, types, args, kwargs)
        assert guards.tampered(torch, before, modes) == ["replaced torch.utils._device.DeviceContext.__torch_function__"]
    finally:
        DeviceContext.__torch_function__ = real
        torch.set_default_device(None)
    assert torch._C._len_torch_function_stack() == 0


def test_an_idle_pool_kept_between_calls_is_no_thread_left_and_a_busy_one_is():
    """A ThreadPoolExecutor kept from call to call leaves its workers waiting on an empty queue: they run nothing
    until the next call. A worker still running a task, or a thread of the solution's own, is left running."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max_workers=2)
    release = threading.Event()
    try:
        before = guards.threads()
        list(pool.map(abs, [-1, -2, -3]))
        for _ in range(100):          # a worker releases its idle count, then waits on the queue again
            if not guards.threads_left(before):
                break
            time.sleep(0.01)
        assert guards.threads_left(before) == []
        busy = pool.submit(release.wait)
        time.sleep(0.05)
        assert len(guards.threads_left(before)) == 1
        own = threading.Thread(target=release.wait, name="own")
        own.start()
        assert "own" in guards.threads_left(before)
    finally:
        release.set()
        pool.shutdown(wait=True)
    assert busy.result() is True
