#!/usr/bin/python3
"""AMQP management requests built exactly as qdstat and qdmanage build them, and qdstat-like
tables printed from the replies.

qdstat and qdmanage (qpid_dispatch/management/client.py) open one BlockingConnection, a
SyncRequestResponse on the management address (`$management`, or `_topo/0/<router>/$management`
with -r): a sender to that address and a dynamic receiver whose address is each request's
reply-to.  A request is a Message whose application properties carry `operation`, `type`,
`name`, `identity`, `entityType`, `offset`, `count` (None values left out), whose body is a map
(QUERY: {"attributeNames": [...]}) and whose correlation id Proton's SyncRequestResponse sets.
Node-level requests (QUERY, GET-*) add `name: self` and `type: org.amqp.management`.  qdstat
pages every QUERY by count=500 (its MAX_ALLOWED_COUNT_PER_REQUEST).

Used by tests/system/test_qdstat.py and test_qdmanage.py, and by hand:

    /usr/bin/python3 tests/system/mgmt_tool.py -b 127.0.0.1:5672 -g      # also -c -l -a -m -n
    /usr/bin/python3 tests/system/mgmt_tool.py -b HOST:PORT --autolinks  # --linkroutes --log
    /usr/bin/python3 tests/system/mgmt_tool.py -b HOST:PORT manage --type listener query
    /usr/bin/python3 tests/system/mgmt_tool.py -b HOST:PORT manage --type address create \
        prefix=foo distribution=multicast                                # read/update/delete too
"""

import argparse
import json
import sys
import time


import lazy_ssl  # noqa: F401,E402 - SSL domains made when used (lazy_ssl.py)
from proton import Message, Url
from proton.utils import BlockingConnection, SyncRequestResponse

PREFIX = "org.apache.qpid.dispatch"
MGMT_TYPE = "org.amqp.management"
PAGE = 500  # qdstat's MAX_ALLOWED_COUNT_PER_REQUEST

OK, CREATED, NO_CONTENT = 200, 201, 204


class ManagementError(Exception):
    def __init__(self, status, description):
        super().__init__("%s: %s" % (status, description))
        self.status = status
        self.description = description


def full_type(t):
    """qdmanage's expansion of short type names."""
    if t is None or t.startswith(PREFIX) or t == MGMT_TYPE:
        return t
    if t in ("link", "node"):
        return "%s.router.%s" % (PREFIX, t)
    if t in ("address", "linkRoute", "autoLink"):
        return "%s.router.config.%s" % (PREFIX, t)
    return "%s.%s" % (PREFIX, t)


class Node:
    """qpid_dispatch.management.client.Node, as qdstat and qdmanage use it."""

    def __init__(self, url, router=None, timeout=10):
        url = Url(url)
        if url.path is None:
            url.path = "_topo/0/%s/$management" % router if router else "$management"
        self.url = url
        self.connection = BlockingConnection(url, timeout=timeout)
        self.client = SyncRequestResponse(self.connection, url.path)
        self.reply_to = self.client.reply_to
        self.last_response = None

    def close(self):
        self.connection.close()

    # -- the two request builders of client.py --
    def request(self, body=None, **properties):
        props = {k: v for k, v in properties.items() if v is not None}
        msg = Message(body=body or {}, properties=props)
        msg.reply_to = self.reply_to
        return msg

    def node_request(self, body=None, **properties):
        return self.request(body, name="self", type=MGMT_TYPE, **properties)

    def call(self, request, expect=OK):
        response = self.client.call(request)
        self.last_response = response
        status = response.properties.get("statusCode")
        if status != expect:
            raise ManagementError(status, response.properties.get("statusDescription"))
        return response

    # -- operations --
    def query(self, type=None, attribute_names=None, offset=None, count=None):
        req = self.node_request({"attributeNames": attribute_names or []}, operation="QUERY",
                                entityType=full_type(type), offset=offset, count=count)
        body = self.call(req).body
        return body["attributeNames"], body["results"]

    def query_paged(self, type, attribute_names=None):
        """qdstat's loop: pages of PAGE rows until a short page."""
        offset, names, rows = 0, None, []
        while True:
            names, page = self.query(type, attribute_names, offset=offset, count=PAGE)
            rows.extend(page)
            if len(page) < PAGE:
                return names, rows
            offset += PAGE

    def query_dicts(self, type, attribute_names=None):
        names, rows = self.query_paged(type, attribute_names)
        return [dict(zip(names, r)) for r in rows]

    def create(self, attributes, type, name=None):
        req = self.request(attributes, operation="CREATE", type=full_type(type), name=name)
        return self.call(req, expect=CREATED).body

    def read(self, type=None, name=None, identity=None):
        req = self.request(operation="READ", type=full_type(type), name=name, identity=identity)
        return self.call(req).body

    def update(self, attributes, type=None, name=None, identity=None):
        req = self.request(attributes, operation="UPDATE", type=full_type(type), name=name,
                           identity=identity)
        return self.call(req).body

    def delete(self, type=None, name=None, identity=None):
        req = self.request(operation="DELETE", type=full_type(type), name=name,
                           identity=identity)
        return self.call(req, expect=NO_CONTENT).body

    def get(self, operation, **props):
        return self.call(self.node_request(operation=operation, **props)).body


# ---------------------------------------------------------------------------------------
# qdstat-like views
# ---------------------------------------------------------------------------------------

def table(title, heads, rows):
    out = [title] if title else []
    widths = [len(h) for h in heads]
    srows = [["" if v is None else str(v) for v in r] for r in rows]
    for r in srows:
        widths = [max(w, len(v)) for w, v in zip(widths, r)]
    out.append("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip())
    out.append("  ".join("=" * w for w in widths))
    for r in srows:
        out.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(out)


def header(node):
    rid = node.query_dicts("router", ["id"])[0]["id"]
    return "%s\nRouter %s\n" % (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), rid)


def view_general(node):
    r = node.query_dicts("router")[0]
    rows = [("Version", r["version"]), ("Mode", r["mode"]), ("Router Id", r["id"]),
            ("Worker Threads", r["workerThreads"]), ("Uptime", r["uptimeSeconds"]),
            ("VmSize", r["memoryUsage"]), ("Area", r["area"]),
            ("Link Routes", r["linkRouteCount"]), ("Auto Links", r["autoLinkCount"]),
            ("Links", r["linkCount"]), ("Nodes", r["nodeCount"]),
            ("Addresses", r["addrCount"]), ("Connections", r["connectionCount"]),
            ("Presettled Count", r["presettledDeliveries"]),
            ("Dropped Presettled Count", r["droppedPresettledDeliveries"]),
            ("Accepted Count", r["acceptedDeliveries"]),
            ("Rejected Count", r["rejectedDeliveries"]),
            ("Released Count", r["releasedDeliveries"]),
            ("Modified Count", r["modifiedDeliveries"]),
            ("Deliveries Delayed > 1sec", r["deliveriesDelayed1Sec"]),
            ("Deliveries Delayed > 10sec", r["deliveriesDelayed10Sec"]),
            ("Deliveries Stuck > 10sec", r["deliveriesStuck"]),
            ("Deliveries to Fallback", r["deliveriesRedirectedToFallback"]),
            ("Links Blocked", r["linksBlocked"]),
            ("Ingress Count", r["deliveriesIngress"]), ("Egress Count", r["deliveriesEgress"]),
            ("Transit Count", r["deliveriesTransit"]),
            ("Deliveries from Route Container", r["deliveriesIngressRouteContainer"]),
            ("Deliveries to Route Container", r["deliveriesEgressRouteContainer"])]
    return table("Router Statistics", ["attr", "value"], rows)


def view_connections(node):
    rows = []
    for c in node.query_dicts("connection"):
        sec = "%s(%s)" % (c["sslProto"], c["sslCipher"]) if c["isEncrypted"] else "no-security"
        if c["isAuthenticated"]:
            auth = "%s(%s)" % (c["user"], c["sasl"])
        elif c["sasl"] == "ANONYMOUS":
            auth = "anonymous-user"
        else:
            auth = "no-auth"
        rows.append((c["identity"], c["host"], c["container"], c["role"], c["protocol"],
                     c["dir"], sec, auth, c["tenant"] or "",
                     "" if c["lastDlvSeconds"] is None else c["lastDlvSeconds"],
                     c["uptimeSeconds"]))
    return table("Connections", ["id", "host", "container", "role", "proto", "dir", "security",
                                 "authentication", "tenant", "last dlv", "uptime"], rows)


LINK_ATTRS = ["linkType", "linkDir", "connectionId", "identity", "peer", "owningAddr",
              "capacity", "undeliveredCount", "unsettledCount", "deliveryCount",
              "presettledCount", "droppedPresettledCount", "acceptedCount", "rejectedCount",
              "releasedCount", "modifiedCount", "deliveriesDelayed1Sec",
              "deliveriesDelayed10Sec", "deliveriesStuck", "creditAvailable",
              "zeroCreditSeconds", "adminStatus", "operStatus", "linkName", "priority",
              "settleRate"]

ADDR_ATTRS = ["distribution", "inProcess", "subscriberCount", "remoteCount", "containerCount",
              "deliveriesIngress", "deliveriesEgress", "deliveriesRedirectedToFallback",
              "deliveriesTransit", "deliveriesToContainer", "deliveriesFromContainer", "name",
              "priority"]

ALLOC_ATTRS = ["identity", "typeSize", "transferBatchSize", "localFreeListMax",
               "totalAllocFromHeap", "heldByThreads", "batchesRebalancedToThreads",
               "batchesRebalancedToGlobal"]

AUTOLINK_ATTRS = ["address", "direction", "phase", "externalAddress", "linkRef", "operStatus",
                  "lastError"]

LINKROUTE_ATTRS = ["prefix", "direction", "distribution", "operStatus", "pattern",
                   "addExternalPrefix", "delExternalPrefix"]


def addr_class(key):
    """qdstat's decoding of an address hash key's first character."""
    if not key:
        return "-", ""
    cls = {"L": "local", "M": "mobile", "R": "router", "A": "area", "T": "topo", "C": "link-in",
           "D": "link-out", "E": "edge", "H": "edge"}.get(key[0], "unknown: %s" % key[0])
    return cls, key[2:] if key[0] == "M" else key[1:]


def addr_phase(key):
    return key[1] if key and key[0] == "M" else ""


def view_links(node):
    rows = []
    for k in node.query_dicts("link", LINK_ATTRS):
        cls, addr = addr_class(k["owningAddr"])
        delay = k["deliveriesDelayed1Sec"] + k["deliveriesDelayed10Sec"]
        rows.append((k["linkType"], k["linkDir"], k["connectionId"], k["identity"],
                     k["peer"] or "", cls if k["owningAddr"] else "", addr,
                     addr_phase(k["owningAddr"]), k["capacity"], k["priority"],
                     k["undeliveredCount"], k["unsettledCount"], k["deliveryCount"],
                     k["presettledCount"], k["droppedPresettledCount"], k["acceptedCount"],
                     k["rejectedCount"], k["releasedCount"], k["modifiedCount"], delay,
                     k["settleRate"], k["deliveriesStuck"], k["creditAvailable"],
                     k["zeroCreditSeconds"]))
    return table("Router Links", ["type", "dir", "conn id", "id", "peer", "class", "addr", "phs",
                                  "cap", "pri", "undel", "unsett", "deliv", "presett", "psdrop",
                                  "acc", "rej", "rel", "mod", "delay", "rate", "stuck", "cred",
                                  "blkd"], rows)


def view_addresses(node):
    rows = []
    for a in node.query_dicts("router.address", ADDR_ATTRS):
        cls, addr = addr_class(a["name"])
        rows.append((cls, addr, addr_phase(a["name"]), a["distribution"], a["priority"],
                     a["subscriberCount"], a["remoteCount"], a["deliveriesIngress"],
                     a["deliveriesEgress"], a["deliveriesTransit"],
                     a["deliveriesRedirectedToFallback"]))
    return table("Router Addresses", ["class", "addr", "phs", "distrib", "pri", "local", "remote",
                                      "in", "out", "thru", "fallback"], rows)


def view_memory(node):
    rows = []
    total = 0
    for a in node.query_dicts("allocator", ALLOC_ATTRS):
        rows.append((a["identity"][len("allocator/"):], a["typeSize"], a["transferBatchSize"],
                     a["localFreeListMax"], a["totalAllocFromHeap"], a["heldByThreads"],
                     a["batchesRebalancedToThreads"], a["batchesRebalancedToGlobal"]))
        total += a["typeSize"] * a["totalAllocFromHeap"]
    vm = node.query_dicts("router", ["memoryUsage"])[0]["memoryUsage"]
    return "%s\n\nMemory Summary\nVmSize  %s\nPooled  %d" % (
        table("Memory Pools", ["type", "size", "batch", "thread-max", "total", "in-threads",
                               "rebal-in", "rebal-out"], rows), vm, total)


def view_nodes(node):
    rows = [(n.get("id"), n.get("nextHop"), n.get("routerLink"))
            for n in node.query_dicts("router.node")]
    return table("Routers in the Network", ["router-id", "next-hop", "link"], rows)


def view_autolinks(node):
    rows = [(a["address"], a["direction"], a["phase"], a["externalAddress"], a["linkRef"],
             a["operStatus"], a["lastError"]) for a in node.query_dicts("autoLink", AUTOLINK_ATTRS)]
    return table("AutoLinks", ["addr", "dir", "phs", "extAddr", "link", "status", "lastErr"],
                 rows)


def view_linkroutes(node):
    rows = [(r["prefix"] or r["pattern"], r["direction"], r["distribution"], r["operStatus"])
            for r in node.query_dicts("linkRoute", LINKROUTE_ATTRS)]
    return table("Link Routes", ["address", "dir", "distrib", "status"], rows)


def view_log(node, limit=None):
    lines = []
    for module, level, text, _file, _line, ts in node.get("GET-LOG", limit=limit):
        lines.append("%s %s (%s) %s" % (time.ctime(float(ts)), module, level, text))
    return "\n".join(lines)


def manage(node, args):
    op = args.operation
    attrs = {}
    for kv in args.attributes:
        if "=" in kv:
            k, v = kv.split("=", 1)
            attrs[k] = v
    if op == "query":
        names, rows = node.query(args.type, args.attributes or None)
        result = [{k: v for k, v in zip(names, r) if v is not None} for r in rows]
    elif op == "create":
        result = node.create(attrs, args.type, args.name)
    elif op == "read":
        result = node.read(args.type, args.name, args.identity)
    elif op == "update":
        result = node.update(attrs, args.type, args.name, args.identity)
    elif op == "delete":
        node.delete(args.type, args.name, args.identity)
        return ""
    else:
        result = node.get(op.upper(), entityType=full_type(args.type))
    return json.dumps(result, indent=2, sort_keys=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-b", "--bus", default="127.0.0.1:5672")
    p.add_argument("-r", "--router", default=None)
    p.add_argument("-t", "--timeout", type=float, default=5)
    g = p.add_mutually_exclusive_group()
    for opt in ("-g", "-c", "-l", "-a", "-m", "-n"):
        g.add_argument(opt, action="store_true")
    g.add_argument("--autolinks", action="store_true")
    g.add_argument("--linkroutes", action="store_true")
    g.add_argument("--log", action="store_true")
    p.add_argument("--limit", type=int, default=None)
    sub = p.add_subparsers(dest="cmd")
    m = sub.add_parser("manage", help="qdmanage operations")
    m.add_argument("operation")
    m.add_argument("attributes", nargs="*")
    m.add_argument("--type")
    m.add_argument("--name")
    m.add_argument("--identity")
    args = p.parse_args(argv)
    node = Node(args.bus, router=args.router, timeout=args.timeout)
    try:
        if args.cmd == "manage":
            print(manage(node, args))
            return 0
        views = [("g", view_general), ("c", view_connections), ("l", view_links),
                 ("a", view_addresses), ("m", view_memory), ("n", view_nodes),
                 ("autolinks", view_autolinks), ("linkroutes", view_linkroutes)]
        if args.log:
            print(view_log(node, args.limit))
            return 0
        for flag, fn in views:
            if getattr(args, flag):
                print(header(node))
                print(fn(node))
                return 0
        print(header(node))
        print(view_general(node))
        return 0
    except ManagementError as e:
        print("Error: %s" % e, file=sys.stderr)
        return 1
    finally:
        node.close()


if __name__ == "__main__":
    sys.exit(main())
