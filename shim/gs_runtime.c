/* Finds which libcudart the application loaded and its API version: the version the client is built
 * against, sent in the handshake so the server can adapt every call to it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_client.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int version;
static char soname[64] = "";
static char path[PATH_MAX] = "";
static _Atomic int driver_client_version; /* cuGetProcAddress's cudaVersion, for driver-only clients */
static _Thread_local int detecting; /* inside the real libcudart's cudaRuntimeGetVersion */

static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    const char *name = info->dlpi_name;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (base && strncmp(base, "libcudart.so.", 13) == 0) {
        snprintf(path, sizeof path, "%s", name);
        snprintf(soname, sizeof soname, "%s", base);
        return 1;
    }
    return 0;
}

/* "libcudart.so.11.8.89" -> 11080. A soname ("libcudart.so.12", "libcudart.so.11.0") says nothing of the
 * minor version, so only a full major.minor.patch name counts. */
static int version_from_filename(const char *file) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    int major = 0, minor = -1, patch = -1;
    if (sscanf(base, "libcudart.so.%d.%d.%d", &major, &minor, &patch) == 3 && major >= 10 && minor >= 0 &&
        minor < 100)
        return major * 1000 + minor * 10;
    return 0;
}

/* pip wheels keep the version in site-packages/nvidia_cuda_runtime_cuNN-X.Y.Z.dist-info. */
static int version_from_wheel(const char *lib) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", lib);
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash) return 0;
        *slash = 0;
        DIR *d = opendir(dir[0] ? dir : "/");
        if (!d) continue;
        struct dirent *e;
        int found = 0;
        while ((e = readdir(d))) {
            int major, minor;
            if (sscanf(e->d_name, "nvidia_cuda_runtime_cu%*d-%d.%d", &major, &minor) == 2 ||
                sscanf(e->d_name, "nvidia_cuda_runtime-%d.%d", &major, &minor) == 2) {
                if (strstr(e->d_name, ".dist-info")) { found = major * 1000 + minor * 10; break; }
            }
        }
        closedir(d);
        if (found) return found;
    }
    return 0;
}

static void detect(void) {
    const char *forced = getenv("GPUSHIM_RUNTIME_VERSION");
    dl_iterate_phdr(find_cudart, NULL);
    if (forced && *forced) {
        version = atoi(forced);
    } else if (path[0]) {
        void *h = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
        if (h) {
            /* The real library's own function: dlsym on its handle never finds the shim's definition. */
            int (*rgv)(int *) = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
            int v = 0;
            /* The real runtime may initialise and open libcuda.so.1, which is gpushim's driver face: that
             * face must then behave as if no driver were installed (it cannot connect before this ends). */
            detecting = 1;
            if (rgv && rgv(&v) == 0 && v > 0) version = v;
            detecting = 0;
            dlclose(h);
        }
        if (!version) {
            char real[PATH_MAX];
            if (realpath(path, real)) version = version_from_filename(real);
        }
        if (!version) version = version_from_wheel(path);
        if (!version) {
            int major = 0;
            sscanf(soname, "libcudart.so.%d", &major);
            version = major * 1000;
            gs_log(1, "could not tell the minor version of %s; assuming CUDA %d.0 (set GPUSHIM_RUNTIME_VERSION)",
                   path, major);
        }
    }
    gs_log(2, "client runtime: %s (%s), API version %d", soname[0] ? soname : "none found", path, version);
}

int gs_runtime_detecting(void) { return detecting; }

void gs_detect_runtime(void) { pthread_once(&once, detect); }

int gs_runtime_version(void) {
    gs_detect_runtime();
    if (version) return version;
    int v = driver_client_version;
    return v >= 11000 ? v : 0; /* older look-ups say nothing of the client: the server assumes its driver's */
}

/* A process without libcudart tells its CUDA version only through the driver look-ups it makes (some
 * bindings ask each entry point at its own introduction version): the newest one before the handshake
 * (frameworks look their entry points up first) becomes its version. */
static _Atomic int announced = -1; /* the version the handshake told the server; -1 before it */

int gs_runtime_version_announce(void) {
    int v = gs_runtime_version();
    announced = v;
    return v;
}

/* A process may connect before its runtime looks anything up (CuPy calls cuInit and cuDriverGetVersion
 * first, then its statically linked runtime starts): a newer version learned after the handshake is told to
 * the server (RUNTIME_VERSION), which records it for its status and the session log. */
static void announce_later(int v) {
    int cur = announced;
    if (version || cur < 0 || v < 11000 || v <= cur || !atomic_compare_exchange_strong(&announced, &cur, v)) return;
    gs_call c;
    gs_call_begin(&c, GS_OP_RUNTIME_VERSION, 1);
    gs_w_int(c.w, v);
    cudaError_t e = gs_call_run(&c);
    gs_call_end(&c);
    gs_log(2, "told the server this is a CUDA %d client (learned after connecting): %s", v, e ? "refused" : "ok");
}

void gs_drv_note_version(int cuda_version) {
    if (cuda_version < 2000 || cuda_version >= 100000) return;
    int cur = driver_client_version;
    while (cuda_version > cur && !atomic_compare_exchange_weak(&driver_client_version, &cur, cuda_version)) {
    }
    if (cuda_version > cur && !detecting) announce_later(cuda_version);
}

const char *gs_runtime_soname(void) {
    gs_detect_runtime();
    return soname;
}
