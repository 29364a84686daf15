// A long-lived session that answers cudaMemGetInfo on demand: each line on stdin prints "free=N total=N",
// EOF ends it. Tests change what other sessions hold between queries (the server caches its view of the
// sessions sharing its host-RAM ledger: the answer must still follow them).
#include <cstring>
#include "common.h"

int main() {
    size_t free_b = 0, total_b = 0;
    CHECK(cudaFree(0));
    char line[64];
    while (std::fgets(line, sizeof line, stdin)) {
        CHECK(cudaMemGetInfo(&free_b, &total_b));
        std::printf("free=%zu total=%zu\n", free_b, total_b);
        std::fflush(stdout);
    }
    return 0;
}
