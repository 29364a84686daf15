/* SHA-256 (FIPS 180-4) of a fat binary: the content hash by which modules are uploaded once per server.
 * Written here because the shim links nothing beyond libc (no OpenSSL inside every CUDA application). */
#ifndef GS_SHA256_H
#define GS_SHA256_H
#include <stddef.h>
#include <stdint.h>
void gs_sha256(const void *data, size_t len, uint8_t out[32]);
#endif
