"""Kernels for the emulator: picks the PTX image of a fat binary, loads it into the PTX engine, places the
module's variables in device memory and launches kernels in stream order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpushim.backends.emulator.memory import DeviceMemory
from gpushim.compat.policy import Policy
from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin import FatbinError, FatbinImage, cubin_info, parse_fatbin
from gpushim.ptx import PtxError, PtxModule, PtxUnsupported, load_module, rdc
from gpushim.ptx.slicing import PtxSlicer

INVALID_DEVICE_FUNCTION = 98
INVALID_PTX = 218
_UNSET = object()


def _arch_list(images: list[FatbinImage], kind: str) -> str:
    return ", ".join(sorted({f"sm_{i.arch}" for i in images if i.kind == kind})) or "none"


@dataclass
class EmuModule:
    """One fat binary as the emulator runs it: its best PTX image, loaded lazily per device."""

    images: list[FatbinImage]
    ptx_image: FatbinImage | None
    ptx: PtxModule | None = None
    load_error: CudaError | None = None
    registers: dict[str, int] = field(default_factory=dict)  # from a cubin's .nv.info, when there is one
    symbols: dict[int, dict[str, int]] = field(default_factory=dict)  # device -> variable -> address
    choice: str = ""  # what the adaptation policy chose, for the log
    device_arch: int = 0  # the emulated device's, e.g. 90
    slicer: Any = None  # PtxSlicer of a large PTX image, None for a whole-module load; _UNSET until looked at
    slices: dict[str | None, PtxModule] = field(default_factory=dict)  # kernel (None: variables) -> its slice
    note: str = ""  # why a relocatable-device-code module has no PTX to run

    @classmethod
    def from_fatbin(cls, data: bytes, cc: tuple[int, int], policy: Policy | None = None) -> EmuModule:
        device_arch = cc[0] * 10 + cc[1]
        parts = rdc.split_fatbins(data)
        note = ""
        try:
            if rdc.is_rdc(parts):  # relocatable device code: the linked image, then each unit's fat binary
                images, best, note = rdc.load_units(parts, device_arch)
            else:
                images = parse_fatbin(data)
                best = rdc.pick_ptx(images, device_arch)
                if best is None:
                    raise CudaError(Err.NO_KERNEL_IMAGE_FOR_DEVICE, _no_ptx_message(images))
        except FatbinError as e:
            raise CudaError(Err.INVALID_KERNEL_IMAGE, f"the fat binary is malformed: {e}") from None
        except CudaError as e:
            if not rdc.is_rdc(parts):
                raise
            # the units' PTX does not link: the module loads, its kernels fail naming why
            images, best = parse_fatbin(parts[0]), None
            note = f"relocatable device code: linking the translation units' PTX failed: {e.message}"
        mod = cls(images, best, device_arch=device_arch, slicer=_UNSET, note=note)
        if policy is not None:
            # The emulated driver accepts exactly what the real one would: its choice (or refusal) stands,
            # though the engine itself always runs PTX.
            # (Re-labelling only changes .version, which the engine does not need: it runs the oldest PTX.)
            try:
                mod.choice = policy.choose_image(images, cc).reason
            except CudaError as e:
                mod.load_error = e
        for img in images:
            if img.kind == "cubin":
                try:
                    for name, k in cubin_info(img.payload).kernels.items():
                        regs = getattr(k, "registers", None)
                        if regs:
                            mod.registers.setdefault(name, int(regs))
                except FatbinError:
                    pass
        return mod

    def engine(self, kernel: str | None = None) -> PtxModule:
        """The loaded PTX module; errors name the kernel the application asked for. A large module is loaded
        a slice at a time (gpushim/ptx/slicing.py): the kernel's own code, or (kernel None) the variables."""
        what = f"kernel {kernel}" if kernel else "module variable"
        if self.ptx_image is None and self.note:
            raise CudaError(Err.NO_KERNEL_IMAGE_FOR_DEVICE, f"{what}: {self.note}")
        if self.ptx_image is None:
            raise CudaError(
                Err.NO_KERNEL_IMAGE_FOR_DEVICE,
                f"{what}: the binary carries no PTX (only cubins for {_arch_list(self.images, 'cubin')}), and the "
                "emulator runs PTX. Rebuild with PTX included, e.g. -gencode arch=compute_75,code=compute_75.",
            )
        if self.load_error:
            raise CudaError(self.load_error.code, f"{what}: {self.load_error.message}")
        if self.ptx is not None:
            return self.ptx
        if self.slicer is _UNSET:
            self.slicer = PtxSlicer.of(self.ptx_image.ptx_text)
        if self.slicer is None:
            self.ptx = self._load(self.ptx_image.ptx_text, what, whole=True)
            return self.ptx
        key = kernel if kernel in self.slicer.defs else None
        eng = self.slices.get(key)
        if eng is None:
            eng = self.slices[key] = self._load(self.slicer.slice(key), what, whole=False)
        return eng

    def _load(self, text: str, what: str, whole: bool) -> PtxModule:
        try:
            # strict=False: a kernel the engine cannot run (e.g. wgmma, sparse mma) fails when it is
            # launched (NOT_SUPPORTED, naming it), not the whole module.
            return load_module(text, f"sm_{self.ptx_image.arch}", strict=False)  # type: ignore[union-attr]
        except PtxUnsupported as e:
            err = CudaError(Err.NOT_SUPPORTED, f"{what}: the emulator cannot run this PTX: {e}")
        except PtxError as e:
            err = CudaError(INVALID_PTX, f"{what}: invalid PTX: {e}")
        if whole:
            self.load_error = err
        raise err from None

    def kernel(self, name: str, launch: bool = False) -> Any:
        """The kernel's interface. One the engine cannot run is found like any other (a real device runs it:
        cuModuleGetFunction and cudaFuncGetAttributes succeed); launching it fails with NOT_SUPPORTED, naming
        what the engine lacks. That error is reported at the launch's stream-ordered completion, so a caller
        that ignores the launch's status (CuPy ignores CUB's) still meets it at its next synchronising call
        rather than reading output nothing wrote."""
        eng = self.engine(name)
        info = eng.kernels.get(name)
        if info is None:
            raise CudaError(INVALID_DEVICE_FUNCTION, f"kernel {name} is not in its module")
        unsupported = getattr(eng, "unsupported", {})
        if launch and name in unsupported:
            raise CudaError(Err.NOT_SUPPORTED, f"kernel {name}: the emulator cannot run it: {unsupported[name]}")
        return info

    def place_symbols(self, dev: int, memory: DeviceMemory) -> dict[str, int]:
        """Addresses of the module's variables on dev, allocated and initialised on first use."""
        syms = self.symbols.get(dev)
        if syms is None:
            eng = self.engine()
            syms = {}
            try:  # module variables count against the session's memory like any allocation: all or none
                for name, g in eng.globals.items():
                    addr = memory.alloc(max(g.size, 1), kind="symbol")
                    syms[name] = addr
                    memory.write(addr, g.init[: g.size])
            except CudaError:
                for addr in syms.values():
                    memory.free(addr)
                raise
            eng.apply_relocations(memory, syms)  # pointer initialisers, visible before any launch
            self.symbols[dev] = syms
        return syms

    def function_attributes(self, name: str) -> dict[str, Any]:
        info = self.kernel(name)
        eng = self.engine(name)
        arch = self.ptx_image.arch if self.ptx_image else 0
        return {
            "sharedSizeBytes": info.static_shared_bytes,
            "constSizeBytes": sum(g.size for g in eng.globals.values() if g.space == "const"),
            "localSizeBytes": info.local_bytes,
            "maxThreadsPerBlock": 1024,
            "numRegs": self.registers.get(name, info.registers),  # a cubin's own count, else the PTX estimate
            # cudaFuncAttributes: ptxVersion is the virtual architecture of the PTX (compute_90: 90, not the ISA
            # version), binaryVersion the architecture of the code that runs (PTX is JIT-compiled for the
            # device). CUB dispatches on ptxVersion * 10, which must be one of the architectures it was built
            # for (its __CUDA_ARCH_LIST__; else cudaErrorInvalidDeviceFunction), and picks the tuning that the
            # PTX's device code was compiled with.
            "ptxVersion": arch,
            "binaryVersion": self.device_arch or arch,
            "cacheModeCA": 0,
            "maxDynamicSharedSizeBytes": 49152 - info.static_shared_bytes,
            "preferredShmemCarveout": -1,
            "clusterDimMustBeSet": 0,
            "requiredClusterWidth": 0,
            "requiredClusterHeight": 0,
            "requiredClusterDepth": 0,
            "clusterSchedulingPolicyPreference": 0,
            "nonPortableClusterSizeAllowed": 0,
        }


def _no_ptx_message(images: list[FatbinImage]) -> str:
    kernels: set[str] = set()
    for img in images:
        if img.kind == "cubin":
            try:
                kernels.update(cubin_info(img.payload).kernels)
            except FatbinError:
                pass
    # The reason first: clients print a bounded line, and C++ kernel names can be kilobytes long.
    msg = (f"the binary carries no PTX (only cubins for {_arch_list(images, 'cubin')}), and the emulator runs PTX. "
           "Rebuild with PTX included, e.g. -gencode arch=compute_75,code=compute_75.")
    if kernels:
        first = sorted(kernels, key=len)[:3]
        msg += f" Its {len(kernels)} kernel(s) include {', '.join(first)}."
    return msg
