"""Registering and unregistering host memory loses no write by another thread (tests/programs/register_race.cu).
cudaHostRegister "page-locks the memory range ... and maps it for the device(s)" (CUDA Runtime API): the memory
stays the application's, so writes other threads make to it during the call must stay written. gpushim moves
the pages into the emulator's memory (shim/api_registered.c) with them write-protected meanwhile: a writer waits
in a SIGSEGV handler installed only for the move (shim/gs_move_guard.c); other faults are passed on as before."""

from __future__ import annotations

import signal

from .conftest import emulator_only


def _values(stdout: str) -> dict[str, str]:
    return dict(t.split("=", 1) for t in stdout.split() if "=" in t)


@emulator_only
def test_no_write_lost_while_pages_move(server):
    # two writers re-check their slots (on the registered pages and their neighbours) before every write; on the
    # code before the fix (copy, then remap) every one of 10 runs lost writes (thousands each)
    r = server.run("register_race", "race", "200")
    assert r.returncode == 0, r.stdout + r.stderr
    v = _values(r.stdout)
    assert int(v["writes"]) > 10000, r.stdout  # the writers ran throughout
    assert {k: v.get(k) for k in ("lost", "final_errors", "kernel_errors")} == {
        "lost": "0", "final_errors": "0", "kernel_errors": "0"}, r.stdout + r.stderr


@emulator_only
def test_application_segv_handler_gets_its_faults(server):
    r = server.run("register_race", "own_handler")
    assert r.returncode == 0, r.stdout + r.stderr
    v = _values(r.stdout)
    # every fault on the application's PROT_NONE page reached its handler, during moves and after them, and
    # its handler is installed again after the moves
    assert (v["faults"], v["reached"], v["of"]) == ("2001", "2000", "2000"), r.stdout
    assert (v["handler_kept"], v["after"]) == ("1", "1"), r.stdout


@emulator_only
def test_plain_segfault_still_kills(server):
    r = server.run("register_race", "crash")
    assert "faulting" in r.stdout and "survived" not in r.stdout, r.stdout + r.stderr
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)


@emulator_only
def test_callers_own_stack_registered(server):
    # the range's lowest page also holds the frames below the caller's (the shim's own, moving the pages): they
    # keep running while the pages are write-protected (the move runs on a stack of its own)
    r = server.run("register_race", "stack")
    assert r.returncode == 0, r.stdout + r.stderr
    v = _values(r.stdout)
    assert {k: v.get(k) for k in ("stack_page_shared", "stack_errors", "guard")} == {
        "stack_page_shared": "1", "stack_errors": "0", "guard": "5"}, r.stdout + r.stderr
