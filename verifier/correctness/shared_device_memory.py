"""Device memory one process exports and another maps, across the sandbox's namespaces.

Why: a problem whose outputs are gigabytes cannot be checked through files (a 6.4 GB ReLU spent ~20 s
per trial writing, reading and digesting them on the host). The trusted side must still compare every
call's outputs in full, so the candidate's harness copies its outputs (and its inputs as forward left
them) into a device buffer it exports, and the trusted reference worker maps that buffer in its own
CUDA context and compares there (`verifier.correctness.device_compare`).

Legacy CUDA IPC handles (`cudaIpcGetMemHandle`, torch's `_share_cuda_`) do not cross PID namespaces,
and the sandbox has its own. The driver's virtual memory management does: `cuMemCreate` with a POSIX
file-descriptor handle type, `cuMemExportToShareableHandle` gives a descriptor, passed over a Unix socket
(`SCM_RIGHTS`, `verifier.sandbox.supervisor.LiveJob.receive_fd`), and `cuMemImportFromShareableHandle`
maps it on the other side. The exporter is the candidate's process and the importer the trusted one: the
trusted side never exports memory of its own, so nothing it holds can be written from the sandbox; it
only reads what the candidate put there, and a mapping is bounded by the allocation's real size (the
driver refuses a larger one).

Plain ctypes over `libcuda.so.1` (no native build): the calls are few and their structs small.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

# CUmemAllocationType, CUmemAllocationHandleType, CUmemLocationType, CUmemAccess_flags
_PINNED, _POSIX_FD, _ON_DEVICE, _READ_WRITE = 1, 1, 1, 3
_POSIX_FD_SUPPORTED = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
ALIGN = 256  # every region in a staging buffer starts at a multiple of this (any dtype's alignment)


class SharingUnavailable(RuntimeError):
    """The driver cannot share device memory by descriptor here (then outputs go by file)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_driver = None


def _cuda():
    global _driver
    if _driver is None:
        try:
            _driver = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise SharingUnavailable(f"no CUDA driver library ({exc})") from None
    return _driver


def _check(status: int, what: str) -> None:
    if status != 0:
        name = ctypes.c_char_p()
        with contextlib.suppress(Exception):
            _cuda().cuGetErrorName(status, ctypes.byref(name))
        raise SharingUnavailable(f"{what} failed: {(name.value or b'').decode() or status}")


def _device(torch) -> int:
    """The driver's handle of torch's current device, with torch's context current on this thread."""
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # makes the primary context current here
    dev = ctypes.c_int()
    _check(_cuda().cuDeviceGet(ctypes.byref(dev), torch.cuda.current_device()), "cuDeviceGet")
    return dev.value


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type, prop.requestedHandleTypes = _PINNED, _POSIX_FD
    prop.location = _Location(_ON_DEVICE, device)
    return prop


def supported(torch) -> bool:
    """Whether this device can export memory as a POSIX descriptor."""
    try:
        dev = _device(torch)
        value = ctypes.c_int()
        _check(_cuda().cuDeviceGetAttribute(ctypes.byref(value), _POSIX_FD_SUPPORTED, dev), "cuDeviceGetAttribute")
        return bool(value.value)
    except Exception:  # noqa: BLE001 - no driver, no device: files
        return False


def granularity(torch) -> int:
    size = ctypes.c_size_t()
    _check(_cuda().cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(_prop(_device(torch))), 0),
           "cuMemGetAllocationGranularity")
    return int(size.value)


def round_up(n: int, to: int) -> int:
    return (max(1, int(n)) + to - 1) // to * to


class _ArrayInterface:
    """What `torch.as_tensor` needs to view raw device memory as a flat byte tensor."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


class _Mapping:
    """An allocation handle mapped at a reserved address range, viewed as `bytes` (a uint8 tensor). It owns
    the handle: released on `close`, or at once when mapping fails."""

    def __init__(self, torch, handle: int, nbytes: int, device: int):
        self.handle, self.nbytes, self.ptr = handle, nbytes, 0
        lib = _cuda()
        ptr = ctypes.c_uint64()
        try:
            _check(lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                                           ctypes.c_uint64(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
            self.ptr = ptr.value
            _check(lib.cuMemMap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                                ctypes.c_ulonglong(handle), ctypes.c_ulonglong(0)), "cuMemMap")
            self.mapped = True
            access = _AccessDesc(_Location(_ON_DEVICE, device), _READ_WRITE)
            _check(lib.cuMemSetAccess(ctypes.c_uint64(self.ptr), ctypes.c_size_t(nbytes), ctypes.byref(access),
                                      ctypes.c_size_t(1)), "cuMemSetAccess")
        except BaseException:
            self.close()
            raise
        self.bytes = torch.as_tensor(_ArrayInterface(self.ptr, nbytes), device="cuda")

    def close(self) -> None:
        """Unmap and release (the memory itself lives until every process holding it released it)."""
        lib = _cuda()
        self.bytes = None
        if self.ptr:
            if getattr(self, "mapped", False):
                lib.cuMemUnmap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes))
            lib.cuMemAddressFree(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes))
            self.ptr = 0
        if self.handle:
            lib.cuMemRelease(ctypes.c_ulonglong(self.handle))
            self.handle = 0


class ExportedBuffer:
    """A device buffer of at least `nbytes` whose memory another process can map: `.bytes` (uint8 tensor),
    `.fd` (a descriptor to send once; the importer's copy keeps the memory alive, not this descriptor)."""

    def __init__(self, torch, nbytes: int):
        device = _device(torch)
        size = round_up(nbytes, granularity(torch))
        handle = ctypes.c_ulonglong()
        _check(_cuda().cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(_prop(device)),
                                   ctypes.c_ulonglong(0)), "cuMemCreate")
        try:
            fd = ctypes.c_int(-1)
            _check(_cuda().cuMemExportToShareableHandle(ctypes.byref(fd), handle, _POSIX_FD, ctypes.c_ulonglong(0)),
                   "cuMemExportToShareableHandle")
        except BaseException:
            _cuda().cuMemRelease(handle)
            raise
        self.fd = fd.value
        try:
            self._map = _Mapping(torch, handle.value, size, device)  # owns the handle from here
        except BaseException:
            os.close(self.fd)
            raise
        self.nbytes = size
        self.bytes = self._map.bytes

    def close(self) -> None:
        self.bytes = None
        self._map.close()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class ImportedBuffer:
    """Another process's `ExportedBuffer`, mapped here from its descriptor: `.bytes` (uint8 tensor of
    `nbytes`). `nbytes` beyond the allocation's real size is refused by the driver (SharingUnavailable)."""

    def __init__(self, torch, fd: int, nbytes: int):
        device = _device(torch)
        handle = ctypes.c_ulonglong()
        _check(_cuda().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
               "cuMemImportFromShareableHandle")
        # mapped in whole granules (the driver's unit), viewed as the `nbytes` asked for; the mapping owns
        # the handle from here (it releases it if mapping fails)
        self._map = _Mapping(torch, handle.value, round_up(nbytes, granularity(torch)), device)
        self.nbytes = int(nbytes)
        self.bytes = self._map.bytes[:self.nbytes]

    def view(self, torch, offset: int, shape: list[int], dtype) -> object:
        """The region at `offset` as a tensor of `shape` and `dtype` (a view: no copy). Bounds-checked
        here, so a region a claim places past the buffer is an error, never a read elsewhere."""
        count = 1
        for s in shape:
            count *= int(s)
        size = count * torch.empty((), dtype=dtype).element_size()
        if offset < 0 or offset % ALIGN or offset + size > self.nbytes:
            raise ValueError(f"a region of {size} bytes at {offset} lies outside the shared buffer of {self.nbytes}")
        return self.bytes[offset:offset + size].view(dtype).view([int(s) for s in shape])

    def close(self) -> None:
        self.bytes = None
        self._map.close()


def layout(sizes: list[int]) -> tuple[list[int], int]:
    """Offsets of regions of `sizes` bytes packed at `ALIGN`, and the total."""
    offsets, at = [], 0
    for n in sizes:
        offsets.append(at)
        at += round_up(n, ALIGN) if n else 0
    return offsets, at


class Stager:
    """The candidate side (the harness): one exported buffer, grown when a call's results do not fit,
    into which each trial's outputs and its inputs as forward left them are copied on the device.
    `send_fd(fd, tag)` passes a new buffer's descriptor to the parent before the mark that uses it."""

    def __init__(self, torch, send_fd):
        self.torch, self.send_fd = torch, send_fd
        self.buffer: ExportedBuffer | None = None
        self.count = 0

    def stage(self, outputs: list, inputs: list) -> dict:
        """Copy `outputs` and the tensor `inputs` in; {"staging": {"tag", "nbytes"}, "outputs": [...],
        "after": [...]}, each region {"offset", "shape", "dtype"} (None for an input that is no tensor)."""
        torch = self.torch

        def dtype_name(_torch, dtype) -> str:  # as `paired_calls.dtype_name` names it (the clock is a layer above)
            return str(dtype).replace("torch.", "")

        tensors = [o.detach() for o in outputs] + [x.detach() for x in inputs if isinstance(x, torch.Tensor)]
        offsets, total = layout([t.numel() * t.element_size() for t in tensors])
        if self.buffer is None or self.buffer.nbytes < total:
            if self.buffer is not None:
                self.buffer.close()
                self.buffer = None
            torch.cuda.empty_cache()
            self.buffer = ExportedBuffer(torch, total)
            self.count += 1
            if not self.send_fd(self.buffer.fd, f"staging{self.count}"):
                raise RuntimeError("the parent took no shared buffer")
        regions = []
        for t, at in zip(tensors, offsets, strict=True):
            n = t.numel() * t.element_size()
            if n:
                flat = t.contiguous().reshape(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)
                self.buffer.bytes[at:at + n].copy_(flat)
            regions.append({"offset": at, "shape": list(t.shape), "dtype": dtype_name(torch, t.dtype)})
        torch.cuda.synchronize()
        outs, rest = regions[:len(outputs)], iter(regions[len(outputs):])
        after = [next(rest) if isinstance(x, torch.Tensor) else None for x in inputs]
        return {"staging": {"tag": f"staging{self.count}", "nbytes": self.buffer.nbytes}, "outputs": outs,
                "after": after}

    def close(self) -> None:
        """Free the buffer (correctness is over): it held a call's results and inputs on the card, room the
        timed rounds of a gigabyte problem need (a 6.4 GB ReLU's 12.8 GB buffer stayed through its rounds
        on an H100 and the rounds ran out of memory). A later `stage` makes a new one."""
        if self.buffer is not None:
            self.buffer.close()
            self.buffer = None
            self.torch.cuda.empty_cache()
