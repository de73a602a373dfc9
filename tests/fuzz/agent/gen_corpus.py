#!/usr/bin/python3
"""Write the seed inputs of fuzz_agent: management requests as qdstat and qdmanage encode
them, and malformed variants.  Run from this directory: /usr/bin/python3 gen_corpus.py"""

import os

from proton import Message, symbol

T = "org.amqp.management"
P = "org.apache.qpid.dispatch."


def req(props, body=None, reply_to="amqp:/_topo/0/F/temp.1", cid=1):
    m = Message(body=body if body is not None else {}, properties=props)
    if reply_to:
        m.reply_to = reply_to
    m.correlation_id = cid
    return m.encode()


seeds = {
    "query-router": req({"operation": "QUERY", "entityType": P + "router", "type": T,
                         "name": "self", "offset": 0, "count": 500}, {"attributeNames": []}),
    "query-link": req({"operation": "QUERY", "entityType": P + "router.link", "type": T,
                       "name": "self", "offset": 0, "count": 500},
                      {"attributeNames": ["linkType", "linkDir", "owningAddr", "linkName"]}),
    "query-all": req({"operation": "QUERY", "type": T, "name": "self"}),
    "query-log": req({"operation": "QUERY", "entityType": P + "log", "offset": 3, "count": 2}),
    "create-address": req({"operation": "CREATE", "type": P + "router.config.address",
                           "name": "a1"}, {"prefix": "fan", "distribution": "multicast"}),
    "create-listener": req({"operation": "CREATE", "type": P + "listener", "name": "l1"},
                           {"host": "127.0.0.1", "port": "5999"}),
    "delete-address": req({"operation": "DELETE", "type": P + "router.config.address",
                           "name": "a1"}),
    "read-listener": req({"operation": "READ", "type": P + "listener",
                          "identity": "listener/:0:1"}),
    "update-log": req({"operation": "UPDATE", "type": P + "log", "name": "log/DEFAULT"},
                      {"enable": "none"}),
    "update-conn": req({"operation": "UPDATE", "type": P + "connection", "identity": "1"},
                       {"adminStatus": "deleted"}),
    "get-types": req({"operation": "GET-TYPES", "type": T, "name": "self"}),
    "get-schema": req({"operation": "GET-SCHEMA", "type": T, "name": "self"}),
    "get-json-schema": req({"operation": "GET-JSON-SCHEMA", "type": T, "name": "self",
                            "indent": 2}),
    "get-log": req({"operation": "GET-LOG", "type": T, "name": "self", "limit": 10}),
    "get-attributes": req({"operation": "GET-ATTRIBUTES", "entityType": P + "connection"}),
    "no-operation": req({"type": T}),
    "op-not-string": req({"operation": 5}),
    "body-string": req({"operation": "QUERY", "entityType": "router"}, "garbage"),
    "body-nested": req({"operation": "CREATE", "type": "address"},
                       {"prefix": {"a": [1, 2, {"b": None}]}}),
    "no-reply-to": req({"operation": "QUERY"}, reply_to=None),
    "cid-symbol": req({"operation": "GET-MGMT-NODES"}, cid=symbol("x")),
}

os.makedirs("corpus", exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join("corpus", "seed-" + name), "wb") as f:
        f.write(data)
    # truncated and bit-flipped variants
    with open(os.path.join("corpus", "seed-" + name + "-cut"), "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x5A
    with open(os.path.join("corpus", "seed-" + name + "-flip"), "wb") as f:
        f.write(bytes(flipped))
