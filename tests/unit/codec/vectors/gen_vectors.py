#!/usr/bin/env python3
"""Regenerate the Proton-encoded test vectors that tests/unit/codec/codec_test.c reads.

Run with a Python that has python3-qpid-proton (Debian's system python3):
    python3 tests/unit/codec/vectors/gen_vectors.py tests/unit/codec/vectors

Every vector is a real message as Qpid Proton encodes it (Message.encode(), or proton.Data for
what Message cannot express: footers, symbolic descriptors, symbols in properties.to).  The C
test hard-codes what it expects to find in each one, so change both together.
"""
import os
import sys
import uuid

from proton import (Array, Data, Described, Message, UNDESCRIBED, byte, char, decimal32,
                    decimal64, decimal128, float32, int32, short, symbol, timestamp, ubyte, uint,
                    ulong, ushort)


def data(*objs):
    d = Data()
    for o in objs:
        d.put_object(o)
    return bytes(d.encode())


def many(n, size=100):
    """n user annotations whose values are `size`-byte strings."""
    return {symbol("k%04d" % i): ("v%04d" % i).ljust(size, "x") for i in range(n)}


def vectors():
    v = {}
    # Every leading section, router keys after the user keys (as qdrouterd writes them).
    ann = {symbol("a"): "x", symbol("b"): 42, ulong(7): "u",
           symbol("x-opt-qd.to"): "t", symbol("x-opt-qd.ingress"): "0/R1",
           symbol("x-opt-qd.trace"): ["0/R0", "0/R1"], symbol("x-opt-qd.phase"): int32(3)}
    v["full"] = Message(body="hello", address="q1", reply_to="r", subject="s", id=7,
                        durable=True, priority=5, ttl=1000, annotations=ann,
                        instructions={symbol("da"): 1}, properties={"k": 1}).encode()
    v["data"] = Message(body=b"abc", inferred=True, address="q2").encode()
    v["sequence"] = Message(body=[1, 2], inferred=True).encode()
    v["empty"] = Message().encode()
    v["many200"] = Message(body="b", address="q", annotations=many(200)).encode()
    v["one"] = Message(body="b", annotations=many(1)).encode()
    v["many10"] = Message(body="b", annotations=many(10)).encode()
    # User annotation values of every type, keys symbol and ulong.
    v["types"] = Message(body=None, annotations={
        symbol("null"): None, symbol("true"): True, symbol("false"): False,
        symbol("ubyte"): ubyte(1), symbol("byte"): byte(-1), symbol("ushort"): ushort(2),
        symbol("short"): short(-2), symbol("uint"): uint(3), symbol("uint0"): uint(0),
        symbol("int"): int32(-3), symbol("char"): char("c"), ulong(1): ulong(1 << 40),
        ulong(2): 1 << 40, symbol("float"): float32(1.5), symbol("double"): 2.5,
        symbol("ts"): timestamp(1234567890), symbol("d32"): decimal32(1),
        symbol("d64"): decimal64(2), symbol("d128"): decimal128(b"0123456789abcdef"),
        symbol("uuid"): uuid.UUID(int=5), symbol("bin"): b"\x00\x01",
        symbol("str"): "s" * 300, symbol("sym"): symbol("y"), symbol("list"): [1, "two", [3]],
        symbol("map"): {"k": {"n": 1}}, symbol("array"): Array(UNDESCRIBED, Data.INT, 1, 2, 3),
        symbol("sarray"): Array(UNDESCRIBED, Data.STRING, "a", "bc"),
        symbol("described"): Described(symbol("d"), "v"),
        symbol("darray"): Array(symbol("dd"), Data.LONG, 1, 2),
    }).encode()
    # Router keys interleaved with user keys: the user pairs are not one run.
    v["split"] = Message(body="b", annotations={
        symbol("a"): 1, symbol("x-opt-qd.to"): "t", symbol("b"): 2,
        symbol("x-opt-qd.class"): "c", symbol("c"): 3}).encode()
    # Only router keys.
    v["router_only"] = Message(body="b", annotations={
        symbol("x-opt-qd.ingress"): "0/R9", symbol("x-opt-qd.stream"): int32(1)}).encode()
    # Footer (Proton's Message has none: append it).
    v["footer"] = Message(body=b"abc", inferred=True).encode() + data(
        Described(ulong(0x78), {symbol("f"): 1}))
    # Every section with symbolic descriptors, two data sections, a footer.
    v["symbolic"] = data(
        Described(symbol("amqp:header:list"), [True]),
        Described(symbol("amqp:delivery-annotations:map"), {symbol("d"): 1}),
        Described(symbol("amqp:message-annotations:map"),
                  {symbol("m"): 1, symbol("x-opt-qd.to"): "t"}),
        Described(symbol("amqp:properties:list"), [None, None, symbol("q-sym"), None, "rt"]),
        Described(symbol("amqp:application-properties:map"), {"a": 1}),
        Described(symbol("amqp:data:binary"), b"12"),
        Described(symbol("amqp:data:binary"), b"34"),
        Described(symbol("amqp:footer:map"), {symbol("f"): 1}))
    v["symbolic_value"] = data(
        Described(symbol("amqp:message-annotations:map"), {symbol("m"): 1}),
        Described(symbol("amqp:amqp-value:*"), "v"))
    v["symbolic_sequence"] = data(
        Described(symbol("amqp:properties:list"), []),
        Described(symbol("amqp:amqp-sequence:list"), [1]))
    # ulong descriptors given as ulong (Proton still writes them as smallulong 0x53; the C test
    # builds the 0x80 form itself).
    v["ulong_desc"] = data(
        Described(ulong(0x70), []),
        Described(ulong(0x72), {symbol("m"): 1}),
        Described(ulong(0x77), "v"))
    return v


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, b in sorted(vectors().items()):
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(bytes(b))


if __name__ == "__main__":
    main()
