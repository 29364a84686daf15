"""Memory pools and stream attributes of the runtime face (shim/api_pool.c, shim/api_stream_attr.c), run by
tests/programs/graphs_pools.cu."""

from __future__ import annotations

from .conftest import kv


def test_pools_and_stream_attributes(server):
    r = server.run("graphs_pools")
    assert r.returncode == 0, r.stderr
    v = kv(r.stdout)
    # cudaMallocAsync draws from the device's current pool, the default one until cudaDeviceSetMemPool;
    # used memory counts live allocations (4 KiB here) and goes back to 0 after cudaFreeAsync
    assert v["default current_is_default"] == "1 used_during=4096 used_after=0 high=4096 data=ok"
    # a created pool: 512 KiB + 256 KiB in use; a third allocation beyond maxSize (1 MiB) fails with
    # cudaErrorMemoryAllocation (2); gpushim's pools hold no memory beyond what is used (reserved == used)
    assert v["pool used"] == "786432 reserved=786432 over=2 data=ok"
    # cudaMemPoolAttrUsedMemHigh keeps the peak; setting it to 0 resets it to the current use (CUDA docs,
    # cudaMemPoolSetAttribute)
    assert v["after_free used"] == "262144 high=786432 reset_high=262144"
    assert v["attrs threshold"] == "67108864 reuse=0 access=3"
    assert v["set_pool current_is_pool"] == "1 pool_used=393216 after=262144"
    # cudaMemPoolDestroy of the current pool: the default pool is current again (CUDA docs: "If the pool is
    # the current pool of a device, the device's default pool becomes its current pool")
    assert v["destroyed current_is_default"] == "1"
    # bad input: cudaErrorInvalidValue (1); an invalid device ordinal: cudaErrorInvalidDevice (101)
    assert v["bad destroy_default"] == ("1 destroyed=1 readonly=1 high=1 device=1 type=1 null_pool=1 "
                                        "get_device=101")
    # stream attributes read back as set; the sync policy defaults to cudaSyncPolicyAuto (1)
    assert v["stream_attr sync_default"] == "1 sync=4 window=1 bytes=1048576 hit=0.6 props=2,1"
    # a priority beyond the device's range is clamped to it, and cudaStreamGetPriority agrees
    assert v["priority attr"] == "-5 get=-5 greatest=-5 data=ok"
    # a window beyond accessPolicyMaxWindowSize, a hit ratio above 1, an unknown policy, a launch-only
    # attribute, a NULL value: cudaErrorInvalidValue
    assert v["bad_attr window"] == "1 ratio=1 policy=1 kind=1 null=1"
    assert r.stdout.strip().endswith("OK")
