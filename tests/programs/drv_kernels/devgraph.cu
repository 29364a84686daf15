// Kernels for device graph launch through the driver API (tests/programs/drv_graph_mem.c).
extern "C" __global__ void add_one(int *x) { x[threadIdx.x] += 1; }
extern "C" __global__ void twice(int *x) { x[threadIdx.x] *= 2; }
extern "C" __global__ void launcher(cudaGraphExec_t g, int tail, int *rc) {
    rc[0] = (int)cudaGraphLaunch(g, tail ? cudaStreamGraphTailLaunch : cudaStreamGraphFireAndForget);
}
