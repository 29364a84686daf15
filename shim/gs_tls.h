/* TLS for tls://host:port servers, with the system's OpenSSL (libssl.so.3) loaded at run time: the shim has
 * no link-time dependency on it, and only a tls:// address loads it. */
#ifndef GS_TLS_H
#define GS_TLS_H

#include <stddef.h>

/* Runs the TLS handshake on the connected TCP socket net (verifying the server's certificate for host against
 * GPUSHIM_TLS_CA, a PEM file, or the system's store), then hands back a local socket: what the caller writes
 * to it is encrypted onto net by a relay thread, and what the server sends arrives on it decrypted. Returns
 * the local socket, or -1 with a reason in why (net is closed either way). */
int gs_tls_start(int net, const char *host, char *why, size_t whylen);

#endif
