"""The web console at / on an http listener, in a real browser (headless Chromium, Debian's
/usr/bin/chromium, driven by playwright-core through tests/browser/console.mjs).

Each test starts a router with an AMQP and an http listener, opens the page, pushes traffic
with Proton-Python, and reads what the page shows (its DOM, as a user sees it): the
connection count and the delivery counters must move with the traffic, and the page must say
plainly when the router stops answering, and stop saying it when the router is back.

A screenshot of the page with traffic is saved to the test's tmp dir and to
console-screenshot.png in the build directory of the junctiond under test (build/ for
scripts/test's release run); the banner's to console-banner.png beside it.

Skipped when node or /usr/bin/chromium is not installed (scripts/test installs both).
"""

import signal
import time

import pytest
from proton import Delivery, Message

from conftest import junctiond_path, run_junctiond
from nodejs import ConsolePage, http_get, http_router, require_chromium

pytestmark = [pytest.mark.deadline(180), pytest.mark.slow]


def build_dir():
    """The build directory of the junctiond under test (…/build for build/router/junctiond)."""
    return junctiond_path().resolve().parent.parent


def open_console(make_router, **kw):
    node = require_chromium()
    r, amqp_url, http_port = http_router(make_router, **kw)
    url = "http://127.0.0.1:%d/" % http_port
    status, ctype, body = http_get(url)
    assert status == 200, "GET / answered %s" % status
    assert b"console.js" in body, (
        "GET / is not the console page (was the console built? `npm ci` in stats/console, "
        "then rebuild): %r" % body[:300])
    page = ConsolePage(url, node)
    return r, amqp_url, page


@pytest.fixture
def pages():
    opened = []
    yield opened
    for p in opened:
        p.close()


def version_of_junctiond():
    out = run_junctiond(["-v"]).stdout.strip()
    return out.split()[-1]


def send_and_receive(snd, rcv, n, body):
    dlvs = [snd.send(Message(body="%s-%d" % (body, i))) for i in range(n)]
    for i in range(n):
        got = rcv.get()
        assert got.message.body == "%s-%d" % (body, i)
        got.accept()
    for d in dlvs:
        assert snd.wait_outcome(d) == Delivery.ACCEPTED


def test_console_shows_router_and_live_counters(make_router, client, pages, tmp_path):
    r, amqp_url, page = open_console(make_router)
    pages.append(page)
    assert "Junction" in page.loaded["title"]

    first = page.wait_for(lambda p: p["state"] == "live" and p["connections"] is not None,
                          "the feed live with a connection count")
    assert first["routerId"] == "JTest"
    assert first["mode"] == "standalone"
    assert first["version"] == version_of_junctiond()
    assert first["uptime"] not in ("", "\u2013")
    assert first["banner"] is False
    assert first["charts"] >= 2, "the uPlot charts were not drawn"
    c0, in0, out0 = first["connections"], first["ingress"], first["egress"]
    assert first["links"] is not None and first["addresses"] is not None

    # Two connections, a consumer and a producer: the page's count follows.
    conn_r = client.connect(amqp_url)
    conn_s = client.connect(amqp_url)
    rcv = conn_r.receiver("closest.console", credit=100)
    snd = conn_s.sender("closest.console")
    p = page.wait_for(lambda p: p["connections"] == c0 + 2 and len(p["connTable"]) == c0 + 2,
                      "%d connections (card and table)" % (c0 + 2))
    hosts = [row["host"] for row in p["connTable"]]
    assert all(h.startswith("127.0.0.1:") for h in hosts), hosts

    # Traffic in two steps: the delivery counters move each time.
    send_and_receive(snd, rcv, 20, "a")
    p = page.wait_for(lambda p: p["ingress"] >= in0 + 20 and p["egress"] >= out0 + 20,
                      "20 more deliveries in and out")
    in1, out1 = p["ingress"], p["egress"]

    def addr_row(p):
        rows = [a for a in p["addrTable"] if a["id"].endswith("closest.console")]
        return rows[0] if rows else None

    p = page.wait_for(lambda p: addr_row(p) and addr_row(p)["deliveriesIngress"] == 20 and
                      addr_row(p)["deliveriesEgress"] == 20,
                      "the address closest.console with 20 deliveries in and out")
    assert addr_row(p)["distribution"] == "closest"
    assert addr_row(p)["subscriberCount"] == 1

    send_and_receive(snd, rcv, 30, "b")
    p = page.wait_for(lambda p: p["ingress"] >= in1 + 30 and p["egress"] >= out1 + 30 and
                      addr_row(p) and addr_row(p)["deliveriesEgress"] == 50,
                      "30 more deliveries (50 on closest.console)")
    # Links: the consumer's outgoing link counted every copy, accepted.
    out_links = [lk for lk in p["linkTable"] if lk["linkDir"] == "out" and
                 str(lk["owningAddr"]).endswith("closest.console")]
    assert out_links and out_links[0]["deliveryCount"] == 50, p["linkTable"]
    page.wait_for(lambda p: any(lk["linkDir"] == "out" and lk["acceptedCount"] == 50
                                for lk in p["linkTable"]), "50 accepted on the consumer's link")
    # A rate was computed and drawn.
    page.wait_for(lambda p: p["rateIn"] not in ("", "\u2013"), "a deliveries/s figure")

    # Keep some traffic flowing while the screenshot is taken, so the charts show it.
    for i in range(5):
        send_and_receive(snd, rcv, 10, "c%d" % i)
        client.run_for(0.3)
    page.wait_for(lambda p: addr_row(p) and addr_row(p)["deliveriesEgress"] == 100,
                  "100 deliveries on closest.console")
    shot = build_dir() / "console-screenshot.png"
    page.screenshot([tmp_path / "console-screenshot.png", shot])
    assert shot.stat().st_size > 10000
    p = page.read()
    assert not p["errors"] and not p["consoleErrors"], (p["errors"], p["consoleErrors"])

    # Connections going away are seen too.
    conn_s.close()
    conn_r.close()
    page.wait_for(lambda p: p["connections"] == c0 and len(p["connTable"]) == c0,
                  "the connection count back to %d" % c0)


def test_console_stats_filter(make_router, client, pages):
    r, amqp_url, page = open_console(make_router)
    pages.append(page)
    page.wait_for(lambda p: p["state"] == "live", "the feed live")
    conn = client.connect(amqp_url)
    rcv = conn.receiver("balanced.filtered", credit=10)
    snd = conn.sender("balanced.filtered")
    send_and_receive(snd, rcv, 7, "f")

    # The default filter follows router.*; a word matches names containing it.
    p = page.wait_for(lambda p: any(s["id"] == "router.deliveriesIngress"
                                    for s in p["statsTable"]), "router.* in the stats table")
    assert all(s["id"].startswith("router.") for s in p["statsTable"])

    page.filter("filtered")
    p = page.wait_for(lambda p: p["statsTable"] and
                      all("filtered" in s["id"] for s in p["statsTable"]) and
                      any(s["id"].startswith("address.") and
                          s["id"].endswith(".deliveriesEgress") and s["value"] == 7
                          for s in p["statsTable"]),
                      "only stats named *filtered*, the address's deliveriesEgress = 7")

    page.filter("address.*.deliveriesIngress")
    p = page.wait_for(lambda p: p["statsTable"] and all(
        s["id"].startswith("address.") and s["id"].endswith(".deliveriesIngress")
        for s in p["statsTable"]), "only address.*.deliveriesIngress rows")

    page.filter("no-such-stat-anywhere")
    page.wait_for(lambda p: p["statsTable"] == [], "an empty stats table")
    assert not page.read()["errors"]


def test_console_banner_when_router_stops_answering(make_router, pages, tmp_path):
    r, amqp_url, page = open_console(make_router)
    pages.append(page)
    p = page.wait_for(lambda p: p["state"] == "live" and p["uptime"] not in ("", "\u2013"),
                      "the feed live")
    assert p["banner"] is False

    # A router that stops answering (stopped, its sockets still open): the banner comes up
    # once a request has gone unanswered for a few seconds, and goes when it answers again.
    r.proc.send_signal(signal.SIGSTOP)
    try:
        p = page.wait_for(lambda p: p["banner"] and p["state"] == "down",
                          "the not-answering banner while the router is stopped", timeout=30)
        assert "not answering" in p["bannerText"]
    finally:
        r.proc.send_signal(signal.SIGCONT)
    page.wait_for(lambda p: not p["banner"] and p["state"] == "live",
                  "the banner gone once the router answers again", timeout=40)

    # A router that exits: the feed closes, the banner comes up ...
    http_port = int(page.url.rsplit(":", 1)[1].strip("/"))
    assert r.stop() == 0
    p = page.wait_for(lambda p: p["banner"] and p["state"] == "down",
                      "the not-answering banner after the router exited", timeout=30)
    page.screenshot([tmp_path / "console-banner.png", build_dir() / "console-banner.png"])

    # ... and goes away when a router is back on the same port.
    time.sleep(0.5)
    r2, _, _ = http_router(make_router, http_port=http_port)
    page.wait_for(lambda p: not p["banner"] and p["state"] == "live",
                  "the banner gone once a router is back", timeout=40)
    assert not page.read()["errors"]
