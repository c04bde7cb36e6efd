"""What the project's Python scripts start (launchers, simulations, builds), stopped with them.

scripts/scale and scripts/soak start each launcher or simulation as the leader of a process
group of its own, so that a time limit stops it together with what it started. Such a group
gets no Ctrl-C from the terminal and outlives a script that dies, so:

- `stop_on_signals()`: SIGINT, SIGTERM and SIGHUP raise `Stopped` in the script's main
  thread; the script then calls `stop_all()` and exits with `Stopped.code` (130, 143, 129).
- `start()` starts a child in a session (and process group) of its own that is sent SIGTERM
  when the script ends, even by SIGKILL, which no handler sees (Linux's parent-death signal,
  as `aiac sweep` does for its runs): a launcher then stops its ranks, `smpirun` its
  simulation (its trap passes the signal on to `smpimain`). The signal comes when the thread
  that started the child ends: start children from the main thread.
- `stop()` signals a child's group, waits for every process of it (and for the processes
  below the child that lead groups of their own), and sends SIGKILL to what is left after
  `grace` seconds.
"""

import ctypes
import os
import signal
import subprocess
import time

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
_RUNNING = {}  # pid -> Popen: the children start() started that stop_all() would stop
NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


class Stopped(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived (a BaseException: no `except Exception` takes it)."""

    def __init__(self, sig):
        super().__init__(NAMES.get(sig, f"signal {sig}"))
        self.sig = sig
        self.code = 128 + sig


def _raise_stopped(sig, _frame):
    # Once: the script is stopping, and a second Ctrl-C must not cut its cleanup short.
    for s in NAMES:
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(sig)


def stop_on_signals():
    for s in NAMES:
        signal.signal(s, _raise_stopped)


def _dies_with(parent):
    def preexec():
        # Between fork and exec, in the child (the script starts children from its one thread).
        if _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        # The script may have died before the prctl, and no signal would come: do not start.
        if os.getppid() != parent:
            raise OSError("the script that started this process has ended")
        # Default dispositions: the script may ignore these while it stops (above).
        for s in NAMES:
            signal.signal(s, signal.SIG_DFL)

    return preexec


def start(cmd, **kw):
    """subprocess.Popen(cmd, **kw), the leader of a session of its own that dies with this
    process."""
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_dies_with(os.getpid()), **kw)
    _RUNNING[proc.pid] = proc
    return proc


def done(proc):
    """proc has ended and its group is empty (after a wait or a stop)."""
    _RUNNING.pop(proc.pid, None)


def _stat(pid):
    """(state, ppid, pgid) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    f = s[s.rindex(")") + 2:].split()
    return f[0], int(f[1]), int(f[2])


def _all():
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st is not None and st[0] not in "ZX":
                out[int(d)] = st
    return out


def descendants(root):
    """The live processes below root."""
    procs = _all()
    kids = {}
    for pid, (_, ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _left(pgid, below):
    """The live processes of group pgid, and those of `below` still alive."""
    return {pid for pid, (_, _, g) in _all().items() if g == pgid or pid in below}


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def stop(proc, sig=signal.SIGTERM, grace=5.0):
    """Stop proc (a child start() started, the leader of its group): sig to its group, SIGKILL
    to what is left of it `grace` seconds later; returns once every process of the group, and
    every process that was below proc, has ended."""
    below = descendants(proc.pid)
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        pass
    end = time.monotonic() + grace
    while True:
        proc.poll()
        left = _left(proc.pid, below)
        if not left or time.monotonic() > end:
            break
        below |= descendants(proc.pid)
        time.sleep(0.02)
    if left:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for pid in left:
            _kill(pid, signal.SIGKILL)
        end = time.monotonic() + 2
        while _left(proc.pid, left) and time.monotonic() < end:
            time.sleep(0.02)
    proc.wait()
    done(proc)


def stop_all():
    for proc in list(_RUNNING.values()):
        stop(proc)
