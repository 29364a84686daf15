/* Sockets and frames: where the server is (GPUSHIM_SERVER), connecting, and length-prefixed frames. */
#ifndef GS_TRANSPORT_H
#define GS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The server address in use, as a URL (unix:///path or tcp://host:port). */
void gs_transport_address(char *out, size_t n);
/* Seconds to connect and handshake (GPUSHIM_CONNECT_TIMEOUT, default 10). */
double gs_transport_connect_timeout(void);
/* Receive timeout of a socket in seconds (0: none). */
void gs_transport_set_timeout(int fd, double seconds);
/* Connects; returns the fd, or -1 with a reason in why. */
int gs_transport_connect(char *why, size_t whylen);
/* GPUSHIM_SERVER=url1,url2,...: starts the multiplexer (`python3 -m gpushim multiplex`, gpushim/server/
 * multiplex.py) on one end of a socket pair and returns the other end, or -1 with a reason in why. */
int gs_multi_connect(const char *urls, char *why, size_t whylen);
/* The token sent in the handshake (GPUSHIM_TOKEN, or the first line of GPUSHIM_TOKEN_FILE), or "". */
const char *gs_transport_token(void);

/* Writes everything or returns -1 (EINTR-safe, no SIGPIPE). */
int gs_sendv(int fd, struct iovec *iov, int n);
/* gs_sendv, passing a file descriptor (SCM_RIGHTS) with the first byte; Unix sockets only. */
int gs_sendv_fd(int fd, struct iovec *iov, int n, int pass_fd);
/* True when the server address is a Unix socket (same host: shared memory is possible). */
int gs_transport_is_unix(void);
int gs_send_raw(int fd, const void *a, size_t alen, const void *b, size_t blen);
/* Sends one frame: the length prefix, then body and extra. */
int gs_send_frame(int fd, const void *body, size_t len, const void *extra, size_t extra_len);
/* Reads one frame into a malloc'd buffer. Returns 0, or -1 on EOF, error or a frame over the limit. */
int gs_recv_frame(int fd, uint8_t **frame, size_t *len);

#endif
