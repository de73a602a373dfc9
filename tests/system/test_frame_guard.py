"""The frame guard: malformed frames close the connection at once, and Proton's public fuzz
inputs for a connection (including one that aborts Debian's Proton 0.37, PROTON-2853) leave
the router running and serving.  The fuzz inputs are read from the shared data folder beside
the project; the replay test is skipped where that folder is absent."""

import glob
import os
import socket
import struct
import time

import pytest

from clients import check_router_works, raw_exchange

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
OPEN = b"\x00\x53\x10\xc0\x04\x01\xa1\x01x"

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZ_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "proton-fuzz"))


def frame(body, type_=0):
    return struct.pack(">IBBH", 8 + len(body), 2, type_, 0) + body


@pytest.mark.parametrize("data", [
    AMQP_HEADER + frame(b"\x00\x53\x10\xc0\xff\x05"),            # list size past the frame
    AMQP_HEADER + frame(OPEN) + frame(b"\x00\x53\x77\x40"),      # not a performative
    AMQP_HEADER + frame(b"\x00\x53\x10\xc0\x03\x02\xa1\x30"),    # bad type code in the open
    AMQP_HEADER + frame(b"\x00\x53\x10\x45"),                    # open without container-id
    AMQP_HEADER + frame(OPEN, type_=1),                          # SASL frame in the AMQP layer
    AMQP_HEADER + frame(OPEN + b"\x40"),                         # payload after an open
], ids=["bad-list-size", "not-a-performative", "bad-type-code", "open-no-container",
        "sasl-type", "payload-after-open"])
def test_malformed_frame_closes_the_connection_at_once(make_router, data):
    # a long idle timeout: the close must come from the guard, not from the timer
    r = make_router(listener={"idleTimeoutSeconds": 60})
    t0 = time.monotonic()
    got, closed = raw_exchange(r.host, r.port, data, timeout=5)
    assert closed, "connection still open after %r" % data[:24]
    assert time.monotonic() - t0 < 3
    check_router_works(r.url)
    assert "framing-error" in r.stderr_text()


def test_transfer_starting_a_delivery_without_id_is_refused(make_router):
    """PROTON-2853: Proton 0.37 aborts on a transfer that starts a multi-frame delivery without
    a delivery-id; the guard closes the connection before Proton sees it."""
    r = make_router()
    begin = b"\x00\x53\x11\xc0\x07\x04\x40\x43\x52\x64\x52\x64"
    attach = b"\x00\x53\x12\xc0\x06\x03\xa1\x01l\x43\x42"  # the client is the sender
    transfer = b"\x00\x53\x14\xc0\x07\x06\x43\x40\x40\x40\x40\x41"           # more, no id
    data = AMQP_HEADER + frame(OPEN) + frame(begin) + frame(attach) + frame(transfer)
    got, closed = raw_exchange(r.host, r.port, data, timeout=5)
    assert closed
    check_router_works(r.url)
    assert "first transfer of a delivery has no delivery-id" in r.stderr_text()


@pytest.mark.skipif(not os.path.isdir(FUZZ_DIR), reason="no proton-fuzz data beside the project")
def test_proton_fuzz_inputs_leave_the_router_serving(router):
    files = sorted(glob.glob(os.path.join(FUZZ_DIR, "crashes", "*")) +
                   glob.glob(os.path.join(FUZZ_DIR, "corpus", "*")))
    assert files
    for i, path in enumerate(files):
        with open(path, "rb") as f:
            data = f.read()
        s = socket.create_connection((router.host, router.port), timeout=5)
        try:
            s.sendall(data)
            s.settimeout(0.05)
            try:
                s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            s.close()
        if i % 100 == 99:
            assert router.is_running(), "router died after %s" % path
    assert router.is_running()
    check_router_works(router.url)
