"""Configuration in qdrouterd's .conf dialect: the real junctiond started on .conf files (the
shipped example, qdrouterd 1.19's own default config, files with pre-1.0 and deprecated
names), routing a message through each, and one-line errors that name the file and the line.

qdrouterd's own etc/qdrouterd.conf comes from ../shared/peer (relative to the repository
root); that test is skipped when it is absent."""

import re

import pytest
from proton import Message

from clients import Client
from conftest import REPO_ROOT, Router, run_junctiond, sanitizer_report

EXAMPLE = REPO_ROOT / "config" / "examples" / "standalone.conf"
PEER_CONF = (REPO_ROOT.parent / "shared" / "peer" / "qdrouterd-1.19.0" / "etc" /
             "qpid-dispatch" / "qdrouterd.conf")
WARNING_RE = re.compile(r"AGENT \(warning\) (.*)")


def start_conf(tmp_path, text, n_listeners, name="router", suffix=".conf"):
    """A junctiond running on `text` written to <name><suffix>; waits for its listeners."""
    r = Router(tmp_path, [["listener", {}]] * n_listeners, name=name)
    r.config_path = tmp_path / (name + suffix)
    return r


def routes(url, address):
    """A message sent to `address` arrives at a receiver on it, body intact."""
    client = Client()
    try:
        conn = client.connect(url)
        rcv = conn.receiver(address, settle="accept")
        snd = conn.sender(address)
        snd.send(Message(body="through %s" % address))
        got = rcv.get(timeout=10)
        return got.body == "through %s" % address
    finally:
        client.close()


def on_loopback(text):
    """The text with every listener on 127.0.0.1 and an ephemeral port."""
    text = re.sub(r"(?m)^(\s*)port:.*$", r"\1port: 0", text)
    text = re.sub(r"(?m)^(\s*)host:.*$", r"\1host: 127.0.0.1", text)
    return text


@pytest.fixture
def routers():
    made = []
    yield made
    problems = []
    for r in made:
        r.stop()
        problems.extend(r.problems())
    assert not problems, problems


def test_shipped_example_conf_routes(tmp_path, routers):
    text = on_loopback(EXAMPLE.read_text())
    r = start_conf(tmp_path, text, 2)
    routers.append(r)
    r.start(config_text=text)
    assert len(r.addresses) == 2
    # the first listener is AMQP, the second HTTP
    assert routes("amqp://127.0.0.1:%d" % r.addresses[0][1], "closest.conf")
    assert routes("amqp://127.0.0.1:%d" % r.addresses[0][1], "anything.else")
    assert not WARNING_RE.search(r.stderr_text()), r.stderr_text()


def test_conf_dialect_in_a_file_named_json(tmp_path, routers):
    # the dialect is chosen by the text, not the file name
    text = "# .conf text in a .json file\nrouter {\n  id: Named.Json\n}\nlistener {\n" \
           "  host: 127.0.0.1\n  port: 0\n}\n"
    r = start_conf(tmp_path, text, 1, suffix=".json")
    routers.append(r)
    r.start(config_text=text)
    assert routes(r.url, "q.named")


def test_qdrouterd_default_conf_routes(tmp_path, routers):
    if not PEER_CONF.exists():
        pytest.skip("qdrouterd 1.19's etc/qdrouterd.conf is not at ../shared/peer")
    text = on_loopback(PEER_CONF.read_text())
    r = start_conf(tmp_path, text, 1, name="qdrouterd")
    routers.append(r)
    r.start(config_text=text)
    assert routes(r.url, "multicast.one")
    assert routes(r.url, "closest.two")
    assert not WARNING_RE.search(r.stderr_text()), r.stderr_text()


def test_old_names_load_with_one_warning_each(tmp_path, routers):
    text = """# a qdrouterd 0.x-era file
container {
    worker-threads: 2
}
router {
    routerId: Old.Router
}
fixed-address {
    prefix: closest
    fanout: single
}
listener {
    addr: 127.0.0.1
    port: 0
}
log {
    module: DEFAULT
    timestamp: yes
}
"""
    r = start_conf(tmp_path, text, 1)
    routers.append(r)
    r.start(config_text=text)
    assert r.threads == 2
    assert routes(r.url, "closest.old")
    warnings = WARNING_RE.findall(r.stderr_text())
    want = [
        ("line 3", "worker-threads", "workerThreads"),
        ("line 2", "'container' entity is deprecated", "'router'"),
        ("line 6", "routerId", "'id'"),
        ("line 8", "'fixedAddress' entity is deprecated", "distribution \"closest\""),
        ("line 13", "'addr'", "'host'"),
        ("line 18", "'timestamp'", "'includeTimestamp'"),
    ]
    assert len(warnings) == len(want), warnings
    for w, (line, old, modern) in zip(warnings, want):
        assert line in w and old in w and modern in w, (w, line, old, modern)


def start_fails(tmp_path, text, name="bad.conf"):
    path = tmp_path / name
    path.write_text(text)
    p = run_junctiond(["-c", path])
    assert p.returncode != 0, "junctiond accepted the configuration:\n%s" % p.stderr
    assert sanitizer_report(p.stderr) is None, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, "want one line on stderr, got %d:\n%s" % (len(lines), p.stderr)
    assert name in lines[0], lines[0]
    return lines[0]


def test_unsupported_entity_is_one_line_with_its_line(tmp_path):
    line = start_fails(tmp_path, "router {\n  id: R\n}\n\nexchange {\n  address: a\n}\n")
    assert "line 5" in line and "exchange" in line and "does not support" in line, line


def test_bad_attribute_names_its_line(tmp_path):
    line = start_fails(tmp_path, "listener {\n  port: 0\n  maxFrameSize: big\n}\n")
    assert "line 3" in line and "maxFrameSize" in line and "listener" in line, line


def test_bad_conf_line_names_its_line(tmp_path):
    line = start_fails(tmp_path, "router {\n  id: R\n  not a line\n}\n")
    assert "line 3" in line and "not a line" in line, line
