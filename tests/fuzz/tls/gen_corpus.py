#!/usr/bin/env python3
"""Write the seed inputs of fuzz_tls (tests/fuzz/fuzz_tls.c) into the directory given.

The first byte of an input is the target's mode and flags (fuzz_tls.c says which); the rest:
real ClientHellos of TLS 1.2 and 1.3 (made here by Python's ssl module over memory BIOs: a
ClientHello carries no secret), truncated and garbage records, and - for the modes in which
the target's own client does a real handshake first - AMQP byte streams from the conn
target's recorded sessions (tests/fuzz/conn/corpus/session-*) as the plaintext.

    python3 tests/fuzz/tls/gen_corpus.py tests/fuzz/tls/corpus
"""
import os
import random
import ssl
import sys

RAW, ECHO, TAMPER, CONN = 0, 1, 2, 3
TLS12, DETECT, HANDSHAKE = 0x04, 0x08, 0x10


def client_hello(version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = version
    ctx.maximum_version = version
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_side=False, server_hostname="127.0.0.1")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def main():
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    sessions = os.path.join(here, "..", "conn", "corpus")
    rnd = random.Random(14)
    ch13 = client_hello(ssl.TLSVersion.TLSv1_3)
    ch12 = client_hello(ssl.TLSVersion.TLSv1_2)
    seeds = {
        "raw-clienthello-tls13": bytes([RAW]) + ch13,
        "raw-clienthello-tls12": bytes([RAW | TLS12]) + ch12,
        "raw-clienthello-truncated": bytes([RAW]) + ch13[:45],
        "raw-clienthello-split-records": bytes([RAW]) + ch13[:5] + ch13[5:60] + ch13[60:],
        "raw-two-clienthellos": bytes([RAW]) + ch12 + ch13,
        "raw-header-only": bytes([RAW]) + b"\x16\x03\x01\x40\x00",
        "raw-huge-length": bytes([RAW]) + b"\x16\x03\x01\xff\xff" + ch13[5:],
        "raw-alert": bytes([RAW]) + b"\x15\x03\x03\x00\x02\x02\x28",
        "raw-ccs-then-data": bytes([RAW]) + b"\x14\x03\x03\x00\x01\x01\x17\x03\x03\x00\x10"
                             + bytes(16),
        "raw-sslv2-hello": bytes([RAW]) + b"\x80\x2e\x01\x03\x01\x00\x15\x00\x00\x00\x10"
                           + bytes(21) + bytes(range(16)),
        "raw-garbage": bytes([RAW]) + bytes(rnd.randrange(256) for _ in range(300)),
        "raw-amqp-header": bytes([RAW]) + b"AMQP\x00\x01\x00\x00",
        "echo-empty": bytes([ECHO]),
        "echo-text-tls13": bytes([ECHO, 0x11]) + b"hello over TLS\n" * 40,
        "echo-text-tls12": bytes([ECHO | TLS12, 0x3f]) + bytes(rnd.randrange(256)
                                                               for _ in range(5000)),
        "echo-big-records": bytes([ECHO, 0xff]) + bytes(20000),
        "tamper-none-tls13": bytes([TAMPER]),
        "tamper-none-tls12": bytes([TAMPER | TLS12]),
        "tamper-flip-tls13": bytes([TAMPER]) + b"\x00\x10\x01",
        "tamper-flip-header-tls12": bytes([TAMPER | TLS12]) + b"\x00\x03\x01",
        "tamper-cut": bytes([TAMPER]) + b"\x80",
        "conn-raw-clienthello-tls13": bytes([CONN]) + ch13,
        "conn-raw-clienthello-tls12": bytes([CONN | TLS12]) + ch12,
        "conn-raw-truncated": bytes([CONN]) + ch13[:45],
        "conn-raw-amqp-to-requiressl": bytes([CONN]) + b"AMQP\x00\x01\x00\x00",
        "conn-raw-garbage": bytes([CONN]) + bytes(rnd.randrange(256) for _ in range(200)),
        "conn-detect-clienthello": bytes([CONN | DETECT]) + ch13,
    }
    for name in sorted(os.listdir(sessions)):
        if not (name.startswith("session-") or name == "sasl-anonymous-then-open"):
            continue
        with open(os.path.join(sessions, name), "rb") as f:
            amqp = f.read()
        seeds["conn-tls13-" + name] = bytes([CONN | HANDSHAKE]) + amqp
        seeds["conn-detect-plain-" + name] = bytes([CONN | DETECT]) + amqp
        if name in ("session-no-sasl", "session-send-receive-outcomes"):
            seeds["conn-tls12-" + name] = bytes([CONN | HANDSHAKE | TLS12]) + amqp
            seeds["echo-" + name] = bytes([ECHO, 0x23]) + amqp
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), out))


if __name__ == "__main__":
    main()
