"""numba-cuda's grid-wide barrier (cuda.cg.this_grid().sync()) through gpushim: numba links libcudadevrt for
cudaCGGetIntrinsicHandle/cudaCGSynchronize and launches cooperatively. Each block writes its slot, the grid
syncs, then every thread reads a slot another block wrote: correct only if the barrier spans the grid.
Prints `grid sync ok` on success."""

import numpy as np
from numba import cuda, int32


@cuda.jit
def rotate(slots, out, rounds):
    g = cuda.cg.this_grid()
    b = cuda.blockIdx.x
    n = cuda.gridDim.x
    for r in range(rounds):
        if cuda.threadIdx.x == 0:
            slots[r, b] = b * 10 + r
        g.sync()
        # read the slot the next block wrote in this round
        out[r, b * cuda.blockDim.x + cuda.threadIdx.x] = slots[r, (b + 1) % n]


blocks, threads, rounds = 6, 32, 3
slots = cuda.to_device(np.full((rounds, blocks), -1, dtype=np.int32))
out = cuda.to_device(np.zeros((rounds, blocks * threads), dtype=np.int32))
rotate[blocks, threads](slots, out, int32(rounds))
got = out.copy_to_host()
want = np.array([[((i // threads + 1) % blocks) * 10 + r for i in range(blocks * threads)] for r in range(rounds)])
assert (got == want).all(), (got, want)
print("grid sync ok")
