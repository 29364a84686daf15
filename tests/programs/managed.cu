// Managed memory on one host: the host writes, a kernel updates in place, the host reads after
// synchronising; prefetch and advice are accepted; pointer attributes say managed.
#include "common.h"

__global__ void scale(float *x, int n, float f) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * f + 1.0f;
}

struct Node { int value; Node *next; };

__global__ void walk(Node *head, int *sum) {
    int s = 0;
    for (Node *p = head; p; p = p->next) s += p->value;
    *sum = s;
}

int main() {
    const int n = 100000;
    float *x;
    CHECK(cudaMallocManaged(&x, n * sizeof(float)));
    for (int i = 0; i < n; i++) x[i] = (float)i;  // the host writes device memory directly
    cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
    CHECK(cudaMemPrefetchAsync(x, n * sizeof(float), loc, 0, 0));
    CHECK(cudaMemAdvise(x, n * sizeof(float), cudaMemAdviseSetReadMostly, loc));
    scale<<<(n + 255) / 256, 256>>>(x, n, 2.0f);
    CHECK(cudaDeviceSynchronize());
    int bad = 0;
    for (int i = 0; i < n; i++) bad += x[i] != 2.0f * i + 1.0f;
    std::printf("managed_kernel=%s\n", bad ? "wrong" : "ok");

    // a linked list built by the host with device pointers, walked by a kernel
    Node *nodes;
    int *sum;
    CHECK(cudaMallocManaged(&nodes, 10 * sizeof(Node)));
    CHECK(cudaMallocManaged(&sum, sizeof(int)));
    for (int i = 0; i < 10; i++) nodes[i] = {i + 1, i < 9 ? &nodes[i + 1] : nullptr};
    walk<<<1, 1>>>(nodes, sum);
    CHECK(cudaDeviceSynchronize());
    std::printf("managed_list=%d\n", *sum);

    cudaPointerAttributes at;
    CHECK(cudaPointerGetAttributes(&at, x + 5));
    std::printf("managed_attr=%d\n", (int)at.type);
    float host[4];
    CHECK(cudaMemcpy(host, x + 10, sizeof host, cudaMemcpyDefault));
    std::printf("managed_copy=%d\n", host[0] == 21.0f);
    CHECK(cudaFree(x));
    CHECK(cudaFree(nodes));
    CHECK(cudaFree(sum));
    EXPECT_ERR(cudaMallocManaged(&x, 0), cudaErrorInvalidValue);
    std::printf("OK\n");
    return 0;
}
