"""`rspstar serve` stops on SIGTERM or SIGINT whichever of its threads the kernel gives the signal
to. A signal sent to the process goes to any thread not blocking it (RocksDB's, the HTTP
server's); Python runs its handler on the main thread only once that thread runs Python again,
and a main thread blocked in an unbounded wait never does: the engine went on serving."""
import ctypes
import platform
import signal
from pathlib import Path

import pytest

from served_engine import Served

# tgkill(2): a signal to one thread of a process, from outside it (its number on the machines
# the tests run on).
TGKILL = {"x86_64": 234, "aarch64": 131}[platform.machine()]


def to_thread(pid: int, tid: int, signum: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(TGKILL, pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_taken_by_another_thread_than_the_main_one_stops_the_engine(tmp_path, signum):
    served = Served(tmp_path, '[http]\ntoken = ""\n').start()
    try:
        pid = served.process.pid
        others = sorted(int(task.name) for task in Path("/proc/%d/task" % pid).iterdir() if int(task.name) != pid)
        assert others, "the engine runs threads besides its main one"
        to_thread(pid, others[-1], signum)
        assert served.process.wait(30) == 0, served.tail()
        assert "stopped cleanly" in served.tail()
    finally:
        served.stop()
