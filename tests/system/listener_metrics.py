"""The per-listener stats (router/lstats.h) as /metrics shows them, for test_auth_failures.py,
test_tls.py and test_sasl.py: junction_listener_<field>_total{listener="..."} and
junction_listener_auth_failed_total{key=...,listener="...",reason="..."}.  Every function
takes the (host, port) of an http listener of the router."""

import http.client
import re
import time

REASONS = ["credentials", "mechanism", "protocol", "skipped", "aborted", "timeout", "internal"]

SAMPLE_RE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def metrics_text(http_addr):
    c = http.client.HTTPConnection(*http_addr, timeout=10)
    try:
        c.request("GET", "/metrics")
        resp = c.getresponse()
        assert resp.status == 200
        return resp.read().decode()
    finally:
        c.close()


def samples(text, metric):
    """{frozenset of (label, value): value} for every sample of `metric` in /metrics text."""
    out = {}
    for line in text.splitlines():
        m = SAMPLE_RE.match(line)
        if m and m.group(1) == metric:
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out[labels] = int(float(m.group(3)))
    return out


def lstat(http_addr, listener, field):
    """junction_listener_<field>_total of `listener`, or None when it has no sample."""
    s = samples(metrics_text(http_addr), "junction_listener_%s_total" % field)
    return s.get(frozenset({("listener", listener)}))


def auth_failed(http_addr, listener):
    """{reason: count} of `listener` (every reason, zeros included; {} when it has none)."""
    s = samples(metrics_text(http_addr), "junction_listener_auth_failed_total")
    return {dict(k)["reason"]: v for k, v in s.items() if dict(k)["listener"] == listener}


def only(reason, n=1):
    """What auth_failed() gives after n failures for `reason` and none for the others."""
    d = {k: 0 for k in REASONS}
    d[reason] = n
    return d


def wait_value(fn, want, timeout=5):
    """fn() once it equals want, or its last value after `timeout` s (the workers count into
    their own shards and the client may see its refusal before the count is made)."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)
