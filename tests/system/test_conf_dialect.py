"""The .conf reader (config/conf.c) against qdrouterd 1.19's own (Config._parse in its
config.py, run from ../shared/peer): on thousands of generated files and on the dialect's
quirks, both make the same list of [type, {attributes}] pairs, or both refuse the file.

The only accepted difference: a line qdrouterd logs as "Invalid config file syntax" (and
passes on to its JSON parser, which fails on nearly all of them) is an error for Junction.
Junction's tree is compared after qdrouterd's transform_sections(): camelCased type names and
keys, `address` as `router.config.address`.  Skipped when ../shared/peer is absent."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, junctiond_path

PEER_PY = (REPO_ROOT.parent / "shared" / "peer" / "qdrouterd-1.19.0" / "lib" / "qpid-dispatch" /
           "python")


def conf_dump_path():
    # beside junctiond in the same build: <build>/router/junctiond
    return junctiond_path().resolve().parent.parent / "tests" / "unit" / "config" / "conf_dump"


# Run in a process of its own: qdrouterd's library refuses to load beside Proton-Python.
QD_READER = r"""
import io, json, sys
sys.path.insert(0, sys.argv[1])
from qpid_dispatch_internal.management import config as qd_config
from qpid_dispatch.management.entity import camelcase
# qdrouterd logs through its C library; here the warnings are collected instead
qd_config.LOG_WARNING, qd_config.LOG_ERROR = "warning", "error"
for path in sys.argv[2:]:
    text = open(path, encoding="utf-8", newline=None).read()
    warned = []
    c = qd_config.Config.__new__(qd_config.Config)
    c._log = lambda level, msg: warned.append(msg) if level == "warning" else None
    try:
        tree = c._parse(io.StringIO(text, newline=None))
        out = {"verdict": "OK", "tree": tree}
    except Exception as e:  # its JSON parser's verdict
        out = {"verdict": "ERR", "tree": str(e)}
    out["warned"] = warned
    print(json.dumps(out))
"""
QD_CAMEL = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from qpid_dispatch.management.entity import camelcase
for line in sys.stdin:
    tree = json.loads(line)
    out = []
    for t, a in tree:
        t = camelcase(t)
        a = dict((camelcase(k), v) for k, v in a.items())
        if t in ("address", "linkRoute", "autoLink", "exchange", "binding"):
            t = "router.config." + t
        out.append([t, a])
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def peer():
    if not (PEER_PY / "qpid_dispatch_internal" / "management" / "config.py").exists():
        pytest.skip("qdrouterd 1.19's Python library is not at ../shared/peer")
    if not conf_dump_path().exists():
        pytest.skip("conf_dump is not built beside junctiond (%s)" % conf_dump_path())
    return PEER_PY


def write_texts(texts, tmp_path):
    paths = []
    for i, t in enumerate(texts):
        p = tmp_path / ("%d.conf" % i)
        p.write_bytes(t.encode("utf-8"))
        paths.append(str(p))
    return paths


def qdrouterd_trees(peer, paths):
    r = subprocess.run([sys.executable, "-c", QD_READER, str(peer)] + paths,
                       capture_output=True, text=True, check=True)
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(out) == len(paths), r.stderr
    return out


def junction_trees(peer, paths):
    out = []
    for k in range(0, len(paths), 500):
        r = subprocess.run([str(conf_dump_path())] + paths[k:k + 500], capture_output=True,
                           text=True, check=True)
        out.extend(r.stdout.splitlines())
    assert len(out) == len(paths)
    # Junction's tree is compared after qdrouterd's transform_sections()
    ok = [line[3:] for line in out if line.startswith("OK ")]
    r = subprocess.run([sys.executable, "-c", QD_CAMEL, str(peer)], input="\n".join(ok) + "\n",
                       capture_output=True, text=True, check=True)
    camel = iter(json.loads(line) for line in r.stdout.splitlines())
    return [("OK", next(camel)) if line.startswith("OK ") else ("ERR", line) for line in out]


def compare(peer, texts, tmp_path):
    """(number of texts read alike, [differences that are not accepted], Junction's results)"""
    paths = write_texts(texts, tmp_path)
    alike, bad = 0, []
    mine_all = junction_trees(peer, paths)
    for text, theirs, mine in zip(texts, qdrouterd_trees(peer, paths), mine_all):
        if theirs["verdict"] == mine[0] and (mine[0] == "ERR" or theirs["tree"] == mine[1]):
            alike += 1
        elif mine[0] == "ERR" and any("Invalid config file syntax" in w for w in theirs["warned"]):
            alike += 1  # the accepted difference (see the module comment)
        else:
            bad.append((text, theirs, mine))
    return alike, bad, mine_all


PIECES = [
    "router {", "listener {", "address {", "log {", "vhost {", "}", "  }  ", "}#c", "},",
    "host: 127.0.0.1", "port: amqp", "port:5672", "name: a b", "name: a\\tb", "name: a\\u00e9",
    'name: "q"', "name: x\\", "name: a,}", "name: a, ]", "pattern: a.#.b # c", "pattern: a.# b",
    "bindingKey: #", "hostname: h#1", "host: h#1", "prefix: p # comment", "# comment", "  # c",
    "", "   ", "\t", "mode:\tstandalone", "key:", "key: {a}", "openProperties: {", '"a": "b",',
    '"a": {', '"b": 1}', '"c": [1,2,],', '"x": 1', "groups: {", '"$default": {', '"users": "*"',
    "map: {", "inner: v", "foo bar: baz", "$x: {", "x y {", "router{", "worker-threads: 4",
    "a-b_c.d: 1", "name: \u00e9", "caf\u00e9: 1", "x: {  ", "name: [1]", "name: {x", "name : v",
    '"k": "v"', "id: \\ud83d\\ude00", "\x0b id: v\x0c", "}\x1c",
]


def generate(rng):
    lines = [rng.choice(PIECES) for _ in range(rng.randint(1, 12))]
    if rng.random() < 0.6:
        body = [rng.choice(PIECES[9:]) for _ in range(rng.randint(0, 6))]
        lines = [rng.choice(PIECES[:5])] + body + ["}"] + (lines if rng.random() < 0.3 else [])
    sep = rng.choice(["\n", "\n", "\r\n", "\r"])
    return sep.join(lines) + (sep if rng.random() < 0.5 else "")


QUIRKS = [
    "router {\n    mode: standalone   # trailing\n    id: R1\n}\nlistener {\n\tport:\tamqp\n}",
    "address {\n  pattern: a.#.b # a comment\n}\naddress {\n  prefix: a.#.b\n}\n",
    "binding {\n bindingKey: a.#\n}\nvhost {\n hostname: h#1 x\n}\n",
    "listener {\n openProperties: {\n  \"a\": {\n   \"b\": [1, 2,]\n  }\n  # a comment\n"
    "  , \"c\": \"x#y\",\n }\n port: 1\n}\n",
    "vhost {\n hostname: $default\n groups: {\n  \"$default\": {\n   \"users\": \"*\",\n"
    "   \"maxSenders\": 10\n  }\n }\n}\n",
    "listener {\n openProperties: {\n  \"a\": {\"b\": 1}\n }\n}\n",
    "x {\n a: {\n  b: {\n   c: d\n  }\n  e: f\n }\n g: h\n}",
    "listener {\n host: a, }\n name: [x,]\n}",
    "router {\n id: a\\tb\\u00e9\\\\c\\/d\n}",
    "router {\r\n id: R\r\n}\r\n", "router {\r id: R\r}", "router{\nmode:standalone\nid : R\n}",
    "\x0b\x0crouter {\x1c\n mode: standalone\x0c\n id: R\x0b\n}\n",
    "router {\n mode: standalone\n}", "# only a comment\n", "\n  \n",
    "router {\n id: \"R\"\n}", "router {\n listener {\n }\n}\n", "router {\n id: R\n",
]


def test_quirks_read_as_qdrouterd_reads_them(peer, tmp_path):
    alike, bad, _ = compare(peer, QUIRKS, tmp_path)
    assert not bad, "\n".join(repr(b) for b in bad[:5])
    assert alike == len(QUIRKS)


def test_generated_files_read_as_qdrouterd_reads_them(peer, tmp_path):
    rng = random.Random(int(os.environ.get("CONF_DIALECT_SEED", "13")))
    texts = [generate(rng) for _ in range(3000)]
    alike, bad, mine = compare(peer, texts, tmp_path)
    assert not bad, "%d of %d differ, e.g.:\n%s" % (len(bad), len(texts),
                                                   "\n".join(repr(b) for b in bad[:5]))
    # the generator reaches both verdicts
    assert sum(1 for m in mine if m[0] == "OK") > 200
    assert sum(1 for m in mine if m[0] == "ERR") > 200
