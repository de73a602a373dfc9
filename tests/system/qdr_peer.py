"""The reference qdrouterd 1.19 (../shared/peer, relative to the repository root) started as a
standalone router beside a test, to compare what it does with what Junction does.  A test
that calls need_qdrouterd() or start_standalone() skips, saying why, when the peer is absent."""
import json
import socket
import subprocess
import time

import pytest

from conftest import REPO_ROOT

PEER_QDROUTERD = REPO_ROOT.parent / "shared" / "peer" / "bin" / "qdrouterd"


def need_qdrouterd():
    """Skip the test, saying why, when the peer is absent."""
    if not PEER_QDROUTERD.exists():
        pytest.skip("the reference qdrouterd is not in ../shared/peer (%s)" % PEER_QDROUTERD)


def start_standalone(cfg_path, entities, port, timeout=15.0):
    """Start qdrouterd with the configuration `entities` (a list of [type, attributes],
    written to cfg_path as JSON) and wait until its listener on 127.0.0.1:`port` takes a
    connection.  Returns the process (the caller terminates it).  Skips the test when the
    peer is absent; AssertionError (the process killed) when it exits or does not listen
    within `timeout` seconds."""
    need_qdrouterd()
    cfg_path.write_text(json.dumps(entities))
    p = subprocess.Popen([str(PEER_QDROUTERD), "-c", str(cfg_path)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            if p.poll() is not None or time.monotonic() > deadline:
                p.kill()
                p.wait(10)
                raise AssertionError("qdrouterd did not start")
            time.sleep(0.05)
