/* Keeps writes by other threads from being lost while registered pages are copied and remapped
 * (shim/gs_move_guard.c). */
#ifndef GS_MOVE_GUARD_H
#define GS_MOVE_GUARD_H
#include <stddef.h>
#include <stdint.h>

/* Write-protects the pages [lo, lo+len) and, until gs_guard_end, makes a thread that writes them wait for the
 * move instead of faulting. 0, or -1 with errno (nothing changed). Moves must not overlap in time (callers hold
 * one lock); between begin and end the mover must take no lock and call no malloc (a waiting writer may hold
 * them). */
int gs_guard_begin(uintptr_t lo, size_t len);
/* The move is over (the pages are mapped anew, or restored read-write by the caller): wakes the writers and
 * restores the application's SIGSEGV disposition. */
void gs_guard_end(void);
/* In a child forked while a move ran: the pages read-write again, the application's SIGSEGV disposition back. */
void gs_guard_after_fork(void);

#endif
