#!/usr/bin/env python3
"""Fetch the real CUDA runtime libraries and headers that adapters/ is generated from.

For every runtime version we model (11.8, 12.4, 12.9, 13.0) this assembles

    ~/.cache/gpushim/runtimes/<ver>/lib/libcudart.so.<N>      the real shared library
    ~/.cache/gpushim/runtimes/<ver>/include/                  cuda_runtime*.h, driver_types.h, ... and crt/
    ~/.cache/gpushim/runtimes/<ver>/source.json               where it all came from (packages, sha256)

from PyPI wheels fetched with ``pip download --no-deps`` (wheels are kept in ~/.cache/gpushim/wheels/).
The runtime wheels carry libcudart and the public headers but *not* ``crt/`` (host_defines.h,
host_config.h, host_runtime.h ...), which cuda_runtime_api.h includes; ``crt/`` comes from the matching
nvcc wheel (``nvidia-cuda-nvcc-cu11/cu12``) or, for 13.x, from ``nvidia-cuda-crt``.
For 13.0 an installed /usr/local/cuda (a 13.0 tree) is used instead when present.

Usage: python adapters/tools/fetch_runtimes.py [--cache DIR] [--force] [--no-local] [VER ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

CACHE = Path(os.environ.get("GPUSHIM_CACHE", Path.home() / ".cache" / "gpushim"))


@dataclass(frozen=True)
class RuntimeSpec:
    version: str  # "12.4"
    runtime_req: str  # pip requirement for the libcudart wheel
    header_reqs: tuple[str, ...]  # pip requirements of wheels holding crt/ headers
    soname: str
    local_root: str | None = None  # use this CUDA install instead of wheels when it exists
    notes: list[str] = field(default_factory=list)


SPECS: dict[str, RuntimeSpec] = {
    "11.8": RuntimeSpec("11.8", "nvidia-cuda-runtime-cu11==11.8.89", ("nvidia-cuda-nvcc-cu11==11.8.89",),
                        "libcudart.so.11.0"),
    "12.4": RuntimeSpec("12.4", "nvidia-cuda-runtime-cu12==12.4.127", ("nvidia-cuda-nvcc-cu12==12.4.131",),
                        "libcudart.so.12"),
    # newest 12.9.x; the nvcc wheel of the same release (12.9.1: runtime 12.9.79, nvcc 12.9.86)
    "12.9": RuntimeSpec("12.9", "nvidia-cuda-runtime-cu12>=12.9,<12.10", ("nvidia-cuda-nvcc-cu12>=12.9,<12.10",),
                        "libcudart.so.12"),
    "13.0": RuntimeSpec("13.0", "nvidia-cuda-runtime>=13.0,<13.1", ("nvidia-cuda-crt>=13.0,<13.1",),
                        "libcudart.so.13", local_root="/usr/local/cuda"),
}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip_download(req: str, dest: Path) -> Path:
    """Download one wheel (no dependencies) and return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9.]+)", req)
    if m:  # exact pin already downloaded: no index query
        have = sorted(dest.glob(f"{m.group(1).replace('-', '_')}-{m.group(2)}-*.whl"))
        if have:
            return have[0]
    tmp = dest / ".incoming"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", "-d", str(tmp), req]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    wheels = list(tmp.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel for {req}, got {wheels}")
    final = dest / wheels[0].name
    wheels[0].replace(final)
    shutil.rmtree(tmp, ignore_errors=True)
    return final


def wheel_name_version(wheel: Path) -> tuple[str, str]:
    name, version = wheel.name.split("-")[:2]
    return name, version


def extract_members(wheel: Path, subdir: str, dest: Path, overwrite: bool) -> list[str]:
    """Extract every member under .../<subdir>/ (e.g. 'include') of a wheel into dest, flattening the prefix."""
    out: list[str] = []
    rx = re.compile(rf"^nvidia/[^/]+/{re.escape(subdir)}/(.+)$")
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            m = rx.match(info.filename)
            if not m or info.is_dir() or m.group(1).endswith("__init__.py"):
                continue
            target = dest / m.group(1)
            if target.exists() and not overwrite:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            out.append(m.group(1))
    return out


def local_tree_version(root: Path, dist: str) -> str | None:
    for d in (root / "dist-info").glob(f"{dist}-*.dist-info"):
        return d.name[len(dist) + 1: -len(".dist-info")]
    vj = root / "version.json"
    if vj.exists():
        data = json.loads(vj.read_text())
        return str(data.get("cuda_cudart", {}).get("version")) or None
    return None


def fetch(spec: RuntimeSpec, cache: Path, force: bool, use_local: bool = True) -> Path:
    out = cache / "runtimes" / spec.version
    meta_path = out / "source.json"
    if meta_path.exists() and not force:
        print(f"{spec.version}: cached at {out}")
        return out
    shutil.rmtree(out, ignore_errors=True)
    (out / "lib").mkdir(parents=True)
    (out / "include").mkdir()
    meta: dict[str, object] = {"version": spec.version, "soname": spec.soname}

    local = Path(spec.local_root) if spec.local_root and use_local else None
    if local and (local / "lib64" / spec.soname).exists() and (local / "include" / "crt" / "host_defines.h").exists():
        lib = (local / "lib64" / spec.soname).resolve()
        shutil.copy2(lib, out / "lib" / spec.soname)
        # headers: everything at the top level + crt/ (skip the large cccl/ tree, not needed for the host API)
        for p in (local / "include").iterdir():
            if p.is_file():
                shutil.copy2(p, out / "include" / p.name)
        shutil.copytree(local / "include" / "crt", out / "include" / "crt")
        meta.update(source="local", root=str(local.resolve()),
                    runtime_package=f"nvidia-cuda-runtime=={local_tree_version(local, 'nvidia_cuda_runtime')}",
                    header_packages=[f"nvidia-cuda-crt=={local_tree_version(local, 'nvidia_cuda_crt')}"])
    else:
        wheels = cache / "wheels"
        rt = pip_download(spec.runtime_req, wheels)
        name, ver = wheel_name_version(rt)
        libs = extract_members(rt, "lib", out / "lib", overwrite=True)
        hdrs = extract_members(rt, "include", out / "include", overwrite=True)
        if spec.soname not in libs:
            raise SystemExit(f"{rt.name} has no lib/{spec.soname} (has {libs})")
        # keep only the shared libcudart; static archives are not needed here
        for p in (out / "lib").iterdir():
            if p.name != spec.soname:
                p.unlink()
        if "cuda_runtime_api.h" not in hdrs:
            raise SystemExit(f"{rt.name} has no include/cuda_runtime_api.h")
        wheel_meta = [{"file": rt.name, "sha256": sha256(rt), "size": rt.stat().st_size}]
        header_pkgs = []
        for req in spec.header_reqs:
            hw = pip_download(req, wheels)
            hname, hver = wheel_name_version(hw)
            got = extract_members(hw, "include", out / "include", overwrite=False)
            if not any(g.startswith("crt/") for g in got):
                raise SystemExit(f"{hw.name} provided no include/crt/ headers")
            wheel_meta.append({"file": hw.name, "sha256": sha256(hw), "size": hw.stat().st_size})
            header_pkgs.append(f"{hname.replace('_', '-')}=={hver}")
        meta.update(source="pypi", runtime_package=f"{name.replace('_', '-')}=={ver}", header_packages=header_pkgs,
                    wheels=wheel_meta)
    lib = out / "lib" / spec.soname
    meta["lib_sha256"] = sha256(lib)
    if not (out / "include" / "crt" / "host_defines.h").exists():
        raise SystemExit(f"{spec.version}: no crt/host_defines.h assembled")
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{spec.version}: {meta['runtime_package']} + {meta['header_packages']} -> {out}")
    return out


def runtime_dir(version: str, cache: Path = CACHE) -> Path:
    """Return the cache dir of a fetched runtime (fetching it if needed)."""
    d = fetch(SPECS[version], cache, force=False)
    mark_wheel_version(d)
    return d


def mark_wheel_version(d: Path) -> None:
    """Keeps the wheel's ``<name>-<version>.dist-info`` folder name beside lib/, as an installed wheel has it:
    that is where a client (libgpushim) reads the exact version of a libcudart.so.11.0, which cannot say
    it without a driver."""
    try:
        meta = json.loads((d / "source.json").read_text())
    except (OSError, ValueError):
        return
    if meta.get("source") != "pypi" or not meta.get("wheels"):
        return
    name, ver = meta["wheels"][0]["file"].split("-")[:2]
    (d / f"{name}-{ver}.dist-info").mkdir(exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("versions", nargs="*", default=list(SPECS))
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--force", action="store_true", help="re-download and re-extract")
    ap.add_argument("--no-local", action="store_true", help="use PyPI wheels even where /usr/local/cuda has 13.0")
    args = ap.parse_args(argv)
    for v in args.versions:
        if v not in SPECS:
            ap.error(f"unknown version {v}; known: {', '.join(SPECS)}")
        fetch(SPECS[v], args.cache, args.force, use_local=not args.no_local)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
