#!/usr/bin/python3
"""Write the seeds of fuzz_edge into corpus/ (beside this file).

Address-tracking messages of the shape a qdrouterd 1.19 interior sends an edge (an
amqp-value list [hash key, bool]; string and symbol keys, mobile, phased and fallback keys,
with and without a header and properties), the malformed bodies of test_edge.py's
bad-tracking test, a heartbeat, and each message cut short.  Files are named by content
(SHA-1), as libFuzzer names its own.  Run with /usr/bin/python3 (Proton-Python).
"""
import hashlib
import os

from proton import Message, symbol

HERE = os.path.dirname(os.path.abspath(__file__))


def write(data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(HERE, "corpus", name), "wb") as f:
        f.write(data)


bodies = [["M0cl.x", True], ["M0cl.x", False], ["M1wp.q", True], ["MFfb.q", False],
          [symbol("M0sym"), True], ["M0" + "long." * 200, True], ["M0\u00e9t\u00e9", True],
          "not a list", ["M0x"], [1, True], ["M0x", "yes"], ["", True], ["M0x", True, 1],
          [], {"M0x": True}]
for b in bodies:
    m = Message(body=b)
    data = m.encode()
    write(data)
    write(data[:len(data) // 2])
    m = Message(body=b, durable=True, address="_$qd.edge_addr_tracking")
    write(m.encode())
write(Message(body=7).encode())  # a heartbeat's shape
write(bytes([0x00, 0x53, 0x77, 0x71, 0, 0, 0, 1]))  # the one junctiond sends
