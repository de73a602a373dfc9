"""The frame guard: malformed frames close the connection at once, and Proton's public fuzz
inputs for a connection (including one that aborts Debian's Proton 0.37, PROTON-2853) leave
the router running and serving.  The fuzz inputs are read from the shared data folder beside
the project; the replay test is skipped where that folder is absent."""

import glob
import os
import select
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


# Issue 11: an open whose outgoing-locales is an array32 claiming 2^32-1 nulls (zero-width
# elements) in a 31-byte frame.  The guard walked every claimed element, 18 s on one worker.
HOSTILE_OPEN = (b"\x00\x53\x10\xc0\x12\x06\xa1\x01x\x40\x40\x40\x40"
                b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40")


def read_until(s, want, timeout):
    """Read from socket s until `want` bytes arrived, the peer closed, or `timeout` passed;
    returns (bytes, closed)."""
    got = bytearray()
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return bytes(got), True
        if not chunk:
            return bytes(got), True
        got.extend(chunk)
    return bytes(got), False


@pytest.mark.parametrize("body", [
    HOSTILE_OPEN,
    # the same claim behind a described element constructor, in an attach's source
    None,
], ids=["open-locales", "attach-source-described"])
def test_counts_the_bytes_do_not_pay_for_do_not_hold_the_worker(make_router, body):
    """With one worker thread, a connection that sends a performative claiming 2^32-1
    zero-width values is closed with a framing error at once, and a second connection on the
    same worker gets its protocol header answered meanwhile."""
    r = make_router(router={"workerThreads": 1}, listener={"idleTimeoutSeconds": 60})
    if body is None:
        data = (frame(OPEN)
                + frame(b"\x00\x53\x11\xc0\x07\x04\x40\x43\x52\x64\x52\x64")
                + frame(b"\x00\x53\x12\xc0\x1b\x06\xa1\x01l\x43\x41\x40\x40\x00\x53\x28\xc0"
                        b"\x0e\x01\xf0\x00\x00\x00\x08\xff\xff\xff\xff\x00\x53\x01\x45"))
    else:
        assert len(frame(body)) == 31
        data = frame(body)
    hostile = socket.create_connection((r.host, r.port), timeout=5)
    probe = None
    try:
        # the protocol header first, so that the router's AMQP layer is up and its close
        # frame can carry the error
        hostile.sendall(AMQP_HEADER)
        got, _ = read_until(hostile, 8, timeout=5)
        assert got == AMQP_HEADER
        hostile.sendall(data)
        time.sleep(0.3)  # the worker has the hostile bytes in hand
        probe = socket.create_connection((r.host, r.port), timeout=5)
        t0 = time.monotonic()
        probe.sendall(AMQP_HEADER)
        got, _ = read_until(probe, 8, timeout=2)
        assert got[:8] == AMQP_HEADER, \
            "second connection's header not answered within 2 s (%.1f s)" % (
                time.monotonic() - t0)
        got, closed = read_until(hostile, 1 << 20, timeout=5)
        assert closed, "the hostile connection is still open"
        assert b"amqp:connection:framing-error" in got
    finally:
        hostile.close()
        if probe:
            probe.close()
    check_router_works(r.url)
    assert "a performative claims more values than it has bytes" in r.stderr_text()
