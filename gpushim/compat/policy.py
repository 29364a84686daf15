"""The adaptation policy of one session: the compatibility table (adapters/compat.json) evaluated for one client
runtime version, one driver version and the devices found.

    policy = build_policy(13000, 12040, [(9, 0)])
    policy.session_verdict()          # Verdict('translate', 0, 'CUDA 13.0 application on a CUDA 12.4 driver ...')
    policy.adaptations                # one line per adaptation in force, for the session log
    policy.check_api("cudaMallocAsync")
    policy.map_error(402)             # a code the client's runtime knows
    policy.driver_has("cuFuncGetParamInfo")
    policy.choose_image(images, (9, 0))   # ImageChoice, or CudaError(222 | 209, reason)

Strategies: native, translate, emulate, reject (see docs/compatibility.md).  Everything here is pure data and
computation: no driver is touched, so the emulator, the cuda backend and ``gpushim compat-check`` share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from gpushim.abi import adapters
from gpushim.compat.table import ApiRule, CompatTable, DriverRow, fmt, load_table
from gpushim.cuda_errors import CudaError, Err
from gpushim.fatbin import FatbinError, FatbinImage, ptx_info
from gpushim.fatbin.container import FLAG_ARCH_SPECIFIC, FLAG_FAMILY_SPECIFIC

__all__ = ["STRATEGY_RANK", "ImageChoice", "Policy", "Verdict", "build_policy", "driver_features", "relabel_ptx",
           "required_isa"]

STRATEGY_RANK = {"native": 0, "translate": 1, "emulate": 2, "reject": 3}
SMALL_PARAM_LIMIT = 4096  # kernel parameter bytes every driver accepts; up to 32764 from CUDA 12.1 (r530)
LARGE_PARAM_LIMIT = 32764

_SUFFIXES = ("_ptds", "_ptsz")
_VERSION_LINE = re.compile(r"^(\s*\.version\s+)(\d+)\.(\d+)", re.M)
_TARGET = re.compile(r"^sm_(\d+)([af]?)$")


@dataclass(frozen=True)
class Verdict:
    strategy: str  # "native" | "translate" | "emulate" | "reject"
    error: int = 0  # the cudaError_t of a rejection (0 otherwise)
    reason: str = ""  # what is done, or why it is refused, for a person

    @property
    def ok(self) -> bool:
        return self.strategy != "reject"

    def worse(self, other: Verdict) -> Verdict:
        """The more drastic of two verdicts (the first one on a tie)."""
        return other if STRATEGY_RANK[other.strategy] > STRATEGY_RANK[self.strategy] else self


@dataclass(frozen=True)
class ImageChoice:
    image: FatbinImage
    strategy: str  # "native" | "translate"
    reason: str
    ptx_text: str | None = None  # the PTX to JIT (re-labelled when needed); None for a cubin

    @property
    def kind(self) -> str:
        return self.image.kind


def _isa(t: tuple[int, int]) -> str:
    return f"{t[0]}.{t[1]}"


def relabel_ptx(text: str, isa: tuple[int, int]) -> str:
    """The PTX with its ``.version`` directive set to ``isa``."""
    new, n = _VERSION_LINE.subn(lambda m: f"{m.group(1)}{isa[0]}.{isa[1]}", text, count=1)
    if not n:
        raise FatbinError("PTX has no .version directive")
    return new


def required_isa(text: str, table: CompatTable | None = None) -> tuple[tuple[int, int], list[str]]:
    """The oldest PTX ISA able to express this module, from a feature scan: its instruction families and its
    ``.target`` architectures.  Returns (isa, what needs it) -- the list names the newest requirements."""
    t = table or load_table()
    info = ptx_info(text)
    needs: list[tuple[tuple[int, int], str]] = [((1, 0), "")]
    from gpushim.fatbin.ptx import FEATURE_MIN_ISA

    for f in info.features:
        needs.append((FEATURE_MIN_ISA.get(f, (1, 0)), f"instruction family {f}"))
    for target in info.targets:
        m = _TARGET.match(target)
        if not m:
            continue
        arch = int(m.group(1))
        row = t.arch((arch // 10, arch % 10))
        if row:
            needs.append((row.min_isa, f".target {target}"))
        if m.group(2) == "a":
            needs.append((t.architectures["arch_specific"].min_isa, f".target {target} (arch-specific)"))
    top = max(n for n, _ in needs)
    return top, [why for n, why in needs if n == top and why]


@dataclass
class Policy:
    client_runtime: int  # e.g. 12040
    driver_version: int  # e.g. 13000
    device_ccs: list[tuple[int, int]]
    table: CompatTable = field(default_factory=load_table)
    _api_cache: dict[str, Verdict] = field(default_factory=dict, repr=False, compare=False)

    # -- facts ----------------------------------------------------------------------------------------------
    @property
    def client(self) -> str:
        return fmt(self.client_runtime)

    @property
    def driver(self) -> str:
        return fmt(self.driver_version)

    @cached_property
    def driver_row(self) -> DriverRow:
        return self.table.driver_row(self.driver_version)

    @property
    def driver_isa(self) -> tuple[int, int]:
        return self.driver_row.ptx_isa

    @property
    def driver_cubin_abi(self) -> tuple[int, int]:
        return self.driver_row.cubin_abi_max

    @cached_property
    def client_abi(self):  # noqa: ANN201 - adapters.RuntimeAbi | None
        try:
            return adapters.abi_for(self.client_runtime)
        except LookupError:
            return None

    @cached_property
    def driver_abi(self):  # noqa: ANN201 - the runtime ABI of the driver's CUDA major (its struct generation)
        try:
            return adapters.abi_for(self.driver_version)
        except LookupError:
            return adapters.abi(adapters.versions()[-1])

    @cached_property
    def known_errors(self) -> frozenset[int]:
        abi = self.client_abi or adapters.abi(adapters.versions()[0])
        return frozenset(abi.errors)

    def driver_has(self, feature: str) -> bool:
        """Whether the driver has a feature of the table ("cuFuncGetParamInfo", "zstd_fatbin", ...)."""
        f = self.table.features.get(feature)
        if f is None:
            raise KeyError(f"unknown feature {feature!r}; known: {', '.join(self.table.features)}")
        return f.min_driver is None or self.driver_version // 10 * 10 >= f.min_driver

    def _fmt(self, text: str, api: str = "") -> str:
        return (text.replace("{client}", self.client).replace("{driver}", self.driver)
                .replace("{linux}", f"r{self.driver_row.linux.split('.')[0]}").replace("{api}", api))

    # -- the whole session ------------------------------------------------------------------------------------
    def _session_rule(self) -> Verdict:
        for r in self.table.session:
            if self.client_runtime not in r.client or self.driver_version not in r.driver:
                continue
            if r.when == "client_le_driver" and self.client_runtime // 10 > self.driver_version // 10:
                continue
            return Verdict(r.strategy, r.error, self._fmt(r.reason))
        return Verdict("native", 0, "")

    def unsupported_devices(self) -> list[tuple[tuple[int, int], str]]:
        out = []
        for cc in self.device_ccs:
            a = self.table.arch(cc)
            if a is None:
                continue
            if self.driver_version < a.min_driver:
                out.append((cc, f"compute capability {cc[0]}.{cc[1]} needs a CUDA {fmt(a.min_driver)} driver"))
            elif a.last_major is not None and self.driver_version // 1000 > a.last_major:
                out.append((cc, f"compute capability {cc[0]}.{cc[1]} is not supported by CUDA "
                                f"{self.driver_version // 1000} drivers (last: {a.last_major}.x)"))
        return out

    @cached_property
    def _session(self) -> Verdict:
        v = self._session_rule()
        bad = self.unsupported_devices()
        if v.ok and self.device_ccs and len(bad) == len(self.device_ccs):
            why = "; ".join(w for _cc, w in bad)
            return Verdict("reject", int(Err.NO_DEVICE), f"no device the CUDA {self.driver} driver supports: {why}")
        return v

    def session_verdict(self) -> Verdict:
        return self._session

    # -- one call ---------------------------------------------------------------------------------------------
    @staticmethod
    def normalise(name: str) -> str:
        for s in _SUFFIXES:
            if name.endswith(s):
                return name[: -len(s)]
        return name

    def _rule_applies(self, r: ApiRule) -> bool:
        if self.client_runtime not in r.client or self.driver_version not in r.driver:
            return False
        if r.when == "client_newer_major":
            return self.client_runtime // 1000 > self.driver_version // 1000
        return True

    def _struct_verdict(self, api: str) -> Verdict | None:
        struct = self.table.structs.get(api)
        if struct is None or self.client_abi is None:
            return None
        mine = self.client_abi.layouts.get(struct)
        theirs = self.driver_abi.layouts.get(struct)
        if mine is None or theirs is None:
            return None
        if mine["size"] == theirs["size"] and mine["fields"] == theirs["fields"]:
            return Verdict("native", 0, "")
        return Verdict("translate", 0, f"{struct} is {mine['size']} bytes for CUDA {self.client} clients and "
                                       f"{theirs['size']} bytes in the CUDA {self.driver_version // 1000} generation: "
                                       "filled field by field at the client's offsets")

    def check_api(self, name: str) -> Verdict:
        """The strategy for one CUDA runtime function (``cudaMallocAsync``, ``cudaGraphInstantiate`` ...).
        Answers are cached: calling this on every call costs a dict lookup."""
        v = self._api_cache.get(name)
        if v is None:
            v = self._api_cache[name] = self._check_api(name)
        return v

    def _check_api(self, name: str) -> Verdict:
        session = self._session
        if not session.ok:
            return session
        api = self.normalise(name)
        for r in self.table.rules_for(api):
            if self._rule_applies(r):
                return Verdict(r.strategy, r.error, self._fmt(r.reason, api))
        return self._struct_verdict(api) or Verdict("native", 0, "")

    def check_kernel_params(self, param_bytes: int) -> Verdict:
        """Whether a kernel whose parameters take ``param_bytes`` can be launched on this driver."""
        if param_bytes <= SMALL_PARAM_LIMIT:
            return Verdict("native")
        if param_bytes > LARGE_PARAM_LIMIT:
            return Verdict("reject", int(Err.INVALID_VALUE),
                           f"kernel parameters of {param_bytes} bytes exceed CUDA's limit of {LARGE_PARAM_LIMIT}")
        if self.driver_has("large_kernel_params"):
            return Verdict("native")
        f = self.table.features["large_kernel_params"]
        return Verdict(f.below, f.error, f"{param_bytes} bytes of kernel parameters: {f.how} "
                                         f"(the server's driver implements CUDA {self.driver})")

    def map_error(self, code: int) -> int:
        """A cudaError_t the client's runtime knows: the code itself, its closest equivalent, or 999."""
        code = int(code)
        if code in self.known_errors:
            return code
        mapped = self.table.error_map.get(code)
        if mapped and mapped[0] in self.known_errors:
            return mapped[0]
        return self.table.error_default

    # -- kernel images ----------------------------------------------------------------------------------------
    def _cubin_fits(self, img: FatbinImage, cc: tuple[int, int]) -> bool:
        major, minor = divmod(img.arch, 10)
        if img.flags & FLAG_ARCH_SPECIFIC:
            return (major, minor) == cc
        return major == cc[0] and minor <= cc[1]

    def _ptx_fits(self, img: FatbinImage, cc: tuple[int, int]) -> bool:
        major, minor = divmod(img.arch, 10)
        if img.flags & FLAG_ARCH_SPECIFIC:
            return (major, minor) == cc
        if img.flags & FLAG_FAMILY_SPECIFIC:
            return major == cc[0] and minor <= cc[1]
        return (major, minor) <= cc

    def _cubin_problem(self, img: FatbinImage) -> str | None:
        if img.version > self.driver_cubin_abi:
            return (f"cubin {img.arch_name} has ELF ABI {_isa(img.version)} (CUDA 13); the CUDA {self.driver} driver "
                    f"loads up to {_isa(self.driver_cubin_abi)}")
        a = self.table.arch(divmod(img.arch, 10))
        if a and self.driver_version < a.min_driver:
            return f"cubin {img.arch_name} needs a CUDA {fmt(a.min_driver)} driver"
        if img.flags & FLAG_ARCH_SPECIFIC:
            spec = self.table.architectures["arch_specific"]
            if self.driver_version < spec.min_driver:
                return f"arch-specific cubin {img.arch_name} needs a CUDA {fmt(spec.min_driver)} driver"
        return None

    def _compression_note(self, img: FatbinImage) -> tuple[str, str] | None:
        if img.compression == "zstd" and not self.driver_has("zstd_fatbin"):
            return "translate", "zstd-compressed: gpushim decompresses it (the driver reads zstd from CUDA 12.4)"
        return None

    def choose_image(self, images: list[FatbinImage], cc: tuple[int, int]) -> ImageChoice:
        """The image this driver would run on a device of compute capability ``cc``.

        Images must be decompressed (``parse_fatbin(data)``).  Raises CudaError(222) when only PTX newer than the
        driver's ISA fits and cannot be re-labelled, CudaError(209) when nothing fits the device.
        """
        cc = (int(cc[0]), int(cc[1]))
        passed_over: list[str] = []
        cubins = [i for i in images if i.kind == "cubin" and self._cubin_fits(i, cc)]
        loadable = []
        for img in cubins:
            problem = self._cubin_problem(img)
            if problem:
                passed_over.append(problem)
            else:
                loadable.append(img)
        if loadable:
            best = max(loadable, key=lambda i: (i.arch, bool(i.flags & FLAG_ARCH_SPECIFIC)))
            strategy, reason = "native", f"cubin {best.arch_name} (ELF ABI {_isa(best.version)})"
            note = self._compression_note(best)
            if note:
                strategy, reason = note[0], f"{reason}, {note[1]}"
            return ImageChoice(best, strategy, reason)

        ptxs = sorted((i for i in images if i.kind == "ptx" and self._ptx_fits(i, cc)), key=lambda i: -i.arch)
        refusals: list[str] = []
        for img in ptxs:
            if img.compression != "none" and len(img.payload) != img.size:
                refusals.append(f"PTX {img.arch_name} is still compressed (parse the fatbin with decompression)")
                continue
            text = img.ptx_text
            prefix = "; ".join(passed_over) + "; " if passed_over else ""
            version = img.version
            strategy = "native"
            if version <= self.driver_isa:
                reason = f"{prefix}PTX {img.arch_name} (ISA {_isa(version)}) JIT-compiled for sm_{cc[0]}{cc[1]}"
                if passed_over:
                    strategy = "translate"
            else:
                try:
                    need, why = required_isa(text, self.table)
                except FatbinError as e:
                    refusals.append(f"PTX {img.arch_name} cannot be scanned: {e}")
                    continue
                if need > self.driver_isa:
                    refusals.append(
                        f"PTX {img.arch_name} has ISA {_isa(version)} and the CUDA {self.driver} driver JIT-compiles "
                        f"up to {_isa(self.driver_isa)}; it cannot be re-labelled because {', '.join(why)} needs ISA "
                        f"{_isa(need)}. Rebuild for the device (e.g. -arch=sm_{cc[0]}{cc[1]}) or use a newer driver")
                    continue
                text = relabel_ptx(text, self.driver_isa)
                strategy = "translate"
                reason = (f"{prefix}PTX {img.arch_name} re-labelled from ISA {_isa(version)} to "
                          f"{_isa(self.driver_isa)} (the feature scan needs {_isa(need)}) and JIT-compiled for "
                          f"sm_{cc[0]}{cc[1]}")
            note = self._compression_note(img)
            if note:
                strategy, reason = "translate", f"{reason}; {note[1]}"
            return ImageChoice(img, strategy, reason, text)

        if refusals:
            raise CudaError(Err.UNSUPPORTED_PTX_VERSION, "; ".join(passed_over + refusals))
        have = ", ".join(sorted({i.arch_name for i in images if i.kind in ("cubin", "ptx")})) or "no images"
        why = "; ".join(passed_over)
        raise CudaError(Err.NO_KERNEL_IMAGE_FOR_DEVICE,
                        f"no kernel image for sm_{cc[0]}{cc[1]} (has {have})" + (f": {why}" if why else "")
                        + f". Rebuild with -gencode arch=compute_{cc[0]}{cc[1]},code=[sm_{cc[0]}{cc[1]},"
                          f"compute_{cc[0]}{cc[1]}] or include PTX")

    # -- the session log --------------------------------------------------------------------------------------
    @cached_property
    def adaptations(self) -> list[str]:
        """One line per adaptation in force (empty when the session runs natively)."""
        lines: list[str] = []
        s = self._session
        if s.strategy != "native":
            lines.append(f"session: {s.strategy}" + (f" (error {s.error})" if s.error else "") + f": {s.reason}")
        if not s.ok:
            return lines
        for cc, why in self.unsupported_devices():
            lines.append(f"device sm_{cc[0]}{cc[1]}: unusable: {why}")
        client_isa = self.table.driver_row(self.client_runtime).ptx_isa
        if client_isa > self.driver_isa:
            lines.append(f"PTX: CUDA {self.client} emits PTX ISA {_isa(client_isa)}, the driver JIT-compiles up to "
                         f"{_isa(self.driver_isa)}: newer PTX is re-labelled when the feature scan allows, else "
                         "error 222")
        for f in self.table.features.values():
            if f.min_driver is None or self.client_runtime not in f.clients or self.driver_has(f.name):
                continue
            if f.name == "ptx_newer_than_driver":
                continue
            what = f.below + (f" (error {f.error})" if f.below == "reject" else "")
            lines.append(f"{f.name}: needs a CUDA {fmt(f.min_driver)} driver: {what}: {f.how}")
        seen: set[str] = set()
        for api, struct in self.table.structs.items():
            v = self._struct_verdict(api)
            if v and v.strategy != "native" and struct not in seen:
                seen.add(struct)
                lines.append(f"struct {struct}: translate: {v.reason}")
        for r in self.table.apis:
            if r.feature or not self._rule_applies(r):
                continue
            if r.strategy == "reject" and r.client.text == "*" and r.driver.text == "*":
                continue  # always-rejected calls are no adaptation of this session
            kind = f" ({r.kind})" if r.kind else ""
            lines.append(f"{', '.join(r.apis)}: {r.strategy}{kind}: {self._fmt(r.reason, r.apis[0])}")
        unknown = self._driver_only_errors()
        if unknown:
            pairs = ", ".join(f"{c}->{self.map_error(c)}" for c in unknown)
            lines.append(f"errors: codes CUDA {self.client} does not know are mapped: {pairs}; others -> "
                         f"{self.table.error_default}")
        return lines

    def _driver_only_errors(self) -> list[int]:
        """Codes the driver's runtime generation (or any newer gpushim source) knows and the client does not."""
        newest = adapters.abi(adapters.versions()[-1])
        return sorted(c for c in newest.errors if c not in self.known_errors and c in self.table.error_map)

    def describe(self) -> dict[str, object]:
        s = self._session
        return {
            "client_runtime": self.client_runtime, "driver": self.driver_version, "devices": [list(c) for c in
                                                                                              self.device_ccs],
            "driver_ptx_isa": _isa(self.driver_isa), "driver_cubin_abi": _isa(self.driver_cubin_abi),
            "session": {"strategy": s.strategy, "error": s.error, "reason": s.reason},
            "features": {name: self.driver_has(name) for name in self.table.features},
            "adaptations": list(self.adaptations),
        }


def build_policy(client_runtime: int, driver_version: int, device_ccs: list[tuple[int, int]]) -> Policy:
    """The policy for one session: client runtime (e.g. 12040), driver (e.g. 13000), the devices' (major, minor)."""
    return Policy(int(client_runtime), int(driver_version), [(int(a), int(b)) for a, b in device_ccs])


def driver_features(driver_version: int) -> dict[str, bool]:
    """What a driver of this CUDA version has, per feature of the table, whatever the client (for backends that
    present a driver version, e.g. the emulator: no cuFuncGetParamInfo below 12.4)."""
    t = load_table()
    v = int(driver_version) // 10 * 10
    return {name: f.min_driver is None or v >= f.min_driver for name, f in t.features.items()}
