#!/usr/bin/env python3
"""Regenerate the seed corpus of fuzz_codec (tests/fuzz/codec/corpus/seed-*).

Run with a Python that has python3-qpid-proton (Debian's system python3):
    python3 tests/fuzz/codec/gen_corpus.py tests/fuzz/codec/corpus

Seeds are real messages as Qpid Proton encodes them (the unit test vectors plus variations:
annotation counts, router keys before/between/after user keys, every body kind, footers),
and malformed ones derived from them (truncated, a size or count byte changed, a code byte
changed).  Output is deterministic.  Files the fuzzer found (named by their SHA-1, no
"seed-" prefix) are left alone.
"""
import os
import random
import sys

from proton import Data, Described, Message, byte, int32, short, symbol, ubyte, uint, ulong

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "unit", "codec", "vectors"))
import gen_vectors  # noqa: E402


def data(*objs):
    d = Data()
    for o in objs:
        d.put_object(o)
    return bytes(d.encode())


def annotations(rng, n, vsize, router):
    """n user annotations, with router keys placed 'before', 'between' or 'after' them."""
    users = [(symbol("user-%d" % i), "v" * rng.randint(0, vsize)) for i in range(n)]
    keys = [(symbol("x-opt-qd.to"), "addr/%d" % n),
            (symbol("x-opt-qd.ingress"), "0/R%d" % n),
            (symbol("x-opt-qd.trace"), ["0/R%d" % i for i in range(rng.randint(0, 4))]),
            (symbol("x-opt-qd.phase"), rng.choice([int32(1), ubyte(2), short(-3), uint(4), 5])),
            (symbol("x-opt-qd.stream"), int32(1)),
            (symbol("x-opt-qd.class"), "c")]
    keys = rng.sample(keys, rng.randint(1, len(keys)))
    if router == "before":
        pairs = keys + users
    elif router == "after":
        pairs = users + keys
    else:
        pairs = users[: n // 2] + keys + users[n // 2:]
    return dict(pairs)


def bodies():
    return [("value", dict(body="hello")),
            ("data", dict(body=b"\x00\x01\x02", inferred=True)),
            ("sequence", dict(body=[1, "two", 3.0], inferred=True)),
            ("none", dict(body=None)),
            ("map", dict(body={"k": [1, 2, {"n": None}]}))]


def seeds():
    rng = random.Random(760)
    out = {}
    for name, b in gen_vectors.vectors().items():
        out["vector-" + name] = bytes(b)
    i = 0
    for n in (0, 1, 2, 5, 10, 50):
        for router in ("none", "before", "between", "after"):
            body_name, body = bodies()[i % len(bodies())]
            ann = ({symbol("user-%d" % k): "v" * 20 for k in range(n)} if router == "none"
                   else annotations(rng, n, 100, router))
            m = Message(annotations=ann, address="q%d" % i if i % 3 else None,
                        reply_to="r" if i % 2 else None, durable=bool(i % 2), priority=i % 10,
                        instructions={symbol("da"): i} if i % 4 == 0 else None,
                        properties={"p": i} if i % 5 else None, **body)
            out["msg-%02d-%d-%s-%s" % (i, n, router, body_name)] = bytes(m.encode())
            i += 1
    # user values of awkward types next to router keys; ulong keys
    out["msg-ulong-keys"] = bytes(Message(body="b", annotations={
        ulong(1): "one", symbol("x-opt-qd.to"): "t", ulong(1 << 40): [byte(1), None],
        symbol("x-opt-qd.trace"): []}).encode())
    # footers after each body kind
    for body_name, body in bodies():
        if body.get("body") is None:
            continue
        out["msg-footer-" + body_name] = bytes(Message(annotations={symbol("a"): 1},
                                                       **body).encode()) + data(
            Described(ulong(0x78), {symbol("f"): "x"}))
    # a long trace and a long to: list32 / str32 on the way in
    out["msg-long-trace"] = bytes(Message(body="b", annotations={
        symbol("x-opt-qd.trace"): ["0/Router-%03d" % k for k in range(40)],
        symbol("x-opt-qd.to"): "t" * 300}).encode())

    # malformed variants of a few of the above
    bases = [k for k in sorted(out) if k.startswith(("vector-full", "vector-symbolic",
                                                     "msg-05", "msg-10", "vector-split"))]
    for k in bases:
        b = out[k]
        for j in range(3):
            cut = rng.randrange(1, len(b))
            out["bad-trunc-%s-%d" % (k, cut)] = b[:cut]
        for j in range(3):
            pos = rng.randrange(len(b))
            mut = bytearray(b)
            mut[pos] = rng.choice([0x00, 0x40, 0x57, 0xa1, 0xc1, 0xd1, 0xe0, 0xff, mut[pos] ^ 1])
            out["bad-byte-%s-%d" % (k, pos)] = bytes(mut)
    return out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out_dir, exist_ok=True)
    for name, b in sorted(seeds().items()):
        with open(os.path.join(out_dir, "seed-" + name), "wb") as f:
            f.write(b)


if __name__ == "__main__":
    main()
