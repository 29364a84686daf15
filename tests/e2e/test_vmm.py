"""Virtual memory management of the driver face (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
cuMemUnmap, cuMemRelease, cuMemAddressFree): a C driver program under the shim against a real server
(tests/programs/drv_vmm.c asserts the CUDA Driver API reference's "Virtual Memory Management" behaviour),
then the server's VMM operations driven frame by frame: isolation between sessions, malformed arguments,
memory accounting, cudaDeviceReset, and kernels of a peer-enabled device never reaching mapped ranges
through the peer span."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushim.backends.emulator.backend import EmulatorBackend
from gpushim.backends.vmm import GRANULARITY as G
from gpushim.cuda_errors import CudaError, Err
from gpushim.protocol import CALL, OPS_BY_NAME, REPLY
from gpushim.server.modules import ModuleStore
from gpushim.server.session import ProtocolError, Session, SessionInfo
from tests.e2e.conftest import BACKEND, BIN, Server

KERNELS = str(BIN / "drv_kernels")


def test_vmm_driver_program(tmp_path: Path, built: Path) -> None:
    s = Server(tmp_path)
    try:
        p = s.run("drv_vmm", KERNELS, timeout=120)
    finally:
        s.stop()
    assert p.returncode == 0, f"drv_vmm failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    assert "kernel over the mapped range ok" in p.stdout and "vmm ok" in p.stdout


def test_vmm_access_retain_and_sharing_between_processes(tmp_path: Path, built: Path) -> None:
    """cuMemGetAccess, cuMemRetainAllocationHandle and POSIX-descriptor cuMemExportToShareableHandle /
    cuMemImportFromShareableHandle between two processes (CUDA Driver API reference, "Virtual Memory
    Management"): tests/programs/drv_vmm_share.c asserts the values and the refusals."""
    s = Server(tmp_path)
    try:
        p = s.run("drv_vmm_share", timeout=120)
    finally:
        s.stop()
    assert p.returncode == 0, f"drv_vmm_share failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    assert "access 3" in p.stdout  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    assert "importer read the exporter's memory and wrote it" in p.stdout
    assert "exporter sees the importer's writes" in p.stdout and "vmm share ok" in p.stdout
    assert "handle type 8 is not supported by gpushim" in p.stderr  # the fabric handle's refusal is logged


class Client:
    """One session of an emulator backend, driven by CALL frames as the worker does."""

    def __init__(self, backend: EmulatorBackend, tmp: Path, sid: int, devices: list[int],
                 quota: int | None = None) -> None:
        self.sent: list = []
        self.s = Session(backend, SessionInfo(sid, sid, "vmm", 13000, 0, devices, quota), self.sent.append,
                         logging.getLogger("vmm"), ModuleStore(tmp / f"modules{sid}"))
        self.seq = 0

    def call(self, op: str, *args: object) -> tuple[int, list, str]:
        self.seq += 1
        self.sent.clear()
        self.s.dispatch([CALL, self.seq, OPS_BY_NAME[op].id, list(args)])
        [r] = [m for m in self.sent if m[0] == REPLY and m[1] == self.seq]
        return r[2], r[3], r[5] or ""

    def ok(self, op: str, *args: object) -> list:
        err, res, note = self.call(op, *args)
        assert err == 0, f"{op}{args}: {err} {note}"
        return res


@pytest.fixture
def backend() -> Iterator[EmulatorBackend]:
    yield EmulatorBackend(count=2, memory_limit=1 << 30)


def test_sessions_cannot_reach_each_others_mappings(backend: EmulatorBackend, tmp_path: Path) -> None:
    a, b = Client(backend, tmp_path, 1, [0, 1]), Client(backend, tmp_path, 2, [0, 1])
    [va] = a.ok("VMM_RESERVE", 0, 2 * G, 0, 0)
    [h] = a.ok("VMM_CREATE", 0, G)
    a.ok("VMM_MAP", va, G, 0, h)
    a.ok("VMM_SET_ACCESS", va, G, 0, 3)
    a.ok("MEMCPY_H2D", va, 0, b"secret")
    # b holds no such handle or reservation, and cannot read a's mapped range
    assert b.call("VMM_MAP", va, G, 0, h)[0] == Err.INVALID_VALUE
    assert b.call("VMM_SET_ACCESS", va, G, 0, 3)[0] == Err.INVALID_VALUE
    assert b.call("MEMCPY_D2H", va, 6, 0)[0] != 0
    assert b.call("VMM_FREE", 1, h, 0)[0] == Err.INVALID_VALUE
    assert bytes(a.ok("MEMCPY_D2H", va, 6, 0)[0]) == b"secret"
    a.s.close()
    b.s.close()


def test_bad_arguments_are_refused_and_the_session_goes_on(backend: EmulatorBackend, tmp_path: Path) -> None:
    c = Client(backend, tmp_path, 1, [0, 1])
    [va] = c.ok("VMM_RESERVE", 0, 4 * G, 0, 0)
    [h] = c.ok("VMM_CREATE", 0, 2 * G)
    bad = [("VMM_RESERVE", 0, G + 1, 0, 0), ("VMM_RESERVE", 0, G, 3, 0), ("VMM_CREATE", 0, 0),
           ("VMM_CREATE", 0, 1 << 40), ("VMM_MAP", va, G, 0, h + 1), ("VMM_MAP", va + 1, G, 0, h),
           ("VMM_MAP", va, 4 * G, 0, h), ("VMM_MAP", va + 8 * G, G, 0, h), ("VMM_UNMAP", va, G),
           ("VMM_SET_ACCESS", va, G, 0, 3), ("VMM_FREE", 0, va, G), ("VMM_FREE", 1, 12345, 0),
           ("VMM_RESERVE", 7, G, 0, 0), ("VMM_CREATE", -1, G)]
    for args in bad:
        err, _, _ = c.call(*args)  # type: ignore[arg-type]
        assert err in (Err.INVALID_VALUE, Err.MEMORY_ALLOCATION, Err.INVALID_DEVICE), (args, err)
    # malformed frames are rejected before any operation runs (the worker then answers FATAL and ends the session)
    for args in [("VMM_SET_ACCESS", va, G, 0, "rw"), ("VMM_MAP", va, G, 0), ("VMM_CREATE", 0, -G),
                 ("VMM_FREE", 2, va, G)]:
        with pytest.raises(ProtocolError):
            c.call(*args)  # type: ignore[arg-type]
    c.ok("VMM_MAP", va, 2 * G, 0, h)
    assert c.call("VMM_MAP", va + G, G, 0, h)[0] == Err.INVALID_VALUE  # overlaps
    assert c.call("VMM_UNMAP", va, G)[0] == Err.INVALID_VALUE  # a sub-range of a mapping
    assert c.call("VMM_SET_ACCESS", va, 2 * G, 0, 1)[0] == Err.NOT_SUPPORTED  # read-only: said, not ignored
    assert c.call("VMM_SET_ACCESS", va, 2 * G, 2, 3)[0] == Err.INVALID_DEVICE  # no such device
    [h1] = c.ok("VMM_CREATE", 1, G)
    err, _, note = c.call("VMM_MAP", va + 2 * G, G, 0, h1)  # device 1's memory in device 0's range
    assert err == Err.NOT_SUPPORTED and "device 1" in note
    c.ok("VMM_SET_ACCESS", va, 2 * G, 0, 3)
    c.ok("MEMSET", va + G - 8, 7, 16, 0)  # across nothing: one mapping of 2 granules
    assert bytes(c.ok("MEMCPY_D2H", va + G - 8, 16, 0)[0]) == b"\x07" * 16
    assert c.call("FREE", va)[0] == Err.INVALID_VALUE  # cudaFree is not for mapped memory
    c.s.close()


def test_shareable_memory_frames_bad_input_quota_and_files(backend: EmulatorBackend, tmp_path: Path) -> None:
    """The sharing operations driven frame by frame: refusals, the importer's quota, and the allocation's file
    closed once its last reference and mapping are gone."""
    import os

    c = Client(backend, tmp_path, 1, [0, 1])
    assert c.call("VMM_IMPORT", 0)[0] == Err.INVALID_VALUE  # no descriptor came with the frame
    for args in [("VMM_RETAIN", 0x1234), ("VMM_GET_ACCESS", 0x1234, 0), ("VMM_EXPORT", 999)]:
        assert c.call(*args)[0] == Err.INVALID_VALUE, args  # type: ignore[arg-type]
    with pytest.raises(ProtocolError):  # types: CUmemAllocationHandleType bits, below 0x10
        c.call("VMM_CREATE_SHAREABLE", 0, G, 0x10)
    [h] = c.ok("VMM_CREATE_SHAREABLE", 0, 2 * G, 1)
    [pid, fd] = c.ok("VMM_EXPORT", h)
    assert pid == os.getpid() and os.fstat(fd).st_size == 2 * G
    c.s.info.transport = "tcp"
    err, _, note = c.call("VMM_EXPORT", h)
    assert err == Err.NOT_SUPPORTED and "TCP" in note
    c.s.info.transport = "unix"
    [va] = c.ok("VMM_RESERVE", 0, 2 * G, 0, 0)
    c.ok("VMM_MAP", va, 2 * G, 0, h)
    assert c.ok("VMM_GET_ACCESS", va, 0) == [0]  # mapped, no access granted yet
    c.ok("VMM_SET_ACCESS", va, 2 * G, 0, 3)
    assert c.ok("VMM_GET_ACCESS", va + G, 0) == [3] and c.ok("VMM_GET_ACCESS", va, 1) == [0]
    assert c.ok("VMM_RETAIN", va + 5) == [h, 0, 2 * G, 1]
    # another session imports it: charged to it too (its quota is smaller than the allocation)
    d = Client(backend, tmp_path, 2, [0], quota=G)
    d.s.received_fds.append(os.dup(fd))
    assert d.call("VMM_IMPORT", 0)[0] == Err.MEMORY_ALLOCATION
    e = Client(backend, tmp_path, 3, [0])
    e.s.received_fds.append(os.dup(fd))
    [hi, size] = e.ok("VMM_IMPORT", 0)
    assert size == 2 * G
    [vb] = e.ok("VMM_RESERVE", 0, 2 * G, 0, 0)
    e.ok("VMM_MAP", vb, 2 * G, 0, hi)
    e.ok("VMM_SET_ACCESS", vb, 2 * G, 0, 3)
    c.ok("MEMCPY_H2D", va + 10, 0, b"shared")
    assert bytes(e.ok("MEMCPY_D2H", vb + 10, 6, 0)[0]) == b"shared"
    c.ok("VMM_FREE", 1, h, 0)
    c.ok("VMM_UNMAP", va, 2 * G)
    assert c.s.bs.vmm.handles[h].fd == fd  # one reference (retained) is left: the file is open
    used = c.s.bs.memories[0].account.used
    c.ok("VMM_FREE", 1, h, 0)
    assert h not in c.s.bs.vmm.handles  # the last reference: the file is closed, the memory uncharged
    assert c.s.bs.memories[0].account.used == used - 2 * G
    assert bytes(e.ok("MEMCPY_D2H", vb + 10, 6, 0)[0]) == b"shared"  # the importer's memory lives on
    for x in (c, d, e):
        x.s.close()


def test_physical_memory_is_device_memory_and_reset_frees_it(backend: EmulatorBackend, tmp_path: Path) -> None:
    c = Client(backend, tmp_path, 1, [0, 1])
    free0, total = c.ok("MEM_INFO", 0)
    [va] = c.ok("VMM_RESERVE", 0, 2 * G, 0, 0)
    [h] = c.ok("VMM_CREATE", 0, 2 * G)
    c.ok("VMM_MAP", va, 2 * G, 0, h)
    c.ok("VMM_SET_ACCESS", va, 2 * G, 0, 3)
    assert c.ok("MEM_INFO", 0)[0] == free0 - 2 * G
    assert c.ok("POINTER_INFO", va + 5)[:3] == [2, 0, va]
    c.ok("DEVICE_RESET", 0)
    assert c.ok("MEM_INFO", 0)[0] == free0
    assert c.s.bs.vmm.reservations == {} and c.s.bs.vmm.handles == {}
    assert c.call("MEMCPY_D2H", va, 4, 0)[0] != 0
    c.s.close()


def test_physical_memory_counts_against_the_session_quota(backend: EmulatorBackend, tmp_path: Path) -> None:
    c = Client(backend, tmp_path, 1, [0], quota=5 * G)
    [h] = c.ok("VMM_CREATE", 0, 4 * G)
    assert c.call("VMM_CREATE", 0, 2 * G)[0] == Err.MEMORY_ALLOCATION
    assert c.call("MALLOC", 0, 2 * G)[0] == Err.MEMORY_ALLOCATION  # cudaMalloc sees the same account
    c.ok("VMM_FREE", 1, h, 0)
    c.ok("VMM_CREATE", 0, 4 * G)
    c.s.close()


def test_cig_limit_is_query_only(backend: EmulatorBackend, tmp_path: Path) -> None:
    """CU_LIMIT_CIG_ENABLED (cuBLAS asks it): "A non-zero value indicates this CUDA context is a CIG-enabled
    context. Can only be queried, cannot be set" (cuda.h, CUlimit)."""
    c = Client(backend, tmp_path, 1, [0])
    assert c.ok("DEVICE_LIMIT", 0, 8, 0, 0) == [0]
    assert c.call("DEVICE_LIMIT", 0, 8, 1, 1)[0] == 215  # cudaErrorUnsupportedLimit
    assert c.ok("DEVICE_LIMIT", 0, 8, 0, 0) == [0]
    c.s.close()


def test_peer_kernels_see_mapped_ranges(backend: EmulatorBackend, tmp_path: Path) -> None:
    """Kernels of a device with peer access run over the session's peer span (peers.py): ranges mapped before
    and after peer access was enabled are there, with the same bytes, and an unmapped one is an illegal
    address there too (never a fault of the server)."""
    c = Client(backend, tmp_path, 1, [0, 1])
    bs = c.s.bs
    [va] = c.ok("VMM_RESERVE", 0, 2 * G, 0, 0)
    [h] = c.ok("VMM_CREATE", 0, 2 * G)
    c.ok("VMM_MAP", va, G, 0, h)
    c.ok("VMM_SET_ACCESS", va, G, 0, 3)
    c.ok("VMM_SET_ACCESS", va, G, 1, 3)  # PyTorch grants the peers access too
    c.ok("MEMCPY_H2D", va, 0, b"before")
    c.ok("PEER_ACCESS", 1, 0, 1)  # kernels on device 1 may access device 0's memory
    c.ok("VMM_MAP", va + G, G, G, h)
    c.ok("VMM_SET_ACCESS", va + G, G, 0, 3)
    c.ok("MEMCPY_H2D", va + G, 0, b"after")
    view = bs._kernel_memory(1, bs.memories[1])
    offs = view.check_addresses([va, va + G], 1)
    assert bytes(view.arena[offs[0]:offs[0] + 6]) == b"before" and bytes(view.arena[offs[1]:offs[1] + 5]) == b"after"
    view.arena[offs[1]] = ord("A")  # a kernel's store through the peer span lands in the physical memory
    assert bytes(c.ok("MEMCPY_D2H", va + G, 5, 0)[0]) == b"After"
    c.ok("VMM_UNMAP", va + G, G)
    with pytest.raises(CudaError) as ei:
        view.check_addresses([va + G], 4)
    assert ei.value.code == Err.ILLEGAL_ADDRESS
    c.s.close()


def test_driver_calls_frameworks_make_at_start_up(tmp_path: Path, built: Path) -> None:
    """cuLogsRegisterCallback / cuLogsUnregisterCallback (PyTorch registers one), cuOccupancyMaxActiveClusters
    (cuBLAS asks it in cublasCreate): tests/programs/drv_startup.c."""
    s = Server(tmp_path)
    try:
        p = s.run("drv_startup", KERNELS, timeout=60)
    finally:
        s.stop()
    assert p.returncode == 0 and "logs ok" in p.stdout and "startup ok" in p.stdout, f"{p.stdout}\n{p.stderr}"
    if BACKEND == "emulator":  # an H100: clusters; no GPCs, so every block slot counts
        assert "clusters 1056 528 264 of 1056 blocks" in p.stdout


def test_vmm_through_the_multiplexer(make_server) -> None:  # noqa: ANN001
    """GPUSHIM_SERVER=a,b with device 0 on the second server: reservations, allocation handles and mappings
    are routed to the server that holds them (gpushim/server/multiplex.py), and module unloads reach both."""
    a = make_server("--emulate-gpu", "h100")
    b = make_server("--emulate-gpu", "h100", "--arena-base", "0x400000000000")
    env = {"GPUSHIM_SERVER": f"{a.url},{b.url}", "GPUSHIM_DEVICES": "1:0,0:0"}
    p = a.run("drv_vmm", KERNELS, **env)
    assert p.returncode == 0 and "vmm ok" in p.stdout, f"{p.stdout}\n{p.stderr}"
    u = a.run("drv_unload", KERNELS, **env)
    assert u.returncode == 0 and "unload ok" in u.stdout, f"{u.stdout}\n{u.stderr}"
