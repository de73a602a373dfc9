"""The shipped example configurations (config/examples/) run as README describes them, each
with its fixed ports moved to free ones on 127.0.0.1: interior.json takes edge.json's edge
router, whose client reaches a consumer on the interior."""

import json

from proton import Message

from clients import Client
from conftest import REPO_ROOT, free_port

EXAMPLES = REPO_ROOT / "config" / "examples"


def example(name, ports):
    """The example's entities (its '#' comment lines left out), every port it names moved to
    ports[port] (a free one, the same for the same port in every example)."""
    text = "\n".join(x for x in (EXAMPLES / name).read_text().splitlines()
                     if not x.lstrip().startswith("#"))
    ents = json.loads(text)
    for _, attrs in ents:
        if "port" in attrs:
            attrs["port"] = str(ports.setdefault(attrs["port"], free_port()))
    return ents


def test_interior_and_edge_examples_work_together(make_router):
    ports = {}
    interior = make_router(entities=example("interior.json", ports), name="interior")
    edge = make_router(entities=example("edge.json", ports), name="edge")
    # the edge's first uplink is the interior's edge listener; the second goes nowhere
    edge.wait_log(r"Connection to 127\.0\.0\.1:%d opened" % ports["5670"], timeout=20)
    c = Client()
    try:
        rcv = c.connect(interior.url_of(0)).receiver("orders.example", settle="accept")
        snd = c.connect(edge.url_of(0)).sender("orders.example")
        snd.wait_credit(timeout=20)  # the interior told the edge there is a consumer
        snd.send(Message(body="from the edge"))
        assert rcv.get(timeout=20).body == "from the edge"
        # and a multicast address of the interior's reaches its consumer from the edge too
        mrcv = c.connect(interior.url_of(0)).receiver("multicast.news", settle="accept")
        msnd = c.connect(edge.url_of(0)).sender("multicast.news")
        msnd.wait_credit(timeout=20)
        msnd.send(Message(body="news"))
        assert mrcv.get(timeout=20).body == "news"
    finally:
        c.close()
