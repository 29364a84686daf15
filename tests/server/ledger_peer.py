"""Another worker of a host-RAM ledger, in a forked process: it joins the ledger when started, then charges or
releases a fixed number of bytes on command (tests of the ledger and of cudaMemGetInfo in the C fast path)."""

from __future__ import annotations

import os
import signal
import time

from gpushim.backends.accounting import HostLedger, MemoryAccount


class LedgerPeer:
    def __init__(self, ledger: HostLedger, nbytes: int) -> None:
        self._cmd_r, self._cmd_w = os.pipe()
        self._ack_r, self._ack_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                acct = MemoryAccount(None, ledger)
                os.write(self._ack_w, b"k")
                while cmd := os.read(self._cmd_r, 1):
                    acct.charge(nbytes) if cmd == b"c" else acct.release(nbytes)
                    os.write(self._ack_w, b"k")
            finally:
                os._exit(0)
        assert os.read(self._ack_r, 1) == b"k"  # it holds a slot now

    def charge(self) -> None:
        self._do(b"c")

    def release(self) -> None:
        self._do(b"r")

    def _do(self, cmd: bytes) -> None:
        os.write(self._cmd_w, cmd)
        assert os.read(self._ack_r, 1) == b"k"

    def kill(self) -> None:
        """SIGKILL; returns once it has died, not reaped (a zombie until close())."""
        os.kill(self.pid, signal.SIGKILL)
        while state(self.pid) != "Z":
            time.sleep(0.01)

    def close(self) -> None:
        for fd in (self._cmd_r, self._cmd_w, self._ack_r, self._ack_w):
            os.close(fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def state(pid: int) -> str:
    """The process's state letter in /proc (Z: a zombie)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rfind(")") + 2]
