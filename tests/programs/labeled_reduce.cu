// cg::labeled_partition + cg::reduce + atomicMax (CUDA C++ Programming Guide, "Cooperative Groups":
// labeled_partition splits a tile into groups of threads with equal labels; cg::reduce reduces within
// such a group). Each thread has a label and a value; per label we want the sum of values (via reduce in
// each labeled group, one atomicAdd per group leader) and the max (reduce with cg::greater + atomicMax).
// The host recomputes both and prints key=value lines.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include "common.h"
namespace cg = cooperative_groups;

constexpr int kLabels = 7;

__global__ void per_label(const int *label, const int *val, int *sum, int *mx, int *groups, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    if (i >= n) return;  // partial last warp: the labeled groups are made of the live threads only
    int l = label[i];
    cg::coalesced_group active = cg::coalesced_threads();
    cg::coalesced_group g = cg::labeled_partition(active, l);
    int s = cg::reduce(g, val[i], cg::plus<int>());
    int m = cg::reduce(g, val[i], cg::greater<int>());
    if (g.thread_rank() == 0) {
        atomicAdd(&sum[l], s);
        atomicMax(&mx[l], m);
        atomicAdd(&groups[l], 1);
    }
    (void)warp;
}

// The same on a tile (thread_block_tile<32> overload of labeled_partition).
__global__ void per_label_tile(const int *label, const int *val, int *mx, int *size_sum) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    int l = label[i];
    cg::coalesced_group g = cg::labeled_partition(warp, l);
    int m = cg::reduce(g, val[i], cg::greater<int>());
    if (g.thread_rank() == 0) {
        atomicMax(&mx[l], m);
        atomicAdd(&size_sum[l], (int)g.size());
    }
}

int main() {
    const int n = 1000, threads = 128, blocks = (n + threads - 1) / threads, nt = blocks * threads;
    int *hl = new int[nt], *hv = new int[nt];
    unsigned x = 12345;
    for (int i = 0; i < nt; i++) {
        x = x * 1103515245u + 12345u;
        hl[i] = (x >> 16) % kLabels;
        x = x * 1103515245u + 12345u;
        hv[i] = (int)((x >> 8) % 100000) - 30000;
    }
    int *dl, *dv, *ds, *dm, *dg, *dm2, *dz;
    CHECK(cudaMalloc(&dl, nt * sizeof(int)));
    CHECK(cudaMalloc(&dv, nt * sizeof(int)));
    CHECK(cudaMalloc(&ds, kLabels * sizeof(int)));
    CHECK(cudaMalloc(&dm, kLabels * sizeof(int)));
    CHECK(cudaMalloc(&dg, kLabels * sizeof(int)));
    CHECK(cudaMalloc(&dm2, kLabels * sizeof(int)));
    CHECK(cudaMalloc(&dz, kLabels * sizeof(int)));
    CHECK(cudaMemcpy(dl, hl, nt * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dv, hv, nt * sizeof(int), cudaMemcpyHostToDevice));
    int init_min[kLabels];
    for (int k = 0; k < kLabels; k++) init_min[k] = -2147483647 - 1;
    CHECK(cudaMemset(ds, 0, kLabels * sizeof(int)));
    CHECK(cudaMemset(dg, 0, kLabels * sizeof(int)));
    CHECK(cudaMemset(dz, 0, kLabels * sizeof(int)));
    CHECK(cudaMemcpy(dm, init_min, sizeof init_min, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dm2, init_min, sizeof init_min, cudaMemcpyHostToDevice));
    per_label<<<blocks, threads>>>(dl, dv, ds, dm, dg, n);
    CHECK(cudaGetLastError());
    per_label_tile<<<blocks, threads>>>(dl, dv, dm2, dz);
    CHECK(cudaGetLastError());
    int hs[kLabels], hm[kLabels], hg[kLabels], hm2[kLabels], hz[kLabels];
    CHECK(cudaMemcpy(hs, ds, sizeof hs, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hm, dm, sizeof hm, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hg, dg, sizeof hg, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hm2, dm2, sizeof hm2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hz, dz, sizeof hz, cudaMemcpyDeviceToHost));
    // host reference: per label sum/max over i < n; groups = number of (warp, label) pairs present
    int es[kLabels] = {0}, em[kLabels], eg[kLabels] = {0}, em2[kLabels], ez[kLabels] = {0};
    for (int k = 0; k < kLabels; k++) em[k] = em2[k] = init_min[k];
    for (int w = 0; w < nt / 32; w++) {
        bool seen_n[kLabels] = {false};
        for (int j = w * 32; j < w * 32 + 32; j++) {
            int l = hl[j];
            if (j < n) {
                es[l] += hv[j];
                if (hv[j] > em[l]) em[l] = hv[j];
                if (!seen_n[l]) eg[l]++;
                seen_n[l] = true;
            }
            if (hv[j] > em2[l]) em2[l] = hv[j];
            ez[l]++;
        }
    }
    int sum_err = 0, max_err = 0, group_err = 0, tile_max_err = 0, tile_size_err = 0;
    for (int k = 0; k < kLabels; k++) {
        sum_err += hs[k] != es[k];
        max_err += hm[k] != em[k];
        group_err += hg[k] != eg[k];
        tile_max_err += hm2[k] != em2[k];
        tile_size_err += hz[k] != ez[k];
        if (hm[k] != em[k] || hs[k] != es[k] || hm2[k] != em2[k])
            std::printf("label %d: sum %d/%d max %d/%d tile max %d/%d\n", k, hs[k], es[k], hm[k], em[k],
                        hm2[k], em2[k]);
    }
    std::printf("sum_errors=%d\nmax_errors=%d\ngroup_errors=%d\ntile_max_errors=%d\ntile_size_errors=%d\n",
                sum_err, max_err, group_err, tile_max_err, tile_size_err);
    return 0;
}
