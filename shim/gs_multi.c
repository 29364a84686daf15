/* Several servers as one device list (GPUSHIM_SERVER=url1,url2,...): the shim speaks the ordinary protocol
 * to a multiplexer process it starts on a socket pair; the multiplexer (gpushim/server/multiplex.py) opens a
 * session on each server and routes every call to the server owning its device, stream or pointer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gs_transport.h"

extern char **environ;

#define MAX_URLS 16
#define CHILD_FD 3

/* The directory that holds the gpushim package this shim belongs to (…/gpushim/lib/libgpushim.so -> …). */
static void package_parent(char *out, size_t n) {
    Dl_info info;
    char real[PATH_MAX];
    out[0] = 0;
    if (!dladdr((void *)package_parent, &info) || !info.dli_fname || !realpath(info.dli_fname, real)) return;
    for (int up = 0; up < 3; up++) { /* drop libgpushim.so, lib, gpushim */
        char *slash = strrchr(real, '/');
        if (!slash || slash == real) return;
        *slash = 0;
    }
    snprintf(out, n, "%s", real);
}

int gs_multi_connect(const char *urls, char *why, size_t whylen) {
    char list[512], *argv[8 + MAX_URLS], fdarg[16];
    snprintf(list, sizeof list, "%s", urls);
    const char *python = getenv("GPUSHIM_PYTHON");
    int argc = 0;
    argv[argc++] = (char *)(python && *python ? python : "python3");
    argv[argc++] = "-m";
    argv[argc++] = "gpushim";
    argv[argc++] = "multiplex";
    argv[argc++] = "--fd";
    snprintf(fdarg, sizeof fdarg, "%d", CHILD_FD);
    argv[argc++] = fdarg;
    int nurls = 0;
    for (char *save = NULL, *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        while (*u == ' ') u++;
        if (!*u) continue;
        if (nurls == MAX_URLS) { snprintf(why, whylen, "GPUSHIM_SERVER lists more than %d servers", MAX_URLS); return -1; }
        argv[argc++] = u;
        nurls++;
    }
    argv[argc] = NULL;
    if (nurls < 1) { snprintf(why, whylen, "GPUSHIM_SERVER lists no server"); return -1; }

    /* The child's environment: ours without LD_PRELOAD, with this shim's package first on PYTHONPATH. */
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    char **env = calloc(nenv + 2, sizeof *env);
    char parent[PATH_MAX], *pythonpath = NULL;
    if (!env) { snprintf(why, whylen, "out of memory"); return -1; }
    package_parent(parent, sizeof parent);
    size_t k = 0;
    const char *old_pp = getenv("PYTHONPATH");
    for (size_t i = 0; i < nenv; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0 || strncmp(environ[i], "PYTHONPATH=", 11) == 0) continue;
        env[k++] = environ[i];
    }
    if (parent[0] || old_pp) {
        size_t len = strlen(parent) + (old_pp ? strlen(old_pp) : 0) + 16;
        pythonpath = malloc(len);
        if (pythonpath) {
            snprintf(pythonpath, len, "PYTHONPATH=%s%s%s", parent, parent[0] && old_pp && *old_pp ? ":" : "",
                     old_pp ? old_pp : "");
            env[k++] = pythonpath;
        }
    }
    env[k] = NULL;

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, whylen, "socketpair: %s", strerror(errno));
        free(pythonpath);
        free(env);
        return -1;
    }
    /* dup2 onto CHILD_FD clears close-on-exec there; a source that already is CHILD_FD would keep it */
    int child = sv[1] == CHILD_FD ? fcntl(sv[1], F_DUPFD_CLOEXEC, 10) : sv[1];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, child, CHILD_FD);
    pid_t pid;
    int rc = child < 0 ? errno : posix_spawnp(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    if (child != sv[1] && child >= 0) close(child);
    close(sv[1]);
    free(pythonpath);
    free(env);
    if (rc != 0) {
        snprintf(why, whylen, "cannot start the multiplexer (%s -m gpushim multiplex; set GPUSHIM_PYTHON): %s",
                 argv[0], strerror(rc));
        close(sv[0]);
        return -1;
    }
    return sv[0];
}
