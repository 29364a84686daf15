/* Keeps writes by other threads from being lost while registered pages are copied and remapped
 * (shim/gs_move_guard.c). */
#ifndef GS_MOVE_GUARD_H
#define GS_MOVE_GUARD_H
#include <stddef.h>
#include <stdint.h>

/* Runs move(arg), which copies the pages [lo, lo+len) and maps the copy over them, with those pages
 * write-protected: a thread that writes them meanwhile waits for the move and then writes the new pages. move
 * runs on a stack of the guard's and must take no lock and call no malloc (a waiting writer may hold them);
 * when it fails (non-zero) the pages are made read-write again. move's result, or -1 with errno when the pages
 * could not be protected. Moves must not overlap in time (callers hold one lock). */
int gs_guard_move(uintptr_t lo, size_t len, int (*move)(void *), void *arg);
/* In a child forked while a move ran: the pages read-write again, the application's SIGSEGV disposition back. */
void gs_guard_after_fork(void);

#endif
