#!/usr/bin/env python3
"""Write the seeds of fuzz_routing into corpus/ (beside this file).

The messages qdrouterd 1.19 sent (tests/unit/core/routing/vectors/, recorded by
capture_vectors.py) as they are, and each one's body map prefixed with the byte that makes
fuzz_routing decode the rest as that opcode's body (1 + byte % 6: HELLO=0, RA=1, LSU=2,
LSR=3, MAU=4, MAR=5).  Files are named by content (SHA-1), as libFuzzer names its own.
"""
import glob
import hashlib
import os

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "..", "unit", "core", "routing", "vectors")
OPS = {"HELLO": 0, "RA": 1, "LSU": 2, "LSR": 3, "MAU": 4, "MAR": 5}


def write(data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(HERE, "corpus", name), "wb") as f:
        f.write(data)


for path in sorted(glob.glob(os.path.join(VECTORS, "qdr-*.bin"))):
    data = open(path, "rb").read()
    write(data)
    op = os.path.basename(path)[4:-4].split("-")[0]
    body = data.index(b"\x00\x53\x77") + 3  # the amqp-value section's value
    write(bytes([OPS[op]]) + data[body:])
