#!/usr/bin/env python3
"""Have Qpid Proton decode what codec/ composes.

Usage: proton_check.py <compose_tool> <vectors dir>

For every Proton-encoded vector and several router-annotation settings, runs compose_tool
(scan + codec_compose_prefix) and decodes its output with proton.Data, section by section.
Checks: every section but message-annotations decodes to the same value as in the input;
the message-annotations map holds the input's user annotations in their order followed by
exactly the router annotations written, in the documented order; the section is absent when
that map would be empty; and with nothing to drop or add the message is unchanged.  Exits 1 on the first mismatch.
"""
import os
import subprocess
import sys
import tempfile

from proton import Data, Described, int32, symbol

SECTIONS = ["amqp:header:list", "amqp:delivery-annotations:map",
            "amqp:message-annotations:map", "amqp:properties:list",
            "amqp:application-properties:map", "amqp:data:binary", "amqp:amqp-sequence:list",
            "amqp:amqp-value:*", "amqp:footer:map"]
MA = 0x72

SETTINGS = [
    ["strip"],
    ["write"],
    ["write", "to=dest/1", "ingress=0/R2", "carry", "append=0/R2", "phase=3"],
    ["write", "stream=1", "append=only", "phase=-200"],
    ["write", "ingress=" + "i" * 300, "carry", "append=" + "a" * 256],
]


def code(descriptor):
    """A section descriptor, ulong or symbolic, as its ulong code."""
    if isinstance(descriptor, symbol):
        return 0x70 + SECTIONS.index(str(descriptor))
    return int(descriptor)


def sections(b):
    out = []
    while b:
        d = Data()
        n = d.decode(b)
        d.rewind()
        d.next()
        obj = d.get_object()
        assert isinstance(obj, Described), "not a section: %r" % (obj,)
        out.append((code(obj.descriptor), obj.value))
        b = b[n:]
    return out


def comparable(v):
    """Values Proton decodes, in a form that compares by value (arrays compare by identity)."""
    if isinstance(v, dict):
        return [(comparable(k), comparable(x)) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [comparable(x) for x in v]
    if isinstance(v, Described):
        return ("described", comparable(v.descriptor), comparable(v.value))
    if type(v).__name__ == "Array":
        return ("array", repr(v.descriptor), v.type, [comparable(x) for x in v.elements])
    return (type(v).__name__, v)


def is_router(k):
    return isinstance(k, symbol) and k.startswith("x-opt-qd.")


def expected_ma(ma, setting):
    users = [(k, v) for k, v in (ma or {}).items() if not is_router(k)]
    args = dict(a.split("=", 1) if "=" in a else (a, True) for a in setting[1:])
    router = []
    if setting[0] == "write":
        # qdrouterd 1.19's order: phase, stream, to, ingress, trace
        if int(args.get("phase", 0)):
            router.append((symbol("x-opt-qd.phase"), int32(int(args["phase"]))))
        if int(args.get("stream", 0)):
            router.append((symbol("x-opt-qd.stream"), int32(int(args["stream"]))))
        if "to" in args:
            router.append((symbol("x-opt-qd.to"), args["to"]))
        if "ingress" in args:
            router.append((symbol("x-opt-qd.ingress"), args["ingress"]))
        carried = (ma or {}).get(symbol("x-opt-qd.trace")) if "carry" in args else None
        if carried is not None or "append" in args:
            trace = list(carried or [])
            if "append" in args:
                trace.append(args["append"])
            router.append((symbol("x-opt-qd.trace"), trace))
    return users + router


def check(tool, path, setting, tmp):
    with open(path, "rb") as f:
        original = f.read()
    out = os.path.join(tmp, "out.bin")
    subprocess.run([tool, path, out] + setting, check=True)
    with open(out, "rb") as f:
        composed = f.read()
    ins = sections(original)
    outs = sections(composed)
    ma_in = dict(ins).get(MA)
    want = expected_ma(ma_in, setting)
    where = "%s %s" % (os.path.basename(path), " ".join(setting))
    want_sections = [(c, v) for c, v in ins if c != MA]
    router_in = [k for k in (ma_in or {}) if is_router(k)]
    if not router_in and len(want) == len((ma_in or {})):
        # nothing dropped, nothing added: the message goes out as it came, empty map included
        if composed != original:
            sys.exit("%s: expected the message unchanged" % where)
        return 1
    if want:
        pos = len([c for c, _ in want_sections if c < MA])
        want_sections.insert(pos, (MA, dict(want)))
    if [c for c, _ in outs] != [c for c, _ in want_sections]:
        sys.exit("%s: sections %s, expected %s" % (where, [hex(c) for c, _ in outs],
                                                   [hex(c) for c, _ in want_sections]))
    for (c, got), (_, exp) in zip(outs, want_sections):
        if c == MA:
            if [(comparable(k), comparable(v)) for k, v in got.items()] != \
                    [(comparable(k), comparable(v)) for k, v in want]:
                sys.exit("%s: message-annotations %r, expected %r" % (where, got, want))
        elif comparable(got) != comparable(exp):
            sys.exit("%s: section 0x%x differs: %r vs %r" % (where, c, got, exp))
    # the composed message's user annotation bytes are the input's (codec_test checks bytes;
    # here Proton agrees on the values, and on the whole message)
    return 1


def main():
    tool, vectors = sys.argv[1], sys.argv[2]
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(vectors)):
            if name.endswith(".bin"):
                for setting in SETTINGS:
                    n += check(tool, os.path.join(vectors, name), setting, tmp)
    print("proton_check: %d compositions decoded by Proton as expected" % n)


if __name__ == "__main__":
    main()
