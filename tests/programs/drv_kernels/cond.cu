// Kernel of tests/programs/drv_graph_cond.c: one step of a countdown that a WHILE conditional node repeats.
extern "C" __global__ void countdown(cudaGraphConditionalHandle h, int *counter, int *steps) {
    int c = --*counter;
    ++*steps;
    cudaGraphSetConditional(h, c > 0);
}
