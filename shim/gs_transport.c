#define _GNU_SOURCE
#include "gs_transport.h"

#include <errno.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "gen/ops.h"
#include "gs_tls.h"

void gs_transport_address(char *out, size_t n) {
    const char *env = getenv("GPUSHIM_SERVER");
    if (env && *env) { snprintf(out, n, "%s", env); return; }
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (rt && *rt) snprintf(out, n, "unix://%s/gpushim.sock", rt);
    else snprintf(out, n, "unix:///tmp/gpushim-%u.sock", (unsigned)getuid());
}

const char *gs_transport_token(void) {
    static char token[256];
    static int loaded;
    if (!loaded) {
        loaded = 1;
        const char *t = getenv("GPUSHIM_TOKEN");
        const char *f = getenv("GPUSHIM_TOKEN_FILE");
        if (t) snprintf(token, sizeof token, "%s", t);
        else if (f) {
            FILE *fp = fopen(f, "r");
            if (fp) {
                if (fgets(token, sizeof token, fp)) token[strcspn(token, "\r\n")] = 0;
                fclose(fp);
            }
        }
    }
    return token;
}

double gs_transport_connect_timeout(void) {
    const char *e = getenv("GPUSHIM_CONNECT_TIMEOUT");
    double t = e ? atof(e) : 10.0;
    return t > 0 ? t : 10.0;
}

void gs_transport_set_timeout(int fd, double seconds) {
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int connect_unix(const char *path, char *why, size_t whylen) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) { snprintf(why, whylen, "socket path too long"); return -1; }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) { snprintf(why, whylen, "socket: %s", strerror(errno)); return -1; }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int connect_tcp(const char *hostport, char *why, size_t whylen) {
    char host[512];
    if (strlen(hostport) >= sizeof host) { snprintf(why, whylen, "tcp address too long"); return -1; }
    memcpy(host, hostport, strlen(hostport) + 1);
    char *colon = strrchr(host, ':');
    if (!colon) { snprintf(why, whylen, "tcp address needs a port: %s", hostport); return -1; }
    *colon = 0;
    const char *port = colon + 1;
    char *h = host;
    if (*h == '[') { h++; char *e = strchr(h, ']'); if (e) *e = 0; } /* [::1]:port */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(h, port, &hints, &res);
    if (rc != 0) { snprintf(why, whylen, "cannot resolve %s: %s", h, gai_strerror(rc)); return -1; }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        gs_transport_set_timeout(fd, gs_transport_connect_timeout()); /* Linux bounds connect() by SO_SNDTIMEO */
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

/* The host part of host:port or [v6]:port, into out. */
static void host_of(const char *hostport, char *out, size_t n) {
    snprintf(out, n, "%s", hostport);
    char *colon = strrchr(out, ':');
    if (colon) *colon = 0;
    if (out[0] == '[') {
        memmove(out, out + 1, strlen(out));
        char *e = strchr(out, ']');
        if (e) *e = 0;
    }
}

int gs_transport_connect(char *why, size_t whylen) {
    char addr[512];
    gs_transport_address(addr, sizeof addr);
    if (strchr(addr, ',')) return gs_multi_connect(addr, why, whylen); /* several servers: gs_multi.c */
    if (strncmp(addr, "unix://", 7) == 0) return connect_unix(addr + 7, why, whylen);
    if (strncmp(addr, "unix:", 5) == 0) return connect_unix(addr + 5, why, whylen);
    if (strncmp(addr, "tcp://", 6) == 0) return connect_tcp(addr + 6, why, whylen);
    if (strncmp(addr, "tls://", 6) == 0) {
        int fd = connect_tcp(addr + 6, why, whylen);
        if (fd < 0) return -1;
        char host[512];
        host_of(addr + 6, host, sizeof host);
        return gs_tls_start(fd, host, why, whylen); /* the client talks to a local end; a thread encrypts */
    }
    snprintf(why, whylen, "GPUSHIM_SERVER must be unix:///path, tcp://host:port or tls://host:port, not '%s'",
             addr);
    return -1;
}

int gs_sendv(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) { w -= (ssize_t)iov->iov_len; iov++; n--; }
        if (n > 0) { iov->iov_base = (char *)iov->iov_base + w; iov->iov_len -= (size_t)w; }
    }
    return 0;
}

int gs_transport_is_unix(void) {
    char addr[512];
    gs_transport_address(addr, sizeof addr);
    /* several servers: shared memory would need every server on this host; the multiplexer does not use it */
    return strncmp(addr, "unix:", 5) == 0 && !strchr(addr, ',');
}

int gs_sendv_fd(int fd, struct iovec *iov, int n, int pass_fd) {
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n, .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    ssize_t w;
    do w = sendmsg(fd, &m, MSG_NOSIGNAL); while (w < 0 && errno == EINTR);
    if (w < 0) return -1;
    /* the rest, if the kernel took only part of it, goes without the descriptor */
    while (n > 0 && (size_t)w >= iov->iov_len) { w -= (ssize_t)iov->iov_len; iov++; n--; }
    if (n > 0) { iov->iov_base = (char *)iov->iov_base + w; iov->iov_len -= (size_t)w; }
    return n > 0 ? gs_sendv(fd, iov, n) : 0;
}

int gs_send_raw(int fd, const void *a, size_t alen, const void *b, size_t blen) {
    struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
    return gs_sendv(fd, iov, blen ? 2 : 1);
}

int gs_send_frame(int fd, const void *body, size_t len, const void *extra, size_t extra_len) {
    uint32_t total = (uint32_t)(len + extra_len);
    struct iovec iov[3] = {{&total, 4}, {(void *)body, len}, {(void *)extra, extra_len}};
    return gs_sendv(fd, iov, extra_len ? 3 : 2);
}

static int read_full(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int gs_recv_frame(int fd, uint8_t **frame, size_t *len) {
    uint32_t n;
    if (read_full(fd, &n, 4) != 0 || n > GS_MAX_FRAME) return -1;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || read_full(fd, buf, n) != 0) { free(buf); return -1; }
    *frame = buf;
    *len = n;
    return 0;
}
