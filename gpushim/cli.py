"""The `gpushim` command: serve, run, status, devices, images, shim-path."""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from gpushim import __version__
from gpushim.paths import server_url, shim_path

BACKENDS = ["auto", "emulator", "cuda"]


class ByteSize(click.ParamType):
    """A size in bytes: 1048576, 64K, 512M, 2G, 1T (powers of 1024)."""

    name = "bytes"
    _UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
        unit = text[-1:] if text[-1:] in self._UNITS else ""
        try:
            n = int(text[: len(text) - len(unit)]) * self._UNITS[unit]
        except ValueError:
            self.fail(f"{value!r} is not a size (e.g. 1048576, 64M, 2G)", param, ctx)
        if n < 0:
            self.fail(f"{value!r}: a size cannot be negative", param, ctx)
        return n


def make_backend(name: str, emulate_gpu: str, emulate_devices: int, emulate_driver: str,  # noqa: ANN201
                 memory_cap: int | None = None, arena_base: int | None = None):
    """The backend for `serve` / `devices`; exits with a clear message when it cannot be had."""
    from gpushim.backends.emulator.backend import EmulatorBackend

    if name in ("auto", "cuda"):
        from gpushim.backends.probe import probe_cuda

        usable, why = probe_cuda()
        if name == "cuda" and not usable:
            raise click.ClickException(f"--backend cuda: no usable NVIDIA GPU: {why}")
        if usable:
            import importlib.util

            if importlib.util.find_spec("gpushim.backends.cuda") is None:
                # The cuda backend is the issue "Real GPUs"; until it lands a GPU machine uses the emulator.
                if name == "cuda":
                    raise click.ClickException("--backend cuda: a GPU is present but this gpushim has no cuda "
                                               "backend yet; use --backend emulator")
                reason = f"auto: {why}, but this gpushim has no cuda backend yet"
            else:
                from gpushim.backends.cuda import CudaBackend
                from gpushim.backends.cuda.backend import CudaUnavailable

                try:
                    return CudaBackend(reason=why)
                except CudaUnavailable as e:
                    if name == "cuda":
                        raise
                    reason = f"auto: a GPU is present but the cuda backend cannot use it: {e.message}"
        else:
            reason = f"auto: {why}"
    else:
        reason = "chosen with --backend emulator"
    try:
        extra = {"arena_base": arena_base} if arena_base is not None else {}
        return EmulatorBackend(emulate_gpu, emulate_devices, emulate_driver, reason=reason, memory_cap=memory_cap,
                               **extra)
    except (KeyError, ValueError) as e:
        raise click.ClickException(str(e.args[0] if e.args else e)) from None


def backend_options(f):  # noqa: ANN001, ANN201
    f = click.option("--emulate-driver", default="13.0", show_default=True,
                     help="Driver API version the emulator presents (e.g. 12.4).")(f)
    f = click.option("--emulate-devices", default=1, show_default=True, type=click.IntRange(1, 16),
                     help="Number of emulated GPUs.")(f)
    f = click.option("--emulate-gpu", default="h100", show_default=True,
                     help="GPU model the emulator presents: h100, h200, a100, l4, t4, rtxpro6000 "
                     "(Blackwell, sm_120).")(f)
    f = click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
                     help="cuda: real GPUs via cuda-python; emulator: CPU; auto: cuda when a GPU is usable.")(f)
    return f


class LazyGroup(click.Group):
    """A group whose commands named in `lazy` ("module:attribute") are imported when used (click's "Lazily
    Loading Subcommands"): `gpushim serve` and `gpushim run` do not pay for the ELF readers and rich output of
    `compat-check` and `images`."""

    lazy = {"images": "gpushim.fatbin.report:images_command",
            "compat-check": "gpushim.compat.check:compat_check_command"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="gpushim")
def main() -> None:
    """gpushim runs unmodified CUDA programs against GPUs behind another driver, process or host."""


@main.command()
@click.option("--listen", default=None, help="unix:///path or tcp://host:port (default: $GPUSHIM_SERVER or the "
              "per-user socket).")
@backend_options
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Clients must present the token in this file (required off loopback).")
@click.option("--memory-quota", type=ByteSize(), default=None,
              help="Device memory each session may hold (bytes, or 64M, 2G...), every kind of allocation counted.")
@click.option("--memory-cap", type=ByteSize(), default=None,
              help="Emulator: host RAM all sessions' device memory may use together; devices present no more "
                   "[default: MemAvailable at start less max(10%, 512M); 0: no cap].")
@click.option("--max-priority", type=click.IntRange(-19, 30), default=0, show_default=True,
              help="Highest GPUSHIM_PRIORITY a client may claim; each session's worker runs at nice -priority.")
@click.option("--module-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where uploaded fat binaries are kept by hash (default: ~/.cache/gpushim/modules).")
@click.option("--module-cache-size", type=ByteSize(), default="2G", show_default=True,
              help="Size of the module cache; the least recently used modules are evicted beyond it.")
@click.option("--max-module-size", type=ByteSize(), default="256M", show_default=True,
              help="Largest fat binary a client may upload.")
@click.option("--session-upload-bytes", type=ByteSize(), default="1G", show_default=True,
              help="Bytes of modules one session may upload.")
@click.option("--session-uploads", type=click.IntRange(0), default=4096, show_default=True,
              help="Number of modules one session may upload.")
@click.option("--sched", type=click.Choice(["priority", "fair", "off"]), default="priority", show_default=True,
              help="Device scheduling between sessions: priority class then fair share of device time; fair share "
                   "only; off (no arbitration). See docs/scheduling.md.")
@click.option("--weight", "weights", multiple=True, metavar="PRIORITY=WEIGHT",
              help="Fair-share weight of sessions of a priority (repeatable; default 1 each), e.g. --weight 0=2.")
@click.option("--max-share", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Most of a device's time one session may use (0 < s <= 1), even when the device is idle.")
@click.option("--arena-base", type=lambda v: int(v, 0), default=None, metavar="ADDRESS",
              help="Emulator: first device address (e.g. 0x400000000000). Servers a client uses together "
                   "(GPUSHIM_SERVER=url1,url2) need distinct ranges [default: 0x300000000000].")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--insecure-no-token", is_flag=True,
              help="Allow a tcp:// or tls:// loopback address without --token-file (development only: any local "
                   "user could then use the GPUs).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None,
              help="PEM certificate (chain) of a tls://host:port server.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None,
              help="PEM private key of --tls-cert (if not in the same file).")
@click.option("--socket-mode", default="0600", show_default=True, callback=lambda c, p, v: _octal_mode(v),
              help="Permissions of a Unix socket, in octal (0660: the server's group may connect too; see "
                   "docs/security.md).")
@click.option("--max-pending", type=click.IntRange(1, 1 << 20), default=256, show_default=True,
              help="Connections that may wait for their handshake at once; beyond it the oldest is dropped.")
def serve(listen: str | None, backend: str, emulate_gpu: str, emulate_devices: int, emulate_driver: str,
          token_file: str | None, memory_quota: int | None, memory_cap: int | None, max_priority: int,
          module_cache: Path | None, module_cache_size: int, max_module_size: int, session_upload_bytes: int,
          session_uploads: int, sched: str, weights: tuple[str, ...], max_share: float | None,
          arena_base: int | None, log_level: str, insecure_no_token: bool, tls_cert: str | None,
          tls_key: str | None, socket_mode: int, max_pending: int) -> None:
    """Run a gpushim server."""
    from gpushim.server.modules import ModuleLimits
    from gpushim.server.scheduler import SchedConfig, parse_weights
    from gpushim.server.supervisor import ServeError, Supervisor

    _without_own_driver()

    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper()),
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    try:
        sched_config = SchedConfig(sched, parse_weights(weights), max_share)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    be = make_backend(backend, emulate_gpu, emulate_devices, emulate_driver, memory_cap, arena_base)
    limits = ModuleLimits(module_cache_size, max_module_size, session_upload_bytes, session_uploads)
    token = read_token_file(token_file) if token_file else None
    try:
        sup = Supervisor(be, listen or server_url(), token=token, memory_quota=memory_quota, module_cache=module_cache,
                         max_priority=max_priority, module_limits=limits, insecure_no_token=insecure_no_token,
                         tls_cert=tls_cert, tls_key=tls_key, socket_mode=socket_mode, max_pending=max_pending,
                         sched=sched_config)
    except ServeError as e:
        raise click.ClickException(str(e)) from None
    sup.serve_forever()


def _octal_mode(value: str) -> int:
    try:
        mode = int(value, 8)
    except ValueError:
        raise click.BadParameter(f"{value} is not an octal mode such as 0600 or 0660") from None
    if not 0 <= mode <= 0o777 or mode & 0o600 != 0o600:
        raise click.BadParameter(f"{value}: the mode must give the server's own user read and write (0600-0777)")
    return mode


def read_token_file(path: str) -> str:
    lines = Path(path).read_text().splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise click.ClickException(f"the token file {path} is empty")
    return token


def query_status(url: str, timeout: float = 5.0) -> dict:
    from gpushim.protocol import STATUS
    from gpushim.wire import recv_frame, send_frame

    sock = connect(url, timeout)
    try:
        send_frame(sock, [STATUS, {"token": client_token()}])
        reply = recv_frame(sock)
    finally:
        sock.close()
    if reply[1].get("error"):
        raise click.ClickException(f"the server at {url} refused the status request: {reply[1].get('message')}")
    return reply[1]


def client_token() -> str:
    """The token the shim would present: GPUSHIM_TOKEN, or the first line of GPUSHIM_TOKEN_FILE."""
    if os.environ.get("GPUSHIM_TOKEN"):
        return os.environ["GPUSHIM_TOKEN"]
    path = os.environ.get("GPUSHIM_TOKEN_FILE")
    if path:
        try:
            return Path(path).read_text().splitlines()[0].strip()
        except (OSError, IndexError):
            return ""
    return ""


def connect(url: str, timeout: float) -> socket.socket:
    if url.startswith("unix://") or url.startswith("unix:"):
        path = url.split("unix://", 1)[1] if url.startswith("unix://") else url[5:]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        return s
    for scheme in ("tcp://", "tls://"):
        if url.startswith(scheme):
            host, _, port = url[6:].rpartition(":")
            host = host.strip("[]")
            if not host or not port.isdigit():
                raise click.ClickException(f"a server address needs host and port: {scheme}HOST:PORT, not '{url}'")
            sock = socket.create_connection((host, int(port)), timeout=timeout)
            return tls_wrap(sock, host) if scheme == "tls://" else sock
    raise click.ClickException(f"server address must be unix:///path, tcp://host:port or tls://host:port, "
                               f"not '{url}'")


def tls_wrap(sock: socket.socket, host: str) -> socket.socket:
    """TLS over a connected socket, verifying the server's certificate against GPUSHIM_TLS_CA (a PEM file)
    or the system's store -- the same rule as the shim's."""
    import ssl

    ca = os.environ.get("GPUSHIM_TLS_CA") or None
    try:
        ctx = ssl.create_default_context(cafile=ca)
        return ctx.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as e:
        sock.close()
        raise click.ClickException(f"the server's TLS certificate is not trusted: {e.verify_message} "
                                   "(set GPUSHIM_TLS_CA to the CA that signed it)") from None
    except (ssl.SSLError, OSError) as e:
        sock.close()
        raise click.ClickException(f"TLS with {host} failed: {e}") from None


@main.command()
@click.option("--server", default=None, help="Server address (default: $GPUSHIM_SERVER or the per-user socket).")
@click.option("--json", "as_json", is_flag=True)
def status(server: str | None, as_json: bool) -> None:
    """Show a running server's devices and sessions."""
    url = server or server_url()
    if "," in url:  # several servers (GPUSHIM_SERVER=a,b): each one's status
        urls = [u.strip() for u in url.split(",") if u.strip()]
        if as_json:
            click.echo(json.dumps([_status_of(u) for u in urls], indent=2))
        else:
            for i, u in enumerate(urls):
                click.echo(f"server {i}:")
                _echo_status(_status_of(u))
        return
    st = _status_of(url)
    if as_json:
        click.echo(json.dumps(st, indent=2))
        return
    _echo_status(st)


def _status_of(url: str) -> dict:
    try:
        return query_status(url)
    except OSError as e:
        raise click.ClickException(f"no gpushim server at {url}: {e.strerror or e}") from None


def _echo_status(st: dict) -> None:
    click.echo(f"{st['server']} at {st['address']}")
    click.echo(f"  {st['backend']}")
    for d in st["devices"]:
        click.echo(f"  device {d['ordinal']}: {d['name']} (cc {d['cc']}, {d['memory'] / 2**30:.1f} GiB, "
                   f"{d['pci_bus_id']})")
    click.echo(f"  {len(st['sessions'])} session(s)")
    for s in st["sessions"]:
        held = f"{s.get('allocations', '?')} allocations, {s.get('allocated_bytes', 0)} bytes, " \
               f"{s.get('streams', '?')} streams, {s.get('events', '?')} events, {s.get('calls', '?')} calls"
        if "launches" in s:
            held += f", {s['launches']} launches ({s.get('thread_instructions', 0)} thread-instructions)"
        click.echo(f"  [{s['session']}] {s.get('program', '(hidden)')} pid {s.get('pid', '-')} CUDA {s['runtime']}: "
                   f"{s.get('state', held)}")
    _echo_scheduling(st)


def _echo_scheduling(st: dict) -> None:
    """Per device: what placement sees, then each session's priority, share of device time and queued work."""
    placement = {p["device"]: p for p in st.get("placement", [])}
    for dev in st.get("scheduler", []):
        p = placement.get(dev["device"], {})
        cap = f", max share {dev['max_share']}" if dev.get("max_share") else ""
        click.echo(f"  device {dev['device']} scheduling ({dev['policy']}{cap}): "
                   f"{'busy' if dev['busy'] else 'idle'}, {dev['waiting']} waiting, {dev['device_s']:.3f} s used; "
                   f"placement: load {p.get('load', '?')}, free {p.get('free_memory', 0) / 2**30:.2f} GiB, "
                   f"{p.get('sessions_placed', 0)} session(s) placed first here")
        for s in dev["sessions"]:
            state = "running" if s["running"] else (f"waiting {s['waiting_s']:.3f} s" if s["waiting_s"] else "idle")
            click.echo(f"    [{s['session']}] {s.get('program', '?')} priority {s['priority']} weight {s['weight']:g}: "
                       f"share {100 * s['share']:.1f} % ({s['device_s']:.3f} s, {s['kernels']} kernels), "
                       f"{state}, {s['queued']} queued")


@main.command(hidden=True)
@click.option("--fd", type=int, required=True, help="The client's end of the socket pair the shim made.")
@click.argument("urls", nargs=-1, required=True)
def multiplex(fd: int, urls: tuple[str, ...]) -> None:
    """Several servers as one device list: started by the shim when GPUSHIM_SERVER lists several URLs."""
    from gpushim.server.multiplex import serve_fd

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="gpushim multiplex: %(message)s")
    sys.exit(serve_fd(fd, list(urls)))


@main.command("shim-path")
def shim_path_cmd() -> None:
    """Print the absolute path of libgpushim.so (for LD_PRELOAD)."""
    p = shim_path()
    if not p.exists():
        raise click.ClickException(f"{p} is missing: build it with `make shim` or `pip install .`")
    click.echo(str(p))


@main.command()
@backend_options
@click.option("--server", default=None,
              help="Show a running server's devices instead, in the order its placement offers them now to a "
                   "client naming none, with what placement sees (load, free memory, sessions).")
@click.option("--json", "as_json", is_flag=True)
def devices(backend: str, emulate_gpu: str, emulate_devices: int, emulate_driver: str, server: str | None,
            as_json: bool) -> None:
    """List the devices a server started here would offer (or, with --server, a running server's)."""
    if server is not None:
        _server_devices(server, as_json)
        return
    be = make_backend(backend, emulate_gpu, emulate_devices, emulate_driver)
    rows = [{"ordinal": d.ordinal, "name": d.name, "uuid": "GPU-" + d.uuid.hex(), "pci_bus_id": d.pci_bus_id,
             "memory": d.props["totalGlobalMem"], "compute_capability": f"{d.props['major']}.{d.props['minor']}",
             "multiprocessors": d.props["multiProcessorCount"]} for d in be.devices()]
    drv = be.driver_version()
    if as_json:
        click.echo(json.dumps({"backend": be.name, "driver": drv, "devices": rows}, indent=2))
        return
    click.echo(be.describe())
    for r in rows:
        click.echo(f"  {r['ordinal']}: {r['name']}  cc {r['compute_capability']}  {r['memory'] / 2**30:.1f} GiB  "
                   f"{r['multiprocessors']} SMs  {r['pci_bus_id']}  {r['uuid']}")


def _server_devices(url: str, as_json: bool) -> None:
    try:
        st = query_status(url)
    except OSError as e:
        raise click.ClickException(f"no gpushim server at {url}: {e.strerror or e}") from None
    placement = sorted(st.get("placement", []), key=lambda p: (p["load"], -p["free_memory"], p["device"]))
    by_ordinal = {d["ordinal"]: d for d in st["devices"]}
    rows = [{**by_ordinal.get(p["device"], {}), "placement": p} for p in placement]
    if as_json:
        click.echo(json.dumps({"server": st["server"], "address": st["address"], "devices": rows}, indent=2))
        return
    click.echo(f"{st['server']} at {st['address']}: devices in placement order (least loaded first)")
    for r in rows:
        p = r["placement"]
        click.echo(f"  {r.get('ordinal')}: {r.get('name')}  cc {r.get('cc')}  load {p['load']} "
                   f"({p['sessions']} session(s) using it, {p['sessions_placed']} placed first, {p['waiting']} "
                   f"waiting, {'busy' if p['busy'] else 'idle'})  free {p['free_memory'] / 2**30:.2f} of "
                   f"{p['total_memory'] / 2**30:.2f} GiB")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@backend_options
@click.option("--embedded", is_flag=True, help="Always start a private server, even if one is reachable.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="error",
              show_default=True, help="Log level of an embedded server.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(backend: str, emulate_gpu: str, emulate_devices: int, emulate_driver: str, embedded: bool,
        log_level: str, command: tuple[str, ...]) -> None:
    """Run COMMAND with gpushim: uses a reachable server, or starts an embedded one for the command."""
    lib = shim_path()
    if not lib.exists():
        raise click.ClickException(f"{lib} is missing: build it with `make shim` or `pip install .`")
    url = server_url()
    server: subprocess.Popen | None = None
    tmp = None
    if "," in url and not embedded:  # several servers as one device list: all must be there
        down = [u for u in url.split(",") if not _reachable(u.strip())]
        if down:
            raise click.ClickException(f"GPUSHIM_SERVER lists servers that do not answer: {', '.join(down)}")
    elif embedded or not _reachable(url):
        tmp = tempfile.TemporaryDirectory(prefix="gpushim-")
        url = f"unix://{tmp.name}/server.sock"
        server = subprocess.Popen(
            [sys.executable, "-m", "gpushim", "serve", "--listen", url, "--backend", backend,
             "--emulate-gpu", emulate_gpu, "--emulate-devices", str(emulate_devices),
             "--emulate-driver", emulate_driver, "--log-level", log_level],
        )
        if not _wait_reachable(url, server, 60):
            server.kill()
            raise click.ClickException("the embedded gpushim server did not start (see its messages above)")
    env = dict(os.environ)
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else str(lib)
    # The driver face: libgpushim.so's soname is libcuda.so.1, so once preloaded it is what
    # dlopen("libcuda.so.1") and -lcuda programs get, ahead of any installed driver; the directory also
    # answers loaders that look for libcuda.so or open the library by path.
    driver = lib.parent / "driver"
    if driver.is_dir():
        ld_path = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = f"{driver}:{ld_path}" if ld_path else str(driver)
    env["GPUSHIM_SERVER"] = url
    _prefer_ptx(url, env)
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError as e:
        _stop(server)
        raise click.ClickException(f"cannot run {command[0]}: {e.strerror}") from None
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
    finally:
        _stop(server)
        if tmp:
            tmp.cleanup()
    sys.exit(code if code >= 0 else 128 - code)


def _without_own_driver() -> None:
    """The server must reach the real driver: started from an environment that preloads gpushim or puts its
    libcuda.so.1 on the search path (say, `export`ed by hand), it would be its own client. Such a server
    starts itself again without them."""
    lib = shim_path()
    driver = str(lib.parent / "driver")
    preload = [p for p in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]
    paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    own_preload = [p for p in preload if Path(p).name == lib.name]
    own_paths = [p for p in paths if os.path.realpath(p) == os.path.realpath(driver)]
    if not own_preload and not own_paths:
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(p for p in preload if p not in own_preload)
    env["LD_LIBRARY_PATH"] = ":".join(p for p in paths if p not in own_paths)
    for key in ("LD_PRELOAD", "LD_LIBRARY_PATH"):
        if not env[key]:
            del env[key]
    os.execve(sys.executable, [sys.executable, "-m", "gpushim", *sys.argv[1:]], env)


def _prefer_ptx(url: str, env: dict[str, str]) -> None:
    """The emulator runs PTX, never cubins. Libraries that compile their kernels at run time (CuPy with NVRTC)
    build a cubin for the device's architecture unless asked for PTX: ask them, unless the user decided."""
    try:
        emulator = str(query_status(url).get("backend", "")).startswith("emulator")
    except (OSError, click.ClickException):
        return
    if emulator:
        env.setdefault("CUPY_COMPILE_WITH_PTX", "1")
        # CUPY_ACCELERATORS stays CuPy's default (CUB): the emulator runs CUB's compute_120 PTX on every model
        # it offers (docs/cupy.md)


def _reachable(url: str) -> bool:
    try:
        query_status(url, timeout=2.0)
        return True
    except (OSError, ValueError, IndexError, click.ClickException):
        return False


def _wait_reachable(url: str, server: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        if _reachable(url):
            return True
        time.sleep(0.05)
    return False


def _stop(server: subprocess.Popen | None) -> None:
    if server is None or server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()

