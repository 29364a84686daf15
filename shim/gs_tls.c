/* TLS for tls://host:port (see gs_tls.h). The application's threads keep using a plain socket -- the client
 * code reads and writes file descriptors directly -- and one relay thread per connection moves bytes between
 * that socket and the TLS session, with non-blocking I/O in both directions so that neither side's full
 * buffer can stall the other. OpenSSL's few functions are looked up with dlsym: no headers, no linking. */
#define _GNU_SOURCE
#include "gs_tls.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct ssl_method_st SSL_METHOD;
typedef struct X509_VERIFY_PARAM_st X509_VERIFY_PARAM;

/* OpenSSL's constants (stable across 1.1 and 3.x) */
#define TLS_ERROR_WANT_READ 2
#define TLS_ERROR_WANT_WRITE 3
#define TLS_VERIFY_PEER 1
#define TLS_CTRL_MODE 33
#define TLS_CTRL_SET_TLSEXT_HOSTNAME 55
#define TLS_CTRL_SET_MIN_PROTO_VERSION 123
#define TLS_MODE_PARTIAL_MOVING 3 /* SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER */
#define TLS1_2 0x0303

static struct {
    int loaded;
    char why[256];
    const SSL_METHOD *(*client_method)(void);
    SSL_CTX *(*ctx_new)(const SSL_METHOD *);
    void (*ctx_free)(SSL_CTX *);
    long (*ctx_ctrl)(SSL_CTX *, int, long, void *);
    void (*ctx_set_verify)(SSL_CTX *, int, void *);
    int (*ctx_load_verify_locations)(SSL_CTX *, const char *, const char *);
    int (*ctx_set_default_verify_paths)(SSL_CTX *);
    SSL *(*ssl_new)(SSL_CTX *);
    void (*ssl_free)(SSL *);
    int (*set_fd)(SSL *, int);
    int (*set1_host)(SSL *, const char *);
    X509_VERIFY_PARAM *(*get0_param)(SSL *);
    int (*param_set1_ip_asc)(X509_VERIFY_PARAM *, const char *);
    long (*ssl_ctrl)(SSL *, int, long, void *);
    int (*ssl_connect)(SSL *);
    int (*ssl_read)(SSL *, void *, int);
    int (*ssl_write)(SSL *, const void *, int);
    int (*get_error)(const SSL *, int);
    int (*ssl_shutdown)(SSL *);
    long (*get_verify_result)(const SSL *);
    const char *(*verify_string)(long);
    unsigned long (*err_get)(void);
    void (*err_string)(unsigned long, char *, size_t);
} ossl;
static pthread_mutex_t tls_load_lock = PTHREAD_MUTEX_INITIALIZER;

#define TLS_SYM(field, name)                                                                          \
    do {                                                                                              \
        *(void **)&ossl.field = dlsym(lib, name);                                                     \
        if (!ossl.field) { snprintf(ossl.why, sizeof ossl.why, "%s lacks %s", soname, name); return -1; } \
    } while (0)

static int tls_load_locked(void) {
    if (ossl.loaded) return ossl.loaded > 0 ? 0 : -1;
    ossl.loaded = -1;
    const char *names[] = {"libssl.so.3", "libssl.so.1.1"};
    const char *chosen = getenv("GPUSHIM_LIBSSL"); /* a libssl elsewhere than the linker's search path */
    void *lib = NULL;
    const char *soname = NULL;
    for (size_t i = 0; i < (chosen && *chosen ? 1 : sizeof names / sizeof *names) && !lib; i++) {
        soname = chosen && *chosen ? chosen : names[i];
        lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL); /* local: the application may have its own OpenSSL */
    }
    if (!lib) {
        snprintf(ossl.why, sizeof ossl.why, "tls:// needs the system's OpenSSL (libssl.so.3), which cannot be "
                 "loaded: %s", dlerror());
        return -1;
    }
    TLS_SYM(client_method, "TLS_client_method");
    TLS_SYM(ctx_new, "SSL_CTX_new");
    TLS_SYM(ctx_free, "SSL_CTX_free");
    TLS_SYM(ctx_ctrl, "SSL_CTX_ctrl");
    TLS_SYM(ctx_set_verify, "SSL_CTX_set_verify");
    TLS_SYM(ctx_load_verify_locations, "SSL_CTX_load_verify_locations");
    TLS_SYM(ctx_set_default_verify_paths, "SSL_CTX_set_default_verify_paths");
    TLS_SYM(ssl_new, "SSL_new");
    TLS_SYM(ssl_free, "SSL_free");
    TLS_SYM(set_fd, "SSL_set_fd");
    TLS_SYM(set1_host, "SSL_set1_host");
    TLS_SYM(get0_param, "SSL_get0_param");
    TLS_SYM(param_set1_ip_asc, "X509_VERIFY_PARAM_set1_ip_asc"); /* libcrypto, a dependency of libssl */
    TLS_SYM(ssl_ctrl, "SSL_ctrl");
    TLS_SYM(ssl_connect, "SSL_connect");
    TLS_SYM(ssl_read, "SSL_read");
    TLS_SYM(ssl_write, "SSL_write");
    TLS_SYM(get_error, "SSL_get_error");
    TLS_SYM(ssl_shutdown, "SSL_shutdown");
    TLS_SYM(get_verify_result, "SSL_get_verify_result");
    TLS_SYM(verify_string, "X509_verify_cert_error_string");
    TLS_SYM(err_get, "ERR_get_error");
    TLS_SYM(err_string, "ERR_error_string_n");
    ossl.loaded = 1;
    return 0;
}

/* The relay of the current connection, so that a forked child can let go of it (the parent keeps it). */
static atomic_int tls_relay_net = -1, tls_relay_local = -1;

static void tls_after_fork_child(void) {
    int a = atomic_exchange(&tls_relay_net, -1), b = atomic_exchange(&tls_relay_local, -1);
    if (a >= 0) close(a);
    if (b >= 0) close(b);
}

__attribute__((constructor)) static void tls_init(void) { pthread_atfork(NULL, NULL, tls_after_fork_child); }

typedef struct {
    SSL *ssl;
    SSL_CTX *ctx;
    int net, local;
} tls_relay;

#define TLS_BUF (256 << 10)

static void *tls_relay_main(void *arg) {
    tls_relay *r = arg;
    char *up = malloc(TLS_BUF), *down = malloc(TLS_BUF); /* local -> server, server -> local */
    size_t up_len = 0, up_off = 0, down_len = 0, down_off = 0;
    int local_eof = 0;
    while (up && down) {
        int progress = 0, net_events = 0;
        if (!local_eof && up_len == 0) {
            ssize_t n = read(r->local, up, TLS_BUF);
            if (n > 0) { up_len = (size_t)n; up_off = 0; progress = 1; }
            else if (n == 0 || (errno != EAGAIN && errno != EINTR)) local_eof = 1;
        }
        if (up_off < up_len) {
            int w = ossl.ssl_write(r->ssl, up + up_off, (int)(up_len - up_off));
            if (w > 0) {
                up_off += (size_t)w;
                if (up_off == up_len) up_len = up_off = 0;
                progress = 1;
            } else {
                int e = ossl.get_error(r->ssl, w);
                if (e == TLS_ERROR_WANT_READ) net_events |= POLLIN;
                else if (e == TLS_ERROR_WANT_WRITE) net_events |= POLLOUT;
                else break;
            }
        }
        if (local_eof && up_len == 0) { /* the client closed its end: say goodbye to the server */
            ossl.ssl_shutdown(r->ssl);
            break;
        }
        if (down_len == 0) {
            int n = ossl.ssl_read(r->ssl, down, TLS_BUF);
            if (n > 0) { down_len = (size_t)n; down_off = 0; progress = 1; }
            else {
                int e = ossl.get_error(r->ssl, n);
                if (e == TLS_ERROR_WANT_READ) net_events |= POLLIN;
                else if (e == TLS_ERROR_WANT_WRITE) net_events |= POLLOUT;
                else break; /* the server closed the connection, or it broke */
            }
        }
        if (down_off < down_len) {
            ssize_t n = send(r->local, down + down_off, down_len - down_off, MSG_NOSIGNAL);
            if (n > 0) {
                down_off += (size_t)n;
                if (down_off == down_len) down_len = down_off = 0;
                progress = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) break;
        }
        if (progress) continue;
        struct pollfd p[2] = {{.fd = r->local}, {.fd = r->net, .events = (short)net_events}};
        if (!local_eof && up_len == 0) p[0].events |= POLLIN;
        if (down_off < down_len) p[0].events |= POLLOUT;
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    }
    free(up);
    free(down);
    /* the fork handler may have taken the descriptors in a child; here, in the process that owns them: */
    int expect_net = r->net, expect_local = r->local;
    atomic_compare_exchange_strong(&tls_relay_net, &expect_net, -1);
    atomic_compare_exchange_strong(&tls_relay_local, &expect_local, -1);
    ossl.ssl_free(r->ssl);
    ossl.ctx_free(r->ctx);
    close(r->net);
    close(r->local); /* the client sees the connection end */
    free(r);
    return NULL;
}

static void tls_error(SSL *ssl, const char *host, char *why, size_t whylen) {
    long v = ssl ? ossl.get_verify_result(ssl) : 0;
    if (v != 0) {
        snprintf(why, whylen, "the TLS certificate of %s is not trusted: %s (set GPUSHIM_TLS_CA to the PEM file "
                 "of the CA that signed it)", host, ossl.verify_string(v));
        return;
    }
    unsigned long e = ossl.err_get();
    char text[256] = "";
    if (e) ossl.err_string(e, text, sizeof text);
    else if (errno) snprintf(text, sizeof text, "%s", strerror(errno));
    else snprintf(text, sizeof text, "the server closed the connection (is it a tls:// gpushim server?)");
    snprintf(why, whylen, "TLS handshake with %s failed: %s", host, text);
}

int gs_tls_start(int net, const char *host, char *why, size_t whylen) {
    pthread_mutex_lock(&tls_load_lock);
    int ok = tls_load_locked() == 0;
    pthread_mutex_unlock(&tls_load_lock);
    if (!ok) {
        snprintf(why, whylen, "%s", ossl.why);
        close(net);
        return -1;
    }
    SSL_CTX *ctx = ossl.ctx_new(ossl.client_method());
    SSL *ssl = NULL;
    int sv[2] = {-1, -1};
    if (!ctx) { tls_error(NULL, host, why, whylen); goto fail; }
    ossl.ctx_ctrl(ctx, TLS_CTRL_SET_MIN_PROTO_VERSION, TLS1_2, NULL);
    ossl.ctx_set_verify(ctx, TLS_VERIFY_PEER, NULL);
    const char *ca = getenv("GPUSHIM_TLS_CA");
    if (ca && *ca) {
        if (ossl.ctx_load_verify_locations(ctx, ca, NULL) != 1) {
            snprintf(why, whylen, "cannot load GPUSHIM_TLS_CA=%s (a PEM file of CA certificates)", ca);
            goto fail;
        }
    } else ossl.ctx_set_default_verify_paths(ctx);
    ssl = ossl.ssl_new(ctx); /* after the context is configured: a new SSL copies its verify mode */
    if (!ssl) { tls_error(NULL, host, why, whylen); goto fail; }
    struct in6_addr a6;
    int is_ip = inet_pton(AF_INET, host, &a6) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
    if (is_ip) ossl.param_set1_ip_asc(ossl.get0_param(ssl), host); /* the certificate must name this address */
    else {
        ossl.set1_host(ssl, host);
        ossl.ssl_ctrl(ssl, TLS_CTRL_SET_TLSEXT_HOSTNAME, 0, (void *)host);
    }
    ossl.ssl_ctrl(ssl, TLS_CTRL_MODE, TLS_MODE_PARTIAL_MOVING, NULL);
    ossl.set_fd(ssl, net);
    errno = 0;
    if (ossl.ssl_connect(ssl) != 1) { tls_error(ssl, host, why, whylen); goto fail; } /* net's timeouts bound it */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, whylen, "socketpair: %s", strerror(errno));
        goto fail;
    }
    fcntl(net, F_SETFL, fcntl(net, F_GETFL) | O_NONBLOCK);
    fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
    tls_relay *r = malloc(sizeof *r);
    if (!r) { snprintf(why, whylen, "out of memory"); goto fail; }
    *r = (tls_relay){ssl, ctx, net, sv[1]};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the application's signals are not for the relay */
    atomic_store(&tls_relay_net, net);
    atomic_store(&tls_relay_local, sv[1]);
    pthread_t t;
    int rc = pthread_create(&t, &attr, tls_relay_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_store(&tls_relay_net, -1);
        atomic_store(&tls_relay_local, -1);
        free(r);
        snprintf(why, whylen, "cannot start the TLS relay thread: %s", strerror(rc));
        goto fail;
    }
    return sv[0];
fail:
    if (ssl) ossl.ssl_free(ssl);
    if (ctx) ossl.ctx_free(ctx);
    if (sv[0] >= 0) close(sv[0]);
    if (sv[1] >= 0) close(sv[1]);
    close(net);
    return -1;
}
