"""CUDA IPC of the judge's GPU buffers through the driver's memory handles alone.

torch's own sharing of a CUDA tensor (torch.multiprocessing's reduce_tensor) adds a reference counter and an IPC event,
both in files of /dev/shm that the producer (the judge) maps and that the consumer (a rank) must open by name: a rank
may write /dev/shm (NCCL), so it could truncate them under the judge's mappings, and the judge's next touch of one
would kill it with SIGBUS. A memory handle (cuIpcGetMemHandle) is 64 bytes that name the allocation in the driver and
nothing else: no file for a rank to reach. The judge synchronises its devices after writing a lent buffer (so no
event is needed), and keeps every lent buffer for the whole run (so no counter is needed: a rank's mapping is gone
with its process)."""
import ctypes

_IPC_HANDLE_SIZE = 64
_LAZY_ENABLE_PEER_ACCESS = 1
_driver = None


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * _IPC_HANDLE_SIZE)]


def _cuda():
    global _driver
    if _driver is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _driver = lib
    return _driver


def _check(rc, what):
    if rc != 0:
        name = ctypes.c_char_p()
        _cuda().cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"{what}: CUDA driver error {rc} ({(name.value or b'?').decode()})")


def handle(t):
    """The judge's side: the memory handle (bytes) of GPU tensor `t`, which must begin its allocation (a handle names
    the whole allocation; buffers.alone() checks that nothing else is in it)."""
    import torch
    with torch.cuda.device(t.device):       # the device's primary context current on this thread
        h = _Handle()
        _check(_cuda().cuIpcGetMemHandle(ctypes.byref(h), t.untyped_storage().data_ptr()), "cuIpcGetMemHandle")
    return bytes(h.reserved)


class _Mapped:
    """What torch.as_tensor reads to wrap a device pointer (the CUDA array interface, version 3)."""

    def __init__(self, ptr, numel):
        # int16: bf16 has no type code of its own; the tensor is viewed as bf16 after.
        self.__cuda_array_interface__ = {"shape": (numel,), "typestr": "<i2", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}


def open_handle(blob, numel, device):
    """The rank's side: the judge's buffer named by `blob` (from handle()) as a flat bf16 tensor of `numel` elements
    on `device` (the current device, its context initialised)."""
    import torch
    if len(blob) != _IPC_HANDLE_SIZE:
        raise RuntimeError(f"a CUDA IPC handle is {_IPC_HANDLE_SIZE} bytes, not {len(blob)}")
    torch.cuda.init()
    torch.empty(0, device=device)           # the primary context made and current on this thread
    h = _Handle.from_buffer_copy(blob)
    ptr = ctypes.c_uint64()
    _check(_cuda().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, _LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle")
    return torch.as_tensor(_Mapped(ptr.value, numel), device=device).view(torch.bfloat16)
