/* Registered pages are moved by copying them and mapping the copy over them (shim/api_registered.c). A write by
 * another thread between the copy and the remap would land on the old pages and be lost. So the pages are
 * write-protected while they move: reads go on, and a thread that writes faults into a SIGSEGV handler that
 * waits until the move is over and returns, so the write runs again, on the new pages. Any other fault goes to
 * the application's disposition as before. The handler is installed only while a move runs (applications with
 * their own SIGSEGV handler -- Python's faulthandler, JVMs -- keep theirs the rest of the time).
 *
 * The copy and the remap run on a stack of the guard's (the range may hold the caller's own stack). Moves do not
 * overlap in time (api_registered.c holds its lock), so one in-flight range and one stack are enough. A
 * write-protect fault's signal may be delivered after the move is over (its thread preempted between the fault
 * and the delivery): the handler then still takes it as the move's until no thread has a SIGSEGV pending
 * (/proc/self/task/<tid>/status), and only then is the application's disposition restored.
 *
 * Not covered: a write by the kernel for a system call (read() into those pages, say) during a move fails with
 * EFAULT instead of waiting; another thread whose own stack frames lie on the pages, with no alternate signal
 * stack, is killed by SIGSEGV if it pushes onto them during the move; an application that changes its SIGSEGV
 * disposition while a move runs gets its change kept, but the move's write faults may then reach its handler. */
#define _GNU_SOURCE
#include "gs_move_guard.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { GUARD_IDLE, GUARD_MOVING, GUARD_MOVED };
static _Atomic int guard_state = GUARD_IDLE;
static _Atomic uintptr_t guard_lo, guard_hi;
static struct sigaction guard_app; /* the application's SIGSEGV disposition while ours is installed */

static void guard_pause(long ns) {
    struct timespec t = {0, ns};
    nanosleep(&t, NULL);
}

/* The fault is not the move's: what the application's disposition would have done. Our handler was installed
 * with its mask and flags, so the signal mask here is what its handler would have had. */
static void guard_pass_on(int sig, siginfo_t *si, void *ctx) {
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    if (guard_app.sa_flags & SA_SIGINFO) {
        if (guard_app.sa_flags & SA_RESETHAND) sigaction(sig, &dfl, NULL);
        guard_app.sa_sigaction(sig, si, ctx);
    } else if (guard_app.sa_handler != SIG_DFL && guard_app.sa_handler != SIG_IGN) {
        if (guard_app.sa_flags & SA_RESETHAND) sigaction(sig, &dfl, NULL);
        guard_app.sa_handler(sig);
    } else if (guard_app.sa_handler == SIG_IGN && si->si_code <= 0) {
        /* sent by kill() and the like: ignored, as before */
    } else {
        /* the default (an ignored fault gets it too, as the kernel does): a fault recurs on return and kills; a
         * sent signal is sent again, to be delivered once this handler returns */
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0) raise(sig);
    }
}

static void guard_on_segv(int sig, siginfo_t *si, void *ctx) {
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (si->si_code == SEGV_ACCERR && atomic_load(&guard_state) != GUARD_IDLE && a >= atomic_load(&guard_lo) &&
        a < atomic_load(&guard_hi)) {
        while (atomic_load(&guard_state) == GUARD_MOVING) guard_pause(20000);
    } else {
        guard_pass_on(sig, si, ctx);
    }
    errno = saved;
}

static void guard_end(void);

/* The move runs on a stack of its own: the range may hold the caller's own stack (a local array registered), and
 * a thread cannot write its stack -- nor take a signal on it -- while those pages are write-protected. Moves do
 * not overlap, so one stack serves them all. */
static void *guard_stack;
enum { GUARD_STACK_SIZE = 256 * 1024 };
static ucontext_t guard_ctx, guard_back;
static int (*guard_fn)(void *);
static void *guard_arg;
static int guard_result;

static void guard_run(void) {
    uintptr_t lo = atomic_load(&guard_lo);
    size_t len = atomic_load(&guard_hi) - lo;
    if (mprotect((void *)lo, len, PROT_READ)) {
        guard_result = -1;
        return;
    }
    guard_result = guard_fn(guard_arg);
    if (guard_result) mprotect((void *)lo, len, PROT_READ | PROT_WRITE); /* not moved: the old pages again */
}

int gs_guard_move(uintptr_t lo, size_t len, int (*move)(void *), void *arg) {
    if (!guard_stack) {
        void *s = mmap(NULL, GUARD_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (s == MAP_FAILED) return -1;
        guard_stack = s;
    }
    if (getcontext(&guard_ctx)) return -1;
    guard_ctx.uc_stack = (stack_t){.ss_sp = guard_stack, .ss_size = GUARD_STACK_SIZE};
    guard_ctx.uc_link = &guard_back;
    makecontext(&guard_ctx, guard_run, 0);
    guard_fn = move;
    guard_arg = arg;
    struct sigaction ours = {.sa_sigaction = guard_on_segv};
    if (sigaction(SIGSEGV, NULL, &guard_app)) return -1;
    ours.sa_mask = guard_app.sa_mask;
    ours.sa_flags = SA_SIGINFO | (guard_app.sa_flags & (SA_ONSTACK | SA_NODEFER | SA_RESTART));
    atomic_store(&guard_lo, lo);
    atomic_store(&guard_hi, lo + len);
    atomic_store(&guard_state, GUARD_MOVING);
    if (sigaction(SIGSEGV, &ours, &guard_app)) {
        atomic_store(&guard_state, GUARD_IDLE);
        return -1;
    }
    guard_result = -1;
    if (swapcontext(&guard_back, &guard_ctx)) guard_result = -1;
    int e = errno;
    guard_end();
    errno = e;
    return guard_result;
}

/* Whether some thread has a SIGSEGV pending that it does not block (a write fault not delivered yet). */
static int guard_segv_pending(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    int pending = 0;
    const unsigned long long bit = 1ull << (SIGSEGV - 1);
    for (struct dirent *e; !pending && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[64], line[128];
        snprintf(path, sizeof path, "/proc/self/task/%ld/status", strtol(e->d_name, NULL, 10));
        FILE *f = fopen(path, "re");
        if (!f) continue; /* the thread has exited */
        unsigned long long pnd = 0, blk = 0;
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "SigPnd:", 7)) pnd = strtoull(line + 7, NULL, 16);
            else if (!strncmp(line, "SigBlk:", 7)) blk = strtoull(line + 7, NULL, 16);
        }
        fclose(f);
        pending = (pnd & bit) && !(blk & bit);
    }
    closedir(d);
    return pending;
}

static void guard_end(void) {
    atomic_store(&guard_state, GUARD_MOVED); /* the waiting writers return and write the new pages */
    /* A pending SIGSEGV that never gets delivered (or a real fault on those pages, retried in a loop) must not
     * hold the caller forever: at most about 100 ms. */
    for (int i = 0; i < 1000 && guard_segv_pending(); i++) guard_pause(100000);
    struct sigaction now;
    if (sigaction(SIGSEGV, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == guard_on_segv)
        sigaction(SIGSEGV, &guard_app, NULL); /* else the application changed it meanwhile (or a fault reset it): kept */
    atomic_store(&guard_state, GUARD_IDLE);
}

void gs_guard_after_fork(void) {
    if (atomic_load(&guard_state) == GUARD_IDLE) return;
    mprotect((void *)atomic_load(&guard_lo), atomic_load(&guard_hi) - atomic_load(&guard_lo), PROT_READ | PROT_WRITE);
    guard_end();
}
