// CUDA dynamic parallelism (Programming Guide, "CUDA Dynamic Parallelism", CUDA 12+ semantics): kernels
// launching kernels. Built with -rdc=true -lcudadevrt. Prints key=value lines the test checks.
#include <cstdio>
#include <string>

#include "common.h"

// -- 1. children write results; a child sees its parent's global writes made before the launch ----------
__global__ void child_write(int *out, const int *parent_vals, int base) {
    int i = base + blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = parent_vals[base / 32] + i;
}

__global__ void parent_write(int *out, int *parent_vals) {
    if (threadIdx.x == 0) {
        parent_vals[blockIdx.x] = 1000 * (blockIdx.x + 1);  // before the launch: the child must see it
        child_write<<<2, 16>>>(out, parent_vals, blockIdx.x * 32);
    }
}

// -- 2. recursion to depth 3: a tree sum, and how many grids ran at each depth ---------------------------
__global__ void tree_sum(const int *data, int n, int *result, int *grids_at_depth, int depth) {
    if (threadIdx.x == 0) atomicAdd(&grids_at_depth[depth], 1);
    if (depth == 3 || n <= 8) {
        int s = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += data[i];
        atomicAdd(result, s);
        return;
    }
    if (threadIdx.x == 0) {
        int half = n / 2;
        tree_sum<<<1, 4>>>(data, half, result, grids_at_depth, depth + 1);
        tree_sum<<<1, 4>>>(data + half, n - half, result, grids_at_depth, depth + 1);
    }
}

// -- 3. ordering: same-stream children in order, fire-and-forget, tail launch after everything -----------
struct Log {
    int pos;
    int ids[16];
    int flag_a1;
    int a2_saw_a1;
};

__device__ void record(Log *log, int id) { log->ids[atomicAdd(&log->pos, 1)] = id; }

__global__ void ord_child(Log *log, int id) {
    if (id == 21) log->a2_saw_a1 = log->flag_a1;  // A2 runs after A1: one block's NULL stream is in order
    record(log, id);
    if (id == 20) log->flag_a1 = 1;
}

__global__ void ord_tail(Log *log) { record(log, 30); }

__global__ void ord_parent(Log *log) {
    record(log, 10);
    ord_tail<<<1, 1, 0, cudaStreamTailLaunch>>>(log);  // made first, still runs last
    ord_child<<<1, 1>>>(log, 20);
    ord_child<<<1, 1>>>(log, 21);
    ord_child<<<1, 1, 0, cudaStreamFireAndForget>>>(log, 40);
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess) {
        ord_child<<<1, 1, 0, s>>>(log, 50);
        cudaStreamDestroy(s);
    }
    record(log, 11);
}

// -- 4. errors returned to the launching thread ---------------------------------------------------------
__global__ void noop(int *p) {
    if (p) *p = 1;
}

__global__ void bad_config(int *err) {
    noop<<<1, 2048>>>(nullptr);  // 2048 threads per block: cudaErrorInvalidConfiguration
    err[0] = (int)cudaGetLastError();
    err[1] = (int)cudaGetLastError();  // reset by the first call
}

__global__ void deep(int depth, int *max_depth, int *err) {
    atomicMax(max_depth, depth);
    deep<<<1, 1>>>(depth + 1, max_depth, err);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        err[0] = (int)e;
        err[1] = depth;
    }
}

__global__ void device_ordinal(int *out) {
    out[2] = (int)cudaGetDevice(&out[0]);
    out[3] = (int)cudaGetDeviceCount(&out[1]);
}

__global__ void many(int *ok, int *failed, int *code) {
    noop<<<1, 1>>>(nullptr);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        atomicAdd(ok, 1);
    } else {
        atomicAdd(failed, 1);
        *code = (int)e;
    }
}

// -- 5. a quicksort recursing through kernels in created streams (like CUDA's cdpSimpleQuicksort sample) ---
__device__ void selection_sort(unsigned *data, int left, int right) {
    for (int i = left; i <= right; ++i) {
        unsigned min_val = data[i];
        int min_idx = i;
        for (int j = i + 1; j <= right; ++j)
            if (data[j] < min_val) {
                min_idx = j;
                min_val = data[j];
            }
        data[min_idx] = data[i];
        data[i] = min_val;
    }
}

__global__ void quicksort(unsigned *data, int left, int right, int depth, int *max_depth) {
    atomicMax(max_depth, depth);
    if (depth >= 16 || right - left <= 16) {
        selection_sort(data, left, right);
        return;
    }
    unsigned *lptr = data + left, *rptr = data + right;
    unsigned pivot = data[(left + right) / 2];
    while (lptr <= rptr) {
        unsigned lval = *lptr, rval = *rptr;
        while (lval < pivot) lval = *++lptr;
        while (rval > pivot) rval = *--rptr;
        if (lptr <= rptr) {
            *lptr++ = rval;
            *rptr-- = lval;
        }
    }
    if (left < rptr - data) {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        quicksort<<<1, 1, 0, s>>>(data, left, (int)(rptr - data), depth + 1, max_depth);
        cudaStreamDestroy(s);
    }
    if (lptr - data < right) {
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        quicksort<<<1, 1, 0, s>>>(data, (int)(lptr - data), right, depth + 1, max_depth);
        cudaStreamDestroy(s);
    }
}

static int run_quicksort() {
    const int n = 600;
    unsigned h[n];
    unsigned x = 12345;
    for (int i = 0; i < n; i++) h[i] = (x = x * 1103515245u + 12345u) >> 8;
    unsigned *d;
    int *depth;
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMalloc(&depth, sizeof(int)));
    CHECK(cudaMemset(depth, 0, sizeof(int)));
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    quicksort<<<1, 1>>>(d, 0, n - 1, 0, depth);
    CHECK(cudaDeviceSynchronize());
    unsigned s[n];
    int md = 0;
    CHECK(cudaMemcpy(s, d, sizeof s, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&md, depth, sizeof md, cudaMemcpyDeviceToHost));
    int unsorted = 0;
    unsigned long long sum_in = 0, sum_out = 0;
    for (int i = 0; i < n; i++) {
        sum_in += h[i];
        sum_out += s[i];
        if (i && s[i - 1] > s[i]) unsorted++;
    }
    printf("quicksort_unsorted=%d\nquicksort_same_values=%d\nquicksort_depth=%d\n", unsorted, sum_in == sum_out, md);
    return 0;
}

__global__ void fault_child(int *p) { p[threadIdx.x] = 1; }

__global__ void fault_parent(int *p) { fault_child<<<1, 4>>>(p); }

int main(int argc, char **argv) {
    if (argc > 1 && std::string(argv[1]) == "quicksort") return run_quicksort();
    if (argc > 1) {  // "fault": a child's illegal address fails its parent's launch, reported to the host
        fault_parent<<<1, 1>>>((int *)0x10);
        CHECK(cudaGetLastError());
        cudaError_t e = cudaDeviceSynchronize();
        printf("fault_sync=%d\n", (int)e);
        return 0;
    }
    // 1
    int *out, *vals;
    CHECK(cudaMalloc(&out, 4 * 32 * sizeof(int)));
    CHECK(cudaMalloc(&vals, 4 * sizeof(int)));
    CHECK(cudaMemset(out, 0xff, 4 * 32 * sizeof(int)));
    parent_write<<<4, 32>>>(out, vals);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int h[128];
    CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 128; i++)
        if (h[i] != 1000 * (i / 32 + 1) + i) bad++;
    printf("children_bad=%d\nchildren_77=%d\n", bad, h[77]);

    // 2
    const int n = 100;
    int hd[n], expect = 0;
    for (int i = 0; i < n; i++) expect += hd[i] = i * i % 37;
    int *data, *res;
    CHECK(cudaMalloc(&data, sizeof hd));
    CHECK(cudaMalloc(&res, 5 * sizeof(int)));
    CHECK(cudaMemcpy(data, hd, sizeof hd, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(res, 0, 5 * sizeof(int)));
    tree_sum<<<1, 4>>>(data, n, res, res + 1, 0);
    CHECK(cudaDeviceSynchronize());
    int hr[5];
    CHECK(cudaMemcpy(hr, res, sizeof hr, cudaMemcpyDeviceToHost));
    printf("tree_sum=%d\ntree_expect=%d\ngrids_per_depth=%d,%d,%d,%d\n", hr[0], expect, hr[1], hr[2], hr[3], hr[4]);

    // 3
    Log *log;
    CHECK(cudaMalloc(&log, sizeof(Log)));
    CHECK(cudaMemset(log, 0, sizeof(Log)));
    ord_parent<<<1, 1>>>(log);
    CHECK(cudaDeviceSynchronize());
    Log hl;
    CHECK(cudaMemcpy(&hl, log, sizeof hl, cudaMemcpyDeviceToHost));
    printf("order=");
    for (int i = 0; i < hl.pos; i++) printf("%s%d", i ? "," : "", hl.ids[i]);
    printf("\na2_saw_a1=%d\n", hl.a2_saw_a1);

    // 4
    int *err;
    CHECK(cudaMalloc(&err, 4 * sizeof(int)));
    CHECK(cudaMemset(err, 0xff, 4 * sizeof(int)));
    bad_config<<<1, 1>>>(err);
    CHECK(cudaDeviceSynchronize());
    int he[4];
    CHECK(cudaMemcpy(he, err, sizeof he, cudaMemcpyDeviceToHost));
    printf("bad_config_err=%d,%d\n", he[0], he[1]);

    CHECK(cudaMemset(err, 0, 4 * sizeof(int)));
    deep<<<1, 1>>>(0, err + 2, err);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(he, err, sizeof he, cudaMemcpyDeviceToHost));
    printf("depth_err=%d\ndepth_failed_at=%d\nmax_depth=%d\n", he[0], he[1], he[2]);

    device_ordinal<<<1, 1>>>(err);
    CHECK(cudaMemcpy(he, err, sizeof he, cudaMemcpyDeviceToHost));
    printf("device_ordinal=%d,%d,%d,%d\n", he[0], he[1], he[2], he[3]);

    size_t pending = 0;
    CHECK(cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, 4));
    CHECK(cudaDeviceGetLimit(&pending, cudaLimitDevRuntimePendingLaunchCount));
    CHECK(cudaMemset(err, 0, 4 * sizeof(int)));
    many<<<1, 8>>>(err, err + 1, err + 2);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(he, err, sizeof he, cudaMemcpyDeviceToHost));
    printf("pending_limit=%zu\npending_ok=%d\npending_failed=%d\npending_err=%d\n", pending, he[0], he[1], he[2]);
    printf("host_last_error=%d\n", (int)cudaGetLastError());
    return 0;
}
