// Memory pools (cudaDeviceGetDefaultMemPool, cudaMemPoolCreate, cudaMallocFromPoolAsync, pool attributes,
// trim, cudaDeviceSetMemPool) and stream attributes (cudaStreamSetAttribute / GetAttribute). Prints
// key=value lines the test checks.
#include <cstdint>
#include <vector>
#include "common.h"

__global__ void fill(int *p, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + i;
}

static unsigned long long attr64(cudaMemPool_t pool, cudaMemPoolAttr a) {
    uint64_t v = 0;
    CHECK(cudaMemPoolGetAttribute(pool, a, &v));
    return (unsigned long long)v;
}

int main() {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    // ---- the default pool ----
    cudaMemPool_t def, cur;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    CHECK(cudaDeviceGetMemPool(&cur, 0));
    const int N = 1024;
    int *a = nullptr;
    CHECK(cudaMallocAsync(&a, N * sizeof(int), s));
    fill<<<N / 256, 256, 0, s>>>(a, 5, N);
    std::vector<int> h(N);
    CHECK(cudaMemcpyAsync(h.data(), a, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    unsigned long long used_during = attr64(def, cudaMemPoolAttrUsedMemCurrent);
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    bool ok = h[0] == 5 && h[N - 1] == 5 + N - 1;
    std::printf("default current_is_default=%d used_during=%llu used_after=%llu high=%llu data=%s\n", cur == def,
                used_during, attr64(def, cudaMemPoolAttrUsedMemCurrent), attr64(def, cudaMemPoolAttrUsedMemHigh),
                ok ? "ok" : "WRONG");

    // ---- a pool of our own, with a maximum size ----
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    props.maxSize = 1 << 20;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    int *b = nullptr, *c = nullptr, *d = nullptr;
    CHECK(cudaMallocFromPoolAsync(&b, 512 << 10, pool, s));
    CHECK(cudaMallocFromPoolAsync(&c, 256 << 10, pool, s));
    cudaError_t over = cudaMallocFromPoolAsync(&d, 512 << 10, pool, s);  // beyond maxSize
    cudaGetLastError();
    fill<<<N / 256, 256, 0, s>>>(b, 100, N);
    CHECK(cudaMemcpyAsync(h.data(), b, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    ok = h[0] == 100 && h[N - 1] == 100 + N - 1;
    unsigned long long used = attr64(pool, cudaMemPoolAttrUsedMemCurrent);
    unsigned long long reserved = attr64(pool, cudaMemPoolAttrReservedMemCurrent);
    std::printf("pool used=%llu reserved=%llu over=%d data=%s\n", used, reserved, (int)over, ok ? "ok" : "WRONG");
    CHECK(cudaFreeAsync(b, s));
    CHECK(cudaStreamSynchronize(s));
    unsigned long long high_before = attr64(pool, cudaMemPoolAttrUsedMemHigh);
    uint64_t zero = 0;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));  // resets to the current use
    std::printf("after_free used=%llu high=%llu reset_high=%llu\n", attr64(pool, cudaMemPoolAttrUsedMemCurrent),
                high_before, attr64(pool, cudaMemPoolAttrUsedMemHigh));
    uint64_t threshold = 64 << 20;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    int reuse = 0;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse));
    int reuse_back = -1;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse_back));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    cudaMemAccessDesc desc = {};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = 0;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    CHECK(cudaMemPoolSetAccess(pool, &desc, 1));
    cudaMemAccessFlags flags;
    CHECK(cudaMemPoolGetAccess(&flags, pool, &desc.location));
    std::printf("attrs threshold=%llu reuse=%d access=%d\n", attr64(pool, cudaMemPoolAttrReleaseThreshold),
                reuse_back, (int)flags);

    // ---- the device's current pool: cudaMallocAsync draws from it ----
    CHECK(cudaDeviceSetMemPool(0, pool));
    CHECK(cudaDeviceGetMemPool(&cur, 0));
    int *e = nullptr;
    CHECK(cudaMallocAsync(&e, 128 << 10, s));
    unsigned long long pool_used = attr64(pool, cudaMemPoolAttrUsedMemCurrent);
    CHECK(cudaFree(e));  // cudaFree of stream-ordered memory
    std::printf("set_pool current_is_pool=%d pool_used=%llu after=%llu\n", cur == pool, pool_used,
                attr64(pool, cudaMemPoolAttrUsedMemCurrent));
    // Destroying the current pool makes the default pool current again; c is still usable until freed.
    CHECK(cudaMemPoolDestroy(pool));
    CHECK(cudaDeviceGetMemPool(&cur, 0));
    CHECK(cudaMemsetAsync(c, 0, 256 << 10, s));
    CHECK(cudaFreeAsync(c, s));
    CHECK(cudaStreamSynchronize(s));
    std::printf("destroyed current_is_default=%d\n", cur == def);

    // ---- bad input ----
    int e_destroy_default = (int)cudaMemPoolDestroy(def);
    int e_destroyed = (int)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &zero);
    int e_attr = (int)cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemCurrent, &zero);
    int e_high = (int)cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &threshold);
    props.location.id = 99;
    cudaMemPool_t bad;
    int e_dev = (int)cudaMemPoolCreate(&bad, &props);
    props.location.id = 0;
    props.allocType = cudaMemAllocationTypeInvalid;
    int e_type = (int)cudaMemPoolCreate(&bad, &props);
    int e_null = (int)cudaMallocFromPoolAsync(&e, 16, nullptr, s);
    int e_dev_get = (int)cudaDeviceGetDefaultMemPool(&bad, 99);
    cudaGetLastError();
    std::printf("bad destroy_default=%d destroyed=%d readonly=%d high=%d device=%d type=%d null_pool=%d "
                "get_device=%d\n", e_destroy_default, e_destroyed, e_attr, e_high, e_dev, e_type, e_null, e_dev_get);

    // ---- stream attributes ----
    cudaStreamAttrValue v = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
    int sync_default = (int)v.syncPolicy;
    v = {};
    v.syncPolicy = cudaSyncPolicyBlockingSync;
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
    v = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
    int sync_set = (int)v.syncPolicy;
    int *win;
    CHECK(cudaMalloc(&win, 1 << 20));
    v = {};
    v.accessPolicyWindow.base_ptr = win;
    v.accessPolicyWindow.num_bytes = 1 << 20;
    v.accessPolicyWindow.hitRatio = 0.6f;
    v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    v = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    std::printf("stream_attr sync_default=%d sync=%d window=%d bytes=%zu hit=%.1f props=%d,%d\n", sync_default,
                sync_set, v.accessPolicyWindow.base_ptr == win, v.accessPolicyWindow.num_bytes,
                v.accessPolicyWindow.hitRatio, (int)v.accessPolicyWindow.hitProp, (int)v.accessPolicyWindow.missProp);
    // work on the stream still runs with the attributes set
    fill<<<N / 256, 256, 0, s>>>(win, 7, N);
    CHECK(cudaMemcpyAsync(h.data(), win, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    int least, greatest, prio = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    v = {};
    v.priority = greatest - 5;  // beyond the range: clamped, as cudaStreamCreateWithPriority clamps
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributePriority, &v));
    v = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &v));
    CHECK(cudaStreamGetPriority(s, &prio));
    std::printf("priority attr=%d get=%d greatest=%d data=%s\n", v.priority, prio, greatest,
                h[N - 1] == 7 + N - 1 ? "ok" : "WRONG");
    v = {};
    v.accessPolicyWindow.num_bytes = (size_t)1 << 40;  // beyond accessPolicyMaxWindowSize
    int e_window = (int)cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
    v = {};
    v.accessPolicyWindow.hitRatio = 1.5f;
    int e_ratio = (int)cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
    v = {};
    v.syncPolicy = (cudaSynchronizationPolicy)9;
    int e_policy = (int)cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v);
    int e_kind = (int)cudaStreamSetAttribute(s, cudaLaunchAttributeCooperative, &v);  // not a stream attribute
    int e_null_value = (int)cudaStreamGetAttribute(s, cudaStreamAttributePriority, nullptr);
    cudaGetLastError();
    std::printf("bad_attr window=%d ratio=%d policy=%d kind=%d null=%d\n", e_window, e_ratio, e_policy, e_kind,
                e_null_value);
    CHECK(cudaFree(win));
    CHECK(cudaStreamDestroy(s));
    std::printf("OK\n");
    return 0;
}
