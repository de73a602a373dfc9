"""The corpus's interior meshes: qpid-dispatch 1.19's own router sets tests/config-2/ (two
routers), config-3-linear/ (a line of three) and config-6/ (four routers joined each to each,
and two more each joined to two of them) started with junctiond, one process per file, and
joined into their meshes (test_corpus.py starts every file alone: each serves).

Each set's files are changed only where they cannot run here as written: each port number
(and `amqp`) becomes one free port, the same in every file of the set, so that connectors
still find their listeners; every listener and connector host becomes 127.0.0.1; a file
without a plain AMQP listener for clients gets one, so that there is something to ask.
Everything else (router ids, `area`, addresses, trace logging, http listeners) is the
file's. Then each router's router.node names every router of the set with the neighbours
the files' connectors give it, and a route to each."""
import re

import pytest

from conftest import Router, free_port
from meshnet import interior_env, nodes, wait_for
from conftest import REPO_ROOT

CORPUS = REPO_ROOT / "tests" / "data" / "qdrouterd-configs"
SETS = {
    "config-2": {"A.conf": ["B"], "B.conf": ["A"]},
    "config-3-linear": {"A.conf": ["B"], "B.conf": ["C"], "C.conf": []},
    "config-6": {"A.conf": ["B", "C", "D"], "B.conf": ["C", "D"], "C.conf": ["D"],
                 "D.conf": [], "X.conf": ["A", "B"], "Y.conf": ["C", "D"]},
}


def entities(text):
    """[(type, {key: value})] of a .conf text (one level, as these files are)."""
    out, cur = [], None
    for line in text.split("\n"):
        s = line.split("#")[0].strip()
        m = re.match(r"^([\w-]+)\s*\{$", s)
        if m:
            cur = (m.group(1), {})
            out.append(cur)
        elif s.startswith("}"):
            cur = None
        elif cur is not None and ":" in s:
            k, v = s.split(":", 1)
            cur[1][k.strip()] = v.strip()
    return out


def rewrite(text, ports):
    """The file with its ports mapped by `ports` (filled as new numbers come), hosts on
    loopback, and a client listener when it has none; returns (text, client port)."""
    def port(m):
        v = m.group(2)
        if v not in ports:
            ports[v] = free_port()
        return "%s%d" % (m.group(1), ports[v])
    text = re.sub(r"(?m)^(\s*port:\s*)(\S+)\s*$", port, text)
    text = re.sub(r"(?m)^(\s*host:\s*)(\S+)\s*$", r"\g<1>127.0.0.1", text)
    client = None
    for typ, attrs in entities(text):
        if typ == "listener" and attrs.get("role", "normal") == "normal" and \
                attrs.get("http", "false") != "true":
            client = int(attrs["port"])
            break
    if client is None:
        client = free_port()
        text += ("\n# added by the test: a listener to ask\nlistener {\n"
                 "    host: 127.0.0.1\n    port: %d\n}\n" % client)
    return text, client


def router_id(text):
    return [a for t, a in entities(text) if t == "router"][0]["id"]


@pytest.mark.parametrize("name", sorted(SETS))
def test_corpus_mesh(tmp_path, request, name):
    files = SETS[name]
    ports, routers, ids = {}, {}, {}
    for f in files:
        ids[f[0]] = router_id((CORPUS / "tests" / name / f).read_text())
    edges = {i: set() for i in ids.values()}
    for f, to in files.items():
        for t in to:
            edges[ids[f[0]]].add(ids[t])
            edges[ids[t]].add(ids[f[0]])
    want = {k: sorted(v) for k, v in edges.items()}
    started = []
    request.node.jn_routers = started
    try:
        for f in files:
            text, client = rewrite((CORPUS / "tests" / name / f).read_text(), ports)
            r = Router(tmp_path, [], name=f[0], env=interior_env())
            r.config_path = tmp_path / f
            started.append(r)
            r.start(config_text=text)
            routers[ids[f[0]]] = (r, "amqp://127.0.0.1:%d" % client)

        def agree():
            for rid, (r, url) in routers.items():
                rows = nodes(url)
                if {k: sorted(v["linkState"]) for k, v in rows.items()} != want:
                    return None
                if any(r["nextHop"] is None and r["routerLink"] is None
                       for k, r in rows.items() if k != rid):
                    return None
            return True
        wait_for("every router of %s holds the mesh %s" % (name, want), agree, timeout=30)
    finally:
        problems = []
        for r in started:
            r.stop()
            problems += r.problems()
        assert not problems, problems
