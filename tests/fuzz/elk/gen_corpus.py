#!/usr/bin/python3
"""Seeds for fuzz_elk (tests/fuzz/fuzz_elk.c): the address lookup messages of link routes
through an edge.  The qdr-* seeds are what a qdrouterd 1.19 edge and interior exchanged (a
frame trace of a qdrouterd edge attaching a sender to a link-routed address and to an
ordinary one; router annotations included); the jn-* seeds are made with Proton-Python in
the layout router/edge_lookup.h gives, and a few are cut or changed.  Writes the files into
corpus/ beside this script.  Run with /usr/bin/python3 (Proton-Python)."""
import os

from proton import Message

HERE = os.path.dirname(os.path.abspath(__file__))

QDR = {
    'qdr-request-link-route':
        b'\x00Sp\xd0\x00\x00\x00\x05\x00\x00\x00\x01B\x00Sr\xc10\x04\xa3\x10x-opt-qd.ingress\xa1\x030/E\xa3\x0ex-opt-qd.trace\xc0\x06\x01\xa1\x030/E\x00Ss\xd0\x00\x00\x00O\x00\x00\x00\x06@@@@\xa1$amqp:/_topo/0/I/temp.AD2Bq8EG0xKjFkc\xa1\x1fclient-000000006b0fbf4e3835a47d\x00St\xd1\x00\x00\x00\x19\x00\x00\x00\x04\xa1\x07versionR\x01\xa1\x06opcodeR\x01\x00Sw\xd0\x00\x00\x00\x0c\x00\x00\x00\x02\xa1\x05elr.xA',
    'qdr-reply-link-route-no-destination':
        b'\x00Sp\xd0\x00\x00\x00\x05\x00\x00\x00\x01B\x00Sr\xc10\x04\xa3\x10x-opt-qd.ingress\xa1\x030/I\xa3\x0ex-opt-qd.trace\xc0\x06\x01\xa1\x030/I\x00Ss\xd0\x00\x00\x00O\x00\x00\x00\x06@@\xa1$amqp:/_topo/0/I/temp.AD2Bq8EG0xKjFkc@@\xa1\x1fclient-000000006b0fbf4e3835a47d\x00St\xd1\x00\x00\x00"\x00\x00\x00\x06\xa1\x07versionR\x01\xa1\x06opcodeR\x01\xa1\x06statusC\x00Sw\xd0\x00\x00\x00\x06\x00\x00\x00\x02AB',
    'qdr-request-not-link-route':
        b'\x00Sp\xd0\x00\x00\x00\x05\x00\x00\x00\x01B\x00Sr\xc10\x04\xa3\x10x-opt-qd.ingress\xa1\x030/E\xa3\x0ex-opt-qd.trace\xc0\x06\x01\xa1\x030/E\x00Ss\xd0\x00\x00\x00O\x00\x00\x00\x06@@@@\xa1$amqp:/_topo/0/I/temp.AD2Bq8EG0xKjFkc\xa1\x1fclient-000000006b0fbf4e3835a47e\x00St\xd1\x00\x00\x00\x19\x00\x00\x00\x04\xa1\x07versionR\x01\xa1\x06opcodeR\x01\x00Sw\xd0\x00\x00\x00\x0e\x00\x00\x00\x02\xa1\x07other.xA',
    'qdr-reply-not-found':
        b'\x00Sp\xd0\x00\x00\x00\x05\x00\x00\x00\x01B\x00Sr\xc10\x04\xa3\x10x-opt-qd.ingress\xa1\x030/I\xa3\x0ex-opt-qd.trace\xc0\x06\x01\xa1\x030/I\x00Ss\xd0\x00\x00\x00O\x00\x00\x00\x06@@\xa1$amqp:/_topo/0/I/temp.AD2Bq8EG0xKjFkc@@\xa1\x1fclient-000000006b0fbf4e3835a47e\x00St\xd1\x00\x00\x00#\x00\x00\x00\x06\xa1\x07versionR\x01\xa1\x06opcodeR\x01\xa1\x06statusR\x03\x00Sw\xd0\x00\x00\x00\x06\x00\x00\x00\x02BB',
}


def request(address, receiver, version=1, opcode=1, reply_to="amqp:/_topo/0/I/temp.r",
            cid="elk-0000000000000001"):
    props = {}
    if version is not None:
        props["version"] = version
    if opcode is not None:
        props["opcode"] = opcode
    return Message(reply_to=reply_to, correlation_id=cid, properties=props,
                   body=[address, receiver]).encode()


def reply(status, body, cid="elk-0000000000000001"):
    return Message(address="amqp:/_topo/0/I/temp.r", correlation_id=cid,
                   properties={"version": 1, "opcode": 1, "status": status}, body=body).encode()


def main():
    seeds = dict(QDR)
    seeds["jn-request-in"] = request("queue.a", True)
    seeds["jn-request-out"] = request("queue.b/c", False)
    seeds["jn-request-bad-version"] = request("q", True, version=2)
    seeds["jn-request-no-opcode"] = request("q", True, opcode=None)
    seeds["jn-request-no-reply-to"] = request("q", True, reply_to=None)
    seeds["jn-reply-routed"] = reply(0, [True, True])
    seeds["jn-reply-not-found"] = reply(3, [False, False])
    seeds["jn-reply-short-body"] = reply(0, [True])
    seeds["qdr-request-cut"] = QDR["qdr-request-link-route"][:150]
    out = os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
