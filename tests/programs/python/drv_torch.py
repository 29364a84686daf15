"""PyTorch through gpushim: the CUDA 13 wheel loads libcudart.so.13 (the shim's runtime face) and
libcuda.so.1 (its driver face). usage: drv_torch.py emulator|gpu

Both: torch.cuda.is_available(), device properties, tensors copied to the device and back. On a GPU also
add, sum and matmul, checked on the CPU. On the emulator torch's kernels carry no PTX, so the first kernel
must fail with a message that names it and says why; the program prints that message."""

import sys

import torch

assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
props = torch.cuda.get_device_properties(0)
print(f"device {props.name} cc {props.major}.{props.minor} {props.total_memory} bytes")
host = torch.arange(16)
back = host.to("cuda").cpu()
assert torch.equal(back, host), back
print("copies ok")
if sys.argv[1:] == ["gpu"]:
    a = torch.randn(256, 256)
    b = torch.randn(256, 256)
    da, db = a.cuda(), b.cuda()
    assert torch.allclose((da + db).cpu(), a + b)
    assert torch.allclose(da.sum().cpu(), a.sum(), rtol=1e-4, atol=1e-3)
    assert torch.allclose((da @ db).cpu(), a @ b, rtol=1e-3, atol=1e-3)
    print("torch kernels ok: add, sum, matmul")
else:
    try:
        (torch.ones(4, device="cuda") + 1).cpu()
    except RuntimeError as e:
        print("kernel refused:", str(e).splitlines()[0])
    else:
        raise SystemExit("a torch kernel ran on the emulator, which runs PTX only")
