/* Raw baselines for gpushim's benchmark suite, measured in the same run as the CUDA benchmark so the
 * ratios compare like with like on the same machine at the same moment:
 *   - Unix-socket and TCP-loopback ping-pong: the round trip of a small message to a forked echo peer;
 *   - Unix-socket and TCP-loopback throughput: BYTES streamed to a forked sink, timed until it acknowledges;
 *   - memcpy bandwidth between two pre-touched buffers at each size (from 2 MiB up, also with transparent huge
 *     pages requested, as the emulator's numpy arena gets them).
 * Each result is one JSON object per line on stdout (same shape as cuda_bench's).
 *
 * Usage: raw_baselines [-n PINGPONGS] [-m MSG_BYTES] [-t STREAM_BYTES] [-r REPS] [-z SIZES] [-b BUDGET]
 *   -n  ping-pong round trips per transport          default 20000
 *   -m  ping-pong message size in bytes               default 64
 *   -t  bytes per throughput run                      default 256 MiB
 *   -r  throughput runs per transport                 default 5
 *   -z  comma-separated memcpy sizes                  default 4096,1048576,268435456
 *   -b  bytes each memcpy size moves in total         default 1 GiB (iterations = max(10, b/size), <= 20000)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void die(const char *what) {
    fprintf(stderr, "raw_baselines: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    size_t n;
    double median, p99, mean, min, max;
} stats;

/* Median (mean of the two middle values for even n) and nearest-rank 99th percentile; sorts v. */
static stats compute(double *v, size_t n) {
    stats s = {0};
    s.n = n;
    if (!n) return s;
    qsort(v, n, sizeof *v, cmp_double);
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    size_t rank = (99 * n + 99) / 100;
    s.p99 = v[(rank ? rank : 1) - 1];
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    s.mean = sum / (double)n;
    s.min = v[0];
    s.max = v[n - 1];
    return s;
}

static void print_stats(const char *bench, const char *op, stats s, const char *extra) {
    printf("{\"bench\": \"%s\", \"op\": \"%s\", \"n\": %zu, \"median_us\": %.4f, \"p99_us\": %.4f, "
           "\"mean_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f%s}\n",
           bench, op, s.n, s.median, s.p99, s.mean, s.min, s.max, extra);
    fflush(stdout);
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ---- connected pairs: a Unix socketpair, or TCP over 127.0.0.1 ---- */

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
}

/* Makes a connected pair fds[0] (parent) / fds[1] (child). */
static void make_pair(int tcp, int fds[2]) {
    if (!tcp) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) die("socketpair");
        return;
    }
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0) die("bind/listen");
    if (getsockname(l, (struct sockaddr *)&a, &al) != 0) die("getsockname");
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    close(l);
    nodelay(c);
    nodelay(s);
    fds[0] = c;
    fds[1] = s;
}

static pid_t fork_peer(int fds[2], void (*peer)(int fd, size_t arg), size_t arg) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(fds[0]);
        peer(fds[1], arg);
        _exit(0);
    }
    close(fds[1]);
    return pid;
}

static void reap(int fd, pid_t pid) {
    close(fd);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

/* ---- ping-pong ---- */

static void echo_peer(int fd, size_t msg) {
    char *buf = malloc(msg);
    if (!buf) _exit(1);
    while (read_all(fd, buf, msg) == 0)
        if (write_all(fd, buf, msg) != 0) break;
    free(buf);
}

static void pingpong(int tcp, size_t iters, size_t msg) {
    int fds[2];
    make_pair(tcp, fds);
    pid_t pid = fork_peer(fds, echo_peer, msg);
    char *buf = calloc(1, msg);
    double *t = malloc(iters * sizeof *t);
    if (!buf || !t) die("malloc");
    for (size_t i = 0; i < 1000; i++) /* warm-up */
        if (write_all(fds[0], buf, msg) || read_all(fds[0], buf, msg)) die("ping-pong");
    for (size_t i = 0; i < iters; i++) {
        double t0 = now_us();
        if (write_all(fds[0], buf, msg) || read_all(fds[0], buf, msg)) die("ping-pong");
        t[i] = now_us() - t0;
    }
    reap(fds[0], pid);
    char op[64], extra[64];
    snprintf(op, sizeof op, "%s ping-pong %zu B", tcp ? "tcp" : "unix", msg);
    snprintf(extra, sizeof extra, ", \"transport\": \"%s\", \"bytes\": %zu", tcp ? "tcp" : "unix", msg);
    print_stats("pingpong", op, compute(t, iters), extra);
    free(t);
    free(buf);
}

/* ---- stream throughput ---- */

#define STREAM_CHUNK (1u << 20)

static void sink_peer(int fd, size_t total) {
    char *buf = malloc(STREAM_CHUNK);
    if (!buf) _exit(1);
    for (;;) {
        size_t left = total;
        while (left) {
            ssize_t k = read(fd, buf, left < STREAM_CHUNK ? left : STREAM_CHUNK);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) goto out;
            left -= (size_t)k;
        }
        char ack = 1;
        if (write_all(fd, &ack, 1) != 0) break;
    }
out:
    free(buf);
}

static void throughput(int tcp, size_t total, size_t reps) {
    int fds[2];
    make_pair(tcp, fds);
    pid_t pid = fork_peer(fds, sink_peer, total);
    char *src = malloc(total);
    double *t = malloc((reps + 1) * sizeof *t);
    if (!src || !t) die("malloc");
    memset(src, 0x5a, total);
    for (size_t r = 0; r <= reps; r++) { /* run 0 is a warm-up */
        char ack;
        double t0 = now_us();
        if (write_all(fds[0], src, total) != 0 || read_all(fds[0], &ack, 1) != 0) die("stream");
        t[r] = now_us() - t0;
    }
    reap(fds[0], pid);
    stats s = compute(t + 1, reps);
    char op[64], extra[192];
    snprintf(op, sizeof op, "%s stream %zu B", tcp ? "tcp" : "unix", total);
    snprintf(extra, sizeof extra,
             ", \"transport\": \"%s\", \"bytes\": %zu, \"gbps_median\": %.4f, \"gbps_p99\": %.4f",
             tcp ? "tcp" : "unix", total, (double)total / s.median / 1e3, (double)total / s.p99 / 1e3);
    print_stats("stream", op, s, extra);
    free(t);
    free(src);
}

/* ---- memcpy ---- */

/* Buffers of `size` bytes; `huge` asks for transparent huge pages (madvise), as numpy does for the emulator's
 * device arena: with THP in "madvise" mode a plain malloc gets 4 KiB pages, and TLB misses cost bandwidth. */
static char *buffer(size_t size, int huge) {
    if (!huge) return malloc(size);
    size_t align = (size_t)2 << 20, rounded = (size + align - 1) / align * align;
    char *p = aligned_alloc(align, rounded);
    if (p) madvise(p, rounded, MADV_HUGEPAGE); /* best effort: THP may be off */
    return p;
}

static void memcpy_bw(size_t size, size_t budget, int huge) {
    size_t iters = budget / size;
    if (iters < 10) iters = 10;
    if (iters > 20000) iters = 20000;
    char *a = buffer(size, huge), *b = buffer(size, huge);
    double *t = malloc(iters * sizeof *t);
    if (!a || !b || !t) die("malloc");
    memset(a, 0xa5, size); /* touch every page of both buffers */
    memset(b, 0x5a, size);
    volatile unsigned char sink = 0;
    memcpy(b, a, size); /* warm-up */
    for (size_t i = 0; i < iters; i++) {
        double t0 = now_us();
        memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
        t[i] = now_us() - t0;
        sink ^= (unsigned char)(i & 1 ? a : b)[i % size];
    }
    (void)sink;
    stats s = compute(t, iters);
    char op[64], extra[192];
    snprintf(op, sizeof op, "memcpy %zu%s", size, huge ? " hugepages" : "");
    snprintf(extra, sizeof extra,
             ", \"bytes\": %zu, \"hugepages\": %s, \"gbps_median\": %.4f, \"gbps_p99\": %.4f", size,
             huge ? "true" : "false", (double)size / s.median / 1e3, (double)size / s.p99 / 1e3);
    print_stats("memcpy", op, s, extra);
    free(t);
    free(b);
    free(a);
}

int main(int argc, char **argv) {
    size_t iters = 20000, msg = 64, stream_bytes = (size_t)256 << 20, reps = 5, budget = (size_t)1 << 30;
    const char *sizes = "4096,1048576,268435456";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        size_t x = strtoull(v, NULL, 0);
        if (!strcmp(f, "-n")) iters = x;
        else if (!strcmp(f, "-m")) msg = x ? x : 1;
        else if (!strcmp(f, "-t")) stream_bytes = x ? x : 1;
        else if (!strcmp(f, "-r")) reps = x ? x : 1;
        else if (!strcmp(f, "-b")) budget = x;
        else if (!strcmp(f, "-z")) sizes = v;
        else {
            fprintf(stderr, "usage: %s [-n N] [-m BYTES] [-t BYTES] [-r N] [-z SIZES] [-b BYTES]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (iters) {
        pingpong(0, iters, msg);
        pingpong(1, iters, msg);
    }
    throughput(0, stream_bytes, reps);
    throughput(1, stream_bytes, reps);
    char *list = strdup(sizes);
    if (!list) die("strdup");
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t size = strtoull(tok, NULL, 0);
        if (!size) continue;
        memcpy_bw(size, budget, 0);
        if (size >= ((size_t)2 << 20)) memcpy_bw(size, budget, 1);
    }
    free(list);
    return 0;
}
