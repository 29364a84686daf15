"""End to end: every fixture program x an emulated driver of the 11.x, 12.2, 12.4 and 13.0 eras, through the shim
and a real `gpushim serve --emulate-driver X.Y`.  compat-check's verdict must match what happened: a program it
says runs (natively or with adaptations) gives the right results; one it says will not run fails with exactly
the error of the rejection.

The server applies the policy (gpushim/compat/policy.py): rejections of kernels the emulated driver could not
load, the session log naming the adaptations, and the shim printing a rejection's reason once are checked here.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpushim.abi import adapters
from gpushim.backends.emulator.models import device_props, find_model
from gpushim.compat.check import check_binary
from gpushim.compat.policy import build_policy
from gpushim.compat.table import parse_version

from .conftest import DRIVERS, FIXTURES, H100, VERSIONS, fixture_names, kv, run_fixture


def _cases() -> list[Any]:
    out = []
    for name in fixture_names():
        for driver in DRIVERS:
            out.append(pytest.param(name, driver, id=f"{name}@{driver}"))
    return out


def _check_results(program: str, out: dict[str, str]) -> None:
    if program == "kernels":
        assert (out["vadd.bad"], out["struct.bad"]) == ("0", "0")
        assert out["sum"] == out["sum.want"]
    elif program == "bigparam":
        assert out["sum"] == out["sum.want"] and out["param_bytes"] == "6008"
    elif program == "archspecific":
        assert out["twice.bad"] == "0"
    elif program == "devprops":
        assert out["canary.cudaDeviceProp"] == out["canary.cudaPointerAttributes"] == "1"
        assert out["canary.cudaFuncAttributes"] == "1"
    elif program == "errors":
        assert out["err.set_device_bad"] == "101" and out["err.malloc_huge"] == "2"


@pytest.mark.parametrize(("name", "driver"), _cases())
def test_verdict_matches_outcome(name: str, driver: str, servers, runtime_libs) -> None:  # noqa: ANN001
    rep = check_binary(str(FIXTURES / name), parse_version(driver), H100)
    r = run_fixture(servers(driver), runtime_libs, name)
    out = kv(r.stdout)
    what = (f"compat-check: {rep.verdict}\n" + "\n".join(rep.reasons())
            + f"\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")
    assert out.get("driver") == str(parse_version(driver)), what
    if rep.exit_code < 2:
        assert r.returncode == 0 and "OK" in r.stdout.splitlines(), what
        _check_results(name.split("/")[1], out)
    else:
        rejected = [row for row in [*rep.apis, *rep.images] if row.strategy == "reject"]
        assert rejected, what
        assert r.returncode == 1 and "OK" not in r.stdout.splitlines(), what
        assert int(out["fail.code"]) == rejected[0].error, what


# -- cudaGetDeviceProperties & co. fill exactly the caller's struct --------------------------------------------

@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("version", VERSIONS)
def test_struct_layouts_per_client(version: str, driver: str, servers, runtime_libs) -> None:  # noqa: ANN001
    r = run_fixture(servers(driver), runtime_libs, f"{version}/devprops")
    assert r.returncode == 0, r.stdout + r.stderr
    out = kv(r.stdout)
    abi = adapters.abi(version)
    for struct in ("cudaDeviceProp", "cudaPointerAttributes", "cudaFuncAttributes"):
        assert int(out[f"sizeof.{struct}"]) == abi.sizeof(struct)
        assert out[f"canary.{struct}"] == "1", f"bytes after the caller's {struct} were written"
    props = device_props(find_model("h100"), 0, find_model("h100").total_mem)
    fields = {f["name"]: f for f in abi.layouts["cudaDeviceProp"]["fields"]}
    checked = 0
    for key, value in out.items():
        if not key.startswith("off."):
            continue
        field = key[4:]
        assert int(value) == fields[field]["offset"], f"offsetof({field}) in the {version} headers"
        want = props[field]
        got = out[f"prop.{field}"]
        if isinstance(want, list):
            assert got == ",".join(str(x) for x in want), field
        else:
            assert int(got) == int(want), field
        checked += 1
    assert checked >= 50
    assert out["prop.name"] == props["name"]
    assert int(out["prop.uuid0"]) == props["uuid"][0]
    assert (out["ptr.type"], out["ptr.device"], out["ptr.same"]) == ("2", "0", "1")  # cudaMemoryTypeDevice
    assert out["func.maxThreadsPerBlock"] == "1024"


@pytest.mark.parametrize("version", VERSIONS)
def test_runtime_version_is_the_clients(version: str, servers, runtime_libs) -> None:  # noqa: ANN001
    out = kv(run_fixture(servers("13.0"), runtime_libs, f"{version}/devprops").stdout)
    assert out["runtime"] == out["cudart_version"]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("version", VERSIONS)
def test_error_codes_per_client(version: str, driver: str, servers, runtime_libs) -> None:  # noqa: ANN001
    r = run_fixture(servers(driver), runtime_libs, f"{version}/errors")
    assert r.returncode == 0, r.stdout + r.stderr
    out = kv(r.stdout)
    want = {"set_device_bad": 101, "last_after_bad": 101, "last_again": 0, "malloc_huge": 2, "last_after_malloc": 2,
            "memcpy_bad_kind": 21, "free_bad": 1, "event_query_null": 400, "launch_too_many_threads": 9,
            "sync_after_config_error": 0}
    assert {k: int(out[f"err.{k}"]) for k in want} == want
    policy = build_policy(parse_version(version), parse_version(driver), [(9, 0)])
    for k, code in want.items():
        assert policy.map_error(code) == code  # every code here is known to every client
        assert out[f"name.{k}"] == adapters.abi(version).errors[code].name
    # a code new in 12.x is not a name an 11.x client knows
    if version == "11.8":
        assert out["name.name_402"] != "cudaErrorLossyQuery" and policy.map_error(402) == 801
    else:
        assert out["name.name_402"] == "cudaErrorLossyQuery"


# -- the policy applied by the server ----------------------------------------------------------------------------

def test_session_log_names_the_adaptations(servers, runtime_libs) -> None:  # noqa: ANN001
    server = servers("12.4", "--log-level", "info")
    r = run_fixture(server, runtime_libs, "13.0/kernels")
    assert r.returncode == 0, r.stdout + r.stderr
    log = server.log.read_text()
    for line in build_policy(13000, 12040, [(9, 0)]).adaptations:
        assert line in log, f"the session log does not name: {line}"


def test_13_application_on_a_12_driver_runs_and_the_log_says_so(servers, runtime_libs) -> None:  # noqa: ANN001
    server = servers("12.2", "--log-level", "info")
    r = run_fixture(server, runtime_libs, "13.0/kernels")
    assert r.returncode == 0 and "OK" in r.stdout
    assert "a real libcudart 13 refuses drivers older than 580" in server.log.read_text()


def test_rejection_reason_printed_once(servers, runtime_libs) -> None:  # noqa: ANN001
    r = run_fixture(servers("11.8"), runtime_libs, "13.0/archspecific")
    assert kv(r.stdout).get("fail.code") == "222"
    assert r.stderr.count("cannot be re-labelled") == 1, r.stderr
    r = run_fixture(servers("11.8"), runtime_libs, "12.4/bigparam")
    assert kv(r.stdout).get("fail.code") == "801"
    assert r.stderr.count("6008 bytes of kernel parameters") == 1, r.stderr
