"""The child processes of a bench (routers, load generators, flooders): each one is added to
CHILDREN when it starts, and every one still running is killed when the bench ends, whatever
the way out (a normal return, an exception, or a signal turned into an exit)."""
import atexit
import signal
import subprocess
import sys

CHILDREN = []


def kill_children():
    """Kill every child still running and reap them all (5 s each at the most)."""
    for p in CHILDREN:
        if p.poll() is None:
            p.kill()
    for p in CHILDREN:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


def on_signal(signum, frame):
    """A signal ends the bench as an exit does (so kill_children runs), status 128+signum."""
    sys.exit(128 + signum)


def kill_children_at_exit(*signals):
    """Kill CHILDREN when the bench exits, and make each of `signals` an exit."""
    atexit.register(kill_children)
    for s in signals:
        signal.signal(s, on_signal)
