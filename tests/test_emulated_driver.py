"""The emulator presents what a driver of the requested version has (gpushim/compat's table)."""

from __future__ import annotations

from gpushim.abi import device_attribute_ids
from gpushim.backends.emulator.backend import EmulatorBackend, parse_driver_version


def test_driver_version_parsing():
    assert parse_driver_version("12.4") == 12040
    assert parse_driver_version("11.8") == 11080
    assert parse_driver_version("13000") == 13000


def test_memory_pools_follow_the_driver():
    attr = device_attribute_ids()["cudaDevAttrMemoryPoolsSupported"]
    old, new = EmulatorBackend(driver="11.1").devices()[0], EmulatorBackend(driver="12.4").devices()[0]
    assert old.props["memoryPoolsSupported"] == 0 and old.attributes[attr] == 0
    assert new.props["memoryPoolsSupported"] == 1 and new.attributes[attr] == 1
    assert EmulatorBackend(driver="12.4").driver_version() == 12040
