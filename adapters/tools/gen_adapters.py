#!/usr/bin/env python3
"""Generate adapters/cudart/<V>/ from the real libcudart and headers of each CUDA runtime version.

Inputs come from ``fetch_runtimes.py`` (~/.cache/gpushim/runtimes/<V>/{lib,include,source.json}).
Outputs, per version V (small, committed, deterministic):

  exports.txt      every function libcudart defines in its version node, sorted        (readelf --dyn-syms)
  prototypes.json  C prototype of every export, from the preprocessed headers          (gcc -E + pycparser)
  layouts.json     sizeof/alignof and every field's offset/size/type of every struct   (gcc offsetof probes)
  errors.json      name and message of every cudaError_t code the library knows        (ctypes, one process each)
  version.json     runtime version, soname, version nodes, enum values, header aliases (readelf, gcc probes)

Nothing here is written by hand except HAND_PROTOTYPES (exports declared in no header C can parse).

Usage: python adapters/tools/gen_adapters.py [--out adapters/cudart] [VER ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pycparser import c_ast, c_generator, c_parser

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_runtimes import CACHE, SPECS, runtime_dir  # noqa: E402

ADAPTERS = Path(__file__).resolve().parent.parent
VERSIONS = list(SPECS)

# Structs the brief names explicitly; every struct of cuda_runtime_api.h is laid out, these must exist
# (cudaChildGraphNodeParams only from 12.x).
REQUIRED_LAYOUTS = [
    "cudaDeviceProp", "cudaFuncAttributes", "cudaPointerAttributes", "cudaResourceDesc", "cudaResourceViewDesc",
    "cudaExternalMemoryHandleDesc", "cudaExternalMemoryBufferDesc", "cudaExternalMemoryMipmappedArrayDesc",
    "cudaExternalSemaphoreHandleDesc", "cudaChildGraphNodeParams", "cudaLaunchConfig_t", "cudaLaunchAttribute",
    "cudaKernelNodeParams", "cudaMemLocation", "cudaMemcpy3DParms", "cudaPitchedPtr", "cudaExtent", "cudaPos",
    "cudaChannelFormatDesc", "cudaIpcMemHandle_t", "cudaIpcEventHandle_t",
]
VERSION_ENUMS = ["cudaDeviceAttr", "cudaMemcpyKind", "cudaLimit", "cudaFuncAttribute", "cudaError"]

# Exports that no header declares in a form a C preprocessor + parser can read. Signatures from NVIDIA's
# crt/host_runtime.h / crt/device_functions.h (C++-only parts) and from the CUDA driver/runtime docs;
# only used for names the generated header parse did not find (the 'source' field says which).
HAND_PROTOTYPES: dict[str, str] = {
    # crt/host_runtime.h (C++ only: extern "C" blocks)
    "__cudaRegisterFatBinary": "void **__cudaRegisterFatBinary(void *fatCubin)",
    "__cudaRegisterFatBinaryEnd": "void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)",
    "__cudaUnregisterFatBinary": "void __cudaUnregisterFatBinary(void **fatCubinHandle)",
    "__cudaRegisterVar": "void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, "
                         "const char *deviceName, int ext, size_t size, int constant, int global)",
    "__cudaRegisterManagedVar": "void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, "
                                "char *deviceAddress, const char *deviceName, int ext, size_t size, int constant, "
                                "int global)",
    "__cudaInitModule": "char __cudaInitModule(void **fatCubinHandle)",
    "__cudaRegisterTexture": "void __cudaRegisterTexture(void **fatCubinHandle, "
                             "const struct textureReference *hostVar, const void **deviceAddress, "
                             "const char *deviceName, int dim, int norm, int ext)",
    "__cudaRegisterSurface": "void __cudaRegisterSurface(void **fatCubinHandle, "
                             "const struct surfaceReference *hostVar, const void **deviceAddress, "
                             "const char *deviceName, int dim, int ext)",
    "__cudaRegisterFunction": "void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, "
                              "char *deviceFun, const char *deviceName, int thread_limit, uint3 *tid, "
                              "uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)",
    "__cudaPopCallConfiguration": "cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, "
                                  "size_t *sharedMem, void *stream)",
    # crt/device_functions.h (C++ only, under __CUDACC__)
    "__cudaPushCallConfiguration": "unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, "
                                   "size_t sharedMem, struct CUstream_st *stream)",
    "__cudaGetKernel": "cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)",
    "__cudaLaunchKernel": "cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, "
                          "void **args, size_t sharedMem, cudaStream_t stream)",
    "__cudaLaunchKernel_ptsz": "cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, "
                               "dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream)",
    # in no public header; signature as declared by LLVM flang's CUDA runtime (flang-rt registration.cpp)
    "__cudaRegisterHostVar": "void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName, "
                             "char *hostVar, size_t size)",
    # in no header (12.x+); libcudart 12.4's entry saves rdi, rsi, rdx, rcx, r8 and forwards them: five
    # integer/pointer arguments. Meaning and return type are NOT known; treat as opaque pass-through.
    "__cudaRegisterUnifiedTable": "void __cudaRegisterUnifiedTable(void *a0, void *a1, void *a2, void *a3, void *a4)",
    # libcudart 13.0's implementation is `xor eax,eax; ret`: it reads no arguments and returns 0
    "__cudaGetProcAddress": "int __cudaGetProcAddress(void)",
    # cuda_profiler_api.h ships in a separate wheel (nvidia-cuda-profiler-api), not with the runtime
    "cudaProfilerStart": "cudaError_t cudaProfilerStart(void)",
    "cudaProfilerStop": "cudaError_t cudaProfilerStop(void)",
    "cudaProfilerInitialize": "cudaError_t cudaProfilerInitialize(const char *configFile, const char *outputFile, "
                              "cudaOutputMode_t outputMode)",  # 11.x only
}
UNCERTAIN = {"__cudaRegisterUnifiedTable", "__cudaGetProcAddress"}

STUB_HEADERS: dict[str, str] = {
    # Used only for the parse (pycparser cannot read glibc's headers); layouts use the real system headers.
    "stddef.h": "#ifndef STUB_STDDEF\n#define STUB_STDDEF\ntypedef unsigned long size_t; typedef long ptrdiff_t;\n"
                "typedef int wchar_t;\n#define NULL ((void*)0)\n#endif\n",
    "stdlib.h": "#include <stddef.h>\n",
    "ctype.h": "",
    "features.h": "#define __THROW\n",
    "limits.h": "#define CHAR_BIT 8\n#define INT_MAX 2147483647\n#define INT_MIN (-INT_MAX - 1)\n"
                "#define UINT_MAX 4294967295U\n#define LONG_MAX 9223372036854775807L\n"
                "#define ULONG_MAX 18446744073709551615UL\n",
    "GL/gl.h": "typedef unsigned int GLenum; typedef unsigned int GLuint; typedef int GLint;\n",
    "vdpau/vdpau.h": "typedef unsigned int VdpDevice; typedef unsigned int VdpVideoSurface;\n"
                     "typedef unsigned int VdpOutputSurface; typedef unsigned int VdpFuncId; typedef int VdpStatus;\n"
                     "typedef VdpStatus VdpGetProcAddress(VdpDevice device, VdpFuncId function_id, "
                     "void **function_pointer);\n",
    "EGL/egl.h": "typedef void *EGLImageKHR; typedef void *EGLStreamKHR; typedef void *EGLSyncKHR;\n"
                 "typedef int EGLint; typedef unsigned int EGLenum; typedef unsigned int EGLBoolean;\n"
                 "typedef void *EGLDisplay;\n",
    "EGL/eglext.h": "",
}
PARSE_DEFINES = ["-D__attribute__(x)=", "-D__extension__=", "-D__inline__=inline", "-D__restrict__=",
                 "-D__restrict="]
# header configurations: internal = how NVIDIA builds libcudart (declares every export under its own name)
CONFIGS: dict[str, list[str]] = {
    "internal": ["-D__CUDA_API_VERSION_INTERNAL"],
    "default": [],
    "per_thread": ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"],
}
# (cuda_profiler_api.h is left out on purpose: no runtime wheel ships it, so it would make the output depend on
# whether a full toolkit was used; its two functions are in HAND_PROTOTYPES)
API_HEADERS = ["cuda_runtime.h", "cuda_gl_interop.h", "cuda_egl_interop.h", "cuda_vdpau_interop.h"]

_GEN = c_generator.CGenerator()


def run(cmd: list[str], **kw: Any) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def norm_type(s: str) -> str:
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*\*\s*", "*", s)
    s = s.replace("(*)", " (*)").replace("  ", " ")
    return s


def type_text(node: c_ast.Node) -> str:
    n = copy.deepcopy(node)
    t = n
    while isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl, c_ast.FuncDecl)):
        t = t.type
    if isinstance(t, c_ast.TypeDecl):
        t.declname = None
    return norm_type(_GEN.visit(c_ast.Typename(None, [], None, n)))


# ---------------------------------------------------------------- ELF


@dataclass
class ElfInfo:
    exports: list[str]
    objects: list[str]
    nodes: list[str]
    soname: str


def read_elf(lib: Path) -> ElfInfo:
    funcs: set[str] = set()
    objects: set[str] = set()
    nodes: set[str] = set()
    for line in run(["readelf", "--dyn-syms", "-W", str(lib)]).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit() or f[6] == "UND":
            continue
        name, _, node = f[7].partition("@@")
        if not node:
            name, _, node = f[7].partition("@")
        if f[3] == "FUNC" and f[4] in ("GLOBAL", "WEAK"):
            funcs.add(name)
            nodes.add(node)
        elif f[3] == "OBJECT" and f[4] in ("GLOBAL", "WEAK"):
            objects.add(name)
    dyn = run(["readelf", "-d", "-W", str(lib)])
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    verdef = re.findall(r"Name: (\S+)", run(["readelf", "-V", "-W", str(lib)]).split("Version needs")[0])
    return ElfInfo(sorted(funcs), sorted(objects), sorted(set(verdef) | nodes), m.group(1) if m else "")


# ---------------------------------------------------------------- header parsing


def write_stubs(d: Path) -> Path:
    stubs = d / "stubs"
    for rel, text in STUB_HEADERS.items():
        p = stubs / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return stubs


def crt_extras(inc: Path) -> str:
    """C versions of the __cuda* declarations in the C++-only parts of crt/host_runtime.h, device_functions.h."""
    out = []
    rx = re.compile(r'extern\s+(?:"C"\s+)?([^;{}#]*?\b(__cuda\w+)\s*\(([^;{}#]*?)\))\s*;', re.S)
    for rel in ("crt/host_runtime.h", "crt/device_functions.h"):
        p = inc / rel
        if not p.exists():
            continue
        for m in rx.finditer(p.read_text(errors="replace")):
            text = m.group(1)
            text = re.sub(r"\b__(host|device)__\b", "", text)
            text = re.sub(r"\s*=\s*[^,)]+", "", text)  # C++ default arguments
            out.append(f"extern {' '.join(text.split())};")
    return "\n".join(dict.fromkeys(out)) + "\n"


def preprocess(inc: Path, stubs: Path, work: Path, config: str, headers: list[str], extra: str = "") -> str:
    src = work / f"parse_{config}.c"
    lines = [f"#include <{h}>" for h in headers if (inc / h).exists()]
    if extra:
        (work / "gpushim_extra.h").write_text(extra)
        lines.append('#include "gpushim_extra.h"')
    src.write_text("\n".join(lines) + "\n")
    return run(["gcc", "-E", "-P", "-x", "c", "-nostdinc", f"-I{stubs}", f"-I{inc}", f"-I{work}", *PARSE_DEFINES,
                *CONFIGS[config], str(src)])


def parse(text: str) -> c_ast.FileAST:
    return c_parser.CParser().parse(text, "<cuda headers>")


def prototype(decl: c_ast.Decl) -> dict[str, Any]:
    fd: c_ast.FuncDecl = decl.type
    params: list[dict[str, str | None]] = []
    variadic = False
    for p in (fd.args.params if fd.args else []):
        if isinstance(p, c_ast.EllipsisParam):
            variadic = True
            continue
        t = type_text(p.type)
        if t == "void" and isinstance(p, c_ast.Typename):
            continue
        params.append({"name": getattr(p, "name", None), "type": t})
    ret = type_text(fd.type)
    pdecl = ", ".join(" ".join(_GEN.visit(p).split()) for p in (fd.args.params if fd.args else [])) or "void"
    return {
        "return": ret,
        "params": params,
        "variadic": variadic,
        "decl": f"{ret} {decl.name}({pdecl})",
        "returns_error": ret == "cudaError_t",
    }


def declared_functions(ast: c_ast.FileAST) -> dict[str, c_ast.Decl]:
    out: dict[str, c_ast.Decl] = {}
    for n in ast.ext:
        if isinstance(n, c_ast.Decl) and isinstance(n.type, c_ast.FuncDecl) and n.name:
            out.setdefault(n.name, n)
    return out


def hand_prototypes(stubs: Path, inc: Path, work: Path, names: list[str]) -> dict[str, c_ast.Decl]:
    extra = "\n".join(f"extern {d};" for n, d in HAND_PROTOTYPES.items() if n in names) + "\n"
    ast = parse(preprocess(inc, stubs, work, "default", ["cuda_runtime_api.h"], extra))
    return {k: v for k, v in declared_functions(ast).items() if k in HAND_PROTOTYPES}


def gen_prototypes(exports: list[str], inc: Path, stubs: Path, work: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    extra = crt_extras(inc)
    crt_names = set(re.findall(r"\b(__cuda\w+)\s*\(", extra))
    found: dict[str, tuple[str, c_ast.Decl]] = {}
    asts: dict[str, c_ast.FileAST] = {}
    for config in CONFIGS:
        asts[config] = parse(preprocess(inc, stubs, work, config, API_HEADERS, extra))
        for name, d in declared_functions(asts[config]).items():
            found.setdefault(name, ("header:crt" if name in crt_names else f"header:{config}", d))
    hand = hand_prototypes(stubs, inc, work, [n for n in exports if n not in found])
    protos: dict[str, Any] = {}
    undeclared: list[str] = []
    for name in exports:
        if name in found:
            src, d = found[name]
        elif name in hand:
            src, d = ("hand:uncertain" if name in UNCERTAIN else "hand"), hand[name]
        else:
            undeclared.append(name)
            continue
        protos[name] = {"source": src, **prototype(d)}
    meta = {
        "undeclared_in_headers": sorted(n for n in exports if n not in found),
        "no_prototype": undeclared,
        "declared_not_exported": sorted(n for n in found if n not in protos and re.match(r"_*cuda", n)),
        "non_error_returns": sorted(n for n, p in protos.items() if not p["returns_error"]),
    }
    return protos, meta


def header_aliases(names: list[str], inc: Path, work: Path) -> dict[str, dict[str, str]]:
    """What each API name becomes after the headers' macros (e.g. cudaGetDeviceProperties -> ..._v2)."""
    out: dict[str, dict[str, str]] = {}
    for config in ("default", "per_thread"):
        src = work / f"alias_{config}.c"
        body = "\n".join(f'"{n}" {n}' for n in names)
        src.write_text(f"#include <cuda_runtime_api.h>\nGPUSHIM_ALIASES_BEGIN\n{body}\n")
        text = run(["gcc", "-E", "-P", "-x", "c", f"-I{inc}", *CONFIGS[config], str(src)])
        tail = text.split("GPUSHIM_ALIASES_BEGIN", 1)[1]
        m: dict[str, str] = {}
        for src_name, expanded in re.findall(r'"(\w+)"\s+(\w+)', tail):
            if src_name != expanded:
                m[src_name] = expanded
        out[config] = dict(sorted(m.items()))
    return out


# ---------------------------------------------------------------- layouts


@dataclass
class Field:
    path: str
    type: str
    ndims: int
    kind: str  # of the (array element) type, typedefs resolved: scalar | pointer | function | struct | union | enum
    bits: int | None = None
    anonymous: str | None = None  # "union"/"struct" when the member sits in a C11 anonymous union/struct


@dataclass
class StructDef:
    key: str
    c_type: str
    kind: str
    node: c_ast.Struct | c_ast.Union


def field_kind(t: c_ast.Node, typedefs: dict[str, c_ast.Node], depth: int = 0) -> str:
    if isinstance(t, c_ast.PtrDecl):
        return "pointer"
    if isinstance(t, c_ast.FuncDecl):
        return "function"
    if isinstance(t, c_ast.ArrayDecl):
        return field_kind(t.type, typedefs, depth + 1)
    if isinstance(t, c_ast.TypeDecl):
        if isinstance(t.type, c_ast.Struct):
            return "struct"
        if isinstance(t.type, c_ast.Union):
            return "union"
        if isinstance(t.type, c_ast.Enum):
            return "enum"
        if isinstance(t.type, c_ast.IdentifierType) and len(t.type.names) == 1 and depth < 20:
            target = typedefs.get(t.type.names[0])
            if target is not None:
                return field_kind(target, typedefs, depth + 1)
    return "scalar"


def typedef_map(ast: c_ast.FileAST) -> dict[str, c_ast.Node]:
    return {n.name: n.type for n in ast.ext if isinstance(n, c_ast.Typedef)}


def flatten(node: c_ast.Struct | c_ast.Union, prefix: str, out: list[Field], typedefs: dict[str, c_ast.Node],
            anonymous: str | None = None) -> None:
    for d in node.decls or []:
        t = d.type
        if d.name is None:  # C11 anonymous struct/union member
            inner = t.type if isinstance(t, c_ast.TypeDecl) else t
            if isinstance(inner, (c_ast.Struct, c_ast.Union)) and inner.decls is not None:
                flatten(inner, prefix, out, typedefs, "struct" if isinstance(inner, c_ast.Struct) else "union")
            continue
        ndims = 0
        while isinstance(t, c_ast.ArrayDecl):
            ndims += 1
            t = t.type
        path = prefix + d.name
        inline = isinstance(t, c_ast.TypeDecl) and isinstance(t.type, (c_ast.Struct, c_ast.Union)) \
            and t.type.decls is not None
        if inline:
            kw = "struct" if isinstance(t.type, c_ast.Struct) else "union"
            tt = f"{kw} {t.type.name}" if t.type.name else f"{kw} {{...}}"
        else:
            tt = type_text(t)
        bits = int(d.bitsize.value, 0) if isinstance(d.bitsize, c_ast.Constant) else None
        out.append(Field(path, tt, ndims, field_kind(t, typedefs), bits, anonymous))
        if inline:
            flatten(t.type, path + "[0]" * ndims + ".", out, typedefs)


def struct_defs(ast: c_ast.FileAST) -> tuple[dict[str, StructDef], dict[str, str]]:
    defs: dict[str, StructDef] = {}
    aliases: dict[str, str] = {}

    def visit_type(t: c_ast.Node, typedef_name: str | None) -> None:
        while isinstance(t, (c_ast.TypeDecl, c_ast.PtrDecl, c_ast.ArrayDecl)):
            if not isinstance(t, c_ast.TypeDecl):
                typedef_name = None  # typedef of a pointer/array: not an alias of the struct itself
            t = t.type
        if not isinstance(t, (c_ast.Struct, c_ast.Union)):
            return
        kw = "struct" if isinstance(t, c_ast.Struct) else "union"
        if t.decls is not None:
            if t.name:
                defs.setdefault(t.name, StructDef(t.name, f"{kw} {t.name}", kw, t))
                if typedef_name and typedef_name != t.name:
                    aliases[typedef_name] = t.name
            elif typedef_name:
                defs.setdefault(typedef_name, StructDef(typedef_name, typedef_name, kw, t))
        elif t.name and typedef_name and typedef_name != t.name:
            aliases[typedef_name] = t.name

    for n in ast.ext:
        if isinstance(n, c_ast.Typedef):
            visit_type(n.type, n.name)
        elif isinstance(n, c_ast.Decl):
            visit_type(n.type, None)
    # only keep aliases whose target is defined
    return defs, {k: v for k, v in sorted(aliases.items()) if v in defs}


def enum_defs(ast: c_ast.FileAST) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}

    def visit(t: c_ast.Node, typedef_name: str | None) -> None:
        while isinstance(t, c_ast.TypeDecl):
            t = t.type
        if isinstance(t, c_ast.Enum) and t.values is not None:
            key = t.name or typedef_name
            if key:
                out.setdefault(key, [e.name for e in t.values.enumerators])

    for n in ast.ext:
        if isinstance(n, c_ast.Typedef):
            visit(n.type, n.name)
        elif isinstance(n, c_ast.Decl):
            visit(n.type, None)
    return out


def c_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def probe(inc: Path, work: Path, defs: dict[str, StructDef], fields: dict[str, list[Field]],
          enums: dict[str, list[str]], macros: list[str]) -> list[list[str]]:
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <cuda_runtime_api.h>",
             "int main(void) {"]
    for key, sd in defs.items():
        T = sd.c_type
        lines.append(f'printf("S\\t%s\\t%zu\\t%zu\\n", {c_str(key)}, sizeof({T}), _Alignof({T}));')
        for f in fields[key]:
            if f.bits is not None:
                continue
            m = f.path
            lines.append(f'printf("F\\t%s\\t%s\\t%zu\\t%zu\\n", {c_str(key)}, {c_str(m)}, offsetof({T}, {m}), '
                         f'sizeof((({T}*)0)->{m}));')
            for i in range(f.ndims):
                a = f"(({T}*)0)->{m}" + "[0]" * i
                lines.append(f'printf("D\\t%s\\t%s\\t%d\\t%zu\\n", {c_str(key)}, {c_str(m)}, {i}, '
                             f'sizeof({a}) / sizeof({a}[0]));')
    for ename, names in enums.items():
        for n in names:
            lines.append(f'printf("E\\t%s\\t%s\\t%lld\\n", {c_str(ename)}, {c_str(n)}, (long long){n});')
    for mac in macros:
        lines.append(f"#ifdef {mac}\n"
                     f'printf("M\\t%s\\t%lld\\n", {c_str(mac)}, (long long)({mac}));\n#endif')
    lines += ["return 0;", "}"]
    src = work / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    exe = work / "probe"
    subprocess.run(["gcc", "-std=gnu11", "-w", f"-I{inc}", str(src), "-o", str(exe)], check=True)
    return [ln.split("\t") for ln in run([str(exe)]).splitlines()]


def gen_layouts(inc: Path, stubs: Path, work: Path) -> tuple[dict[str, Any], dict[str, dict[str, int]], dict[str, int]]:
    ast = parse(preprocess(inc, stubs, work, "default", ["cuda_runtime_api.h"]))
    defs, aliases = struct_defs(ast)
    fields: dict[str, list[Field]] = {k: [] for k in defs}
    typedefs = typedef_map(ast)
    for k, sd in defs.items():
        flatten(sd.node, "", fields[k], typedefs)
    enums = enum_defs(ast)
    rows = probe(inc, work, defs, fields, enums, ["CUDART_VERSION", "__CUDART_API_VERSION"])
    sizes: dict[str, tuple[int, int]] = {}
    offs: dict[tuple[str, str], tuple[int, int]] = {}
    dims: dict[tuple[str, str], list[int]] = {}
    enum_vals: dict[str, dict[str, int]] = {k: {} for k in enums}
    macros: dict[str, int] = {}
    for r in rows:
        if r[0] == "S":
            sizes[r[1]] = (int(r[2]), int(r[3]))
        elif r[0] == "F":
            offs[(r[1], r[2])] = (int(r[3]), int(r[4]))
        elif r[0] == "D":
            dims.setdefault((r[1], r[2]), []).append(int(r[4]))
        elif r[0] == "E":
            enum_vals[r[1]][r[2]] = int(r[3])
        elif r[0] == "M":
            macros[r[1]] = int(r[2])
    structs: dict[str, Any] = {}
    for k in sorted(defs):
        sd = defs[k]
        flist = []
        for f in fields[k]:
            entry: dict[str, Any] = {"name": f.path, "type": f.type}
            if f.bits is not None:
                entry["bits"] = f.bits
            else:
                off, size = offs[(k, f.path)]
                entry.update(offset=off, size=size)
            if f.ndims:
                d = dims[(k, f.path)]
                entry["count"] = 1
                for x in d:
                    entry["count"] *= x
                if len(d) > 1:
                    entry["dims"] = d
            entry["kind"] = f.kind
            if f.anonymous:
                entry["anonymous"] = f.anonymous
            flist.append(entry)
        size, align = sizes[k]
        structs[k] = {"c_type": sd.c_type, "kind": sd.kind, "size": size, "align": align, "fields": flist}
    check_layouts(structs)
    return {"structs": structs, "aliases": aliases}, enum_vals, macros


def check_layouts(structs: dict[str, Any]) -> None:
    """Sanity: every field lies inside its struct (members of anonymous unions legitimately overlap)."""
    for k, s in structs.items():
        for f in s["fields"]:
            if "offset" in f:
                assert f["offset"] + f["size"] <= s["size"], (k, f)


# ---------------------------------------------------------------- errors (real libcudart, one process each)

ERRORS_CHILD = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
codes = json.loads(sys.argv[2])
lib.cudaGetErrorName.restype = ctypes.c_char_p
lib.cudaGetErrorString.restype = ctypes.c_char_p
out = {}
for c in codes:
    out[c] = [lib.cudaGetErrorName(c).decode(), lib.cudaGetErrorString(c).decode()]
v = ctypes.c_int(-1)
rc = lib.cudaRuntimeGetVersion(ctypes.byref(v))
print(json.dumps({"errors": out, "runtime_get_version": {"error": rc, "value": v.value}}))
"""


def query_errors(lib: Path, extra_codes: list[int]) -> dict[str, Any]:
    codes = sorted(set(range(0, 1001)) | set(extra_codes))
    res = subprocess.run([sys.executable, "-c", ERRORS_CHILD, str(lib), json.dumps(codes)], check=True,
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""})
    return json.loads(res.stdout)


# ---------------------------------------------------------------- main


def dump(path: Path, obj: Any, compact_keys: tuple[str, ...] = ()) -> None:
    """JSON with one line per entry of the dicts/lists named in compact_keys (small, diff-friendly)."""
    parts = []
    for k, v in obj.items():
        if k in compact_keys and isinstance(v, dict):
            inner = ",\n".join(f"  {json.dumps(ik)}: {json.dumps(iv)}" for ik, iv in v.items())
            parts.append(f" {json.dumps(k)}: {{\n{inner}\n }}")
        elif k in compact_keys and isinstance(v, list):
            inner = ",\n".join(f"  {json.dumps(iv)}" for iv in v)
            parts.append(f" {json.dumps(k)}: [\n{inner}\n ]")
        else:
            parts.append(f" {json.dumps(k)}: {json.dumps(v)}")
    path.write_text("{\n" + ",\n".join(parts) + "\n}\n")


def generate(version: str, out_root: Path, cache: Path) -> dict[str, Any]:
    rt = runtime_dir(version, cache)
    src = json.loads((rt / "source.json").read_text())
    spec = SPECS[version]
    lib = rt / "lib" / spec.soname
    inc = rt / "include"
    out = out_root / version
    out.mkdir(parents=True, exist_ok=True)
    elf = read_elf(lib)
    (out / "exports.txt").write_text("\n".join(elf.exports) + "\n")
    with tempfile.TemporaryDirectory(prefix=f"gpushim-adapters-{version}-") as tmp:
        work = Path(tmp)
        stubs = write_stubs(work)
        protos, pmeta = gen_prototypes(elf.exports, inc, stubs, work)
        layouts, enum_vals, macros = gen_layouts(inc, stubs, work)
        stripped = {re.sub(r"(_v\d+)?(_ptds|_ptsz)?$", "", n) for n in elf.exports}
        aliases = header_aliases(sorted(set(elf.exports) | stripped), inc, work)
    missing = [n for n in REQUIRED_LAYOUTS if n not in layouts["structs"] and n not in layouts["aliases"]]
    layouts["missing_required"] = missing
    dump(out / "prototypes.json", {"version": version, **pmeta, "functions": protos}, ("functions",))
    dump(out / "layouts.json", {"version": version, "required": REQUIRED_LAYOUTS, **layouts}, ("structs", "aliases"))

    err_enum = enum_vals.get("cudaError", {})
    q = query_errors(lib, list(err_enum.values()))
    errors = []
    for code_s, (name, msg) in sorted(q["errors"].items(), key=lambda kv: int(kv[0])):
        if name == "unrecognized error code":
            continue
        errors.append({"code": int(code_s), "name": name, "message": msg})
    known = {e["code"] for e in errors}
    dump(out / "errors.json", {
        "version": version,
        "unknown_name": "unrecognized error code",
        "known_codes": sorted(known),
        "enum_codes_unknown_to_library": sorted(v for v in err_enum.values() if v not in known),
        "errors": errors,
    }, ("errors",))
    enums_out = {k: enum_vals[k] for k in VERSION_ENUMS if k in enum_vals}
    enums_out.update({k: v for k, v in sorted(enum_vals.items()) if k not in enums_out})
    dump(out / "version.json", {
        "version": version,
        "runtime_version": macros.get("CUDART_VERSION"),
        "runtime_get_version_without_driver": q["runtime_get_version"],
        "runtime_package": src.get("runtime_package"),
        "header_packages": src.get("header_packages"),
        "lib_sha256": src.get("lib_sha256"),
        "soname": elf.soname,
        "nodes": elf.nodes,
        "exported_objects": elf.objects,
        "export_count": len(elf.exports),
        "header_aliases": aliases,
        "enums": enums_out,
    }, ("enums",))
    return {"version": version, "exports": len(elf.exports), "prototypes": len(protos),
            "undeclared": pmeta["undeclared_in_headers"], "no_prototype": pmeta["no_prototype"],
            "missing_layouts": missing, "errors_known": len(known),
            "sizes": {k: layouts["structs"][layouts["aliases"].get(k, k)]["size"]
                      for k in REQUIRED_LAYOUTS if k not in missing}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="*", default=VERSIONS)
    ap.add_argument("--out", type=Path, default=ADAPTERS / "cudart")
    ap.add_argument("--cache", type=Path, default=CACHE)
    args = ap.parse_args(argv)
    for v in args.versions:
        summary = generate(v, args.out, args.cache)
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
