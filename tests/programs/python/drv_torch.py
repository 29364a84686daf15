"""PyTorch through gpushim: the CUDA 13 wheel loads libcudart.so.13 (the shim's runtime face) and
libcuda.so.1 (its driver face). usage: drv_torch.py emulator|gpu [expandable]

Both: torch.cuda.is_available(), device properties, tensors copied to the device and back (a small one, a
64 MiB one, torch.empty + copy_, a device-to-device copy_, pinned memory with non_blocking), all checked on
the host. `expandable`: run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, so the caching allocator
maps its memory with the driver's virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap);
the program checks that its segments are expandable and that a tensor spans several mappings. On a GPU
also add, sum and matmul, checked on the CPU. On the emulator torch's kernels carry no PTX, so the first
kernel must fail; the program prints the error (the shim prints the reason, naming the kernel)."""

import os
import sys

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "emulator"
expandable = "expandable" in sys.argv[2:]
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
assert torch.cuda.device_count() >= 1
props = torch.cuda.get_device_properties(0)
print(f"device {props.name} cc {props.major}.{props.minor} {props.total_memory} bytes "
      f"{props.multi_processor_count} SMs")

host = torch.arange(16)
back = host.to("cuda").cpu()
assert torch.equal(back, host), back
big = torch.randn(16 << 20)  # 64 MiB: several of the allocator's 20 MiB expandable segments
dbig = big.to("cuda")
assert dbig.device.type == "cuda" and torch.equal(dbig.cpu(), big)
e = torch.empty(1000, dtype=torch.float64, device="cuda")
src = torch.linspace(-1, 1, 1000, dtype=torch.float64)
e.copy_(src)
assert torch.equal(e.cpu(), src)
d2 = torch.empty_like(dbig)
d2.copy_(dbig)  # device to device
assert torch.equal(d2.cpu(), big)
pinned = torch.arange(1 << 20, dtype=torch.int32).pin_memory()
dp = pinned.to("cuda", non_blocking=True)
out = torch.empty_like(pinned).pin_memory()
out.copy_(dp, non_blocking=True)
torch.cuda.synchronize()
assert torch.equal(out, pinned)
if torch.cuda.device_count() > 1:  # another device: its own memory, and copies between the two
    on1 = big.to("cuda:1")
    assert on1.device.index == 1 and torch.equal(on1.cpu(), big)
    across = dbig.to("cuda:1")  # device to device across devices (peer copy)
    assert torch.equal(across.cpu(), big)
    with torch.cuda.device(1):
        e1 = torch.empty(1000, dtype=torch.float64, device="cuda")
        e1.copy_(src)
        assert e1.device.index == 1 and torch.equal(e1.cpu(), src)
    del on1, across, e1
    print("second device ok")
print("copies ok")
assert torch.cuda.current_blas_handle() != 0  # cublasCreate: cuOccupancyMaxActiveClusters, CU_LIMIT_CIG_ENABLED
print("cublas handle ok")

if expandable:
    assert "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    segments = torch.cuda.memory._snapshot()["segments"]
    assert segments and all(s.get("is_expandable") for s in segments), segments
    assert max(s["total_size"] for s in segments) >= 64 << 20  # the big tensor spans several mappings
    del dbig, d2
    torch.cuda.empty_cache()  # unmaps and releases what is free
    again = big.to("cuda")
    assert torch.equal(again.cpu(), big)
    print("expandable segments ok")

if mode == "gpu":
    a = torch.randn(256, 256)
    b = torch.randn(256, 256)
    da, db = a.cuda(), b.cuda()
    assert torch.allclose((da + db).cpu(), a + b)
    assert torch.allclose(da.sum().cpu(), a.sum(), rtol=1e-4, atol=1e-3)
    assert torch.allclose((da @ db).cpu(), a @ b, rtol=1e-3, atol=1e-3)
    print("torch kernels ok: add, sum, matmul")
else:
    try:
        (torch.arange(4.0).to("cuda") + 1).cpu()  # the copy works; the add is torch's first kernel
    except RuntimeError as err:
        print("kernel refused:", str(err).splitlines()[0])
    else:
        raise SystemExit("a torch kernel ran on the emulator, which runs PTX only")
    # matmul: cuBLAS gets through gpushim's driver (its private-table questions answered). A product with at
    # most 16 columns runs on cuBLAS's gemmSN kernel, which carries PTX: right on the emulator. Larger ones use
    # sm_90-only kernels: cuBLAS reports the failed launch, torch raises.
    a, b = torch.randn(8, 40), torch.randn(40, 24)  # column-major for cuBLAS: 8 columns
    assert torch.allclose((a.to("cuda") @ b.to("cuda")).cpu(), a @ b, rtol=1e-4, atol=1e-4)
    print("small matmul ok")
    try:
        m = torch.ones(64, 64).to("cuda")  # a copy, no kernel
        (m @ m).cpu()
    except RuntimeError as err:
        print("matmul refused:", str(err).splitlines()[0])
    else:
        raise SystemExit("a cuBLAS sm_90-only kernel ran on the emulator, which runs PTX only")
