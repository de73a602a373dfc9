"""The corpus: qpid-dispatch 1.19's own configuration files (tests/data/qdrouterd-configs/, see
its README) started with the real junctiond, one router per file.

Each file is rewritten before the start so that it runs here: every port becomes a free
port on 127.0.0.1, every listener and connector host 127.0.0.1, every file path (log files,
policyDir, saslConfigDir, httpRootDir, sslProfile files, `file:` passwords) one in the test's
tmp dir, and a `.in` template gets its CMake variables as qpid-dispatch's build would give
them. A file without a listener gets one, so that there is something to check. Then either

* "serves": junctiond starts, every AMQP listener answers an AMQP open, every http listener
  answers an HTTP request, and SIGTERM stops it with status 0; or
* "refused: TEXT": start-up stops with a non-zero status and one line on stderr (besides the
  deprecation warnings), and that line contains TEXT, which names the feature a later issue
  adds (interior mode, sslProfile, connector, ...).

EXPECTED holds each file's outcome. A file whose outcome differs fails, in both directions:
when a feature lands and a file starts to serve, its line in EXPECTED is updated with that
change, so the count of files that serve can only go up. vhost policy files (the JSON files a
policyDir holds) start as the policyDir of a small router config, which is how qdrouterd reads
them. test_corpus_summary prints the counts (run pytest with -s to see them)."""

import collections
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from proton import Endpoint

from clients import Client
from conftest import REPO_ROOT, Router, free_port, sanitizer_report

CORPUS = REPO_ROOT / "tests" / "data" / "qdrouterd-configs"
PASSWORD = "server-password"  # the password of the private keys the test makes
SERVES = "serves"

# What start-up refuses today, as the one line names it. Each is a feature a later issue adds,
# except NO_DEFAULT_GROUP and GROUPS_NOT_JSON: the user guide's vhost examples, one allowing
# unknown users without a $default group, one whose `groups` is not JSON, which qdrouterd 1.19
# refuses too ("default settings are not defined", "Expecting property name enclosed in double
# quotes").
def refused(text):
    return "refused: " + text


# the snippet's connector names a profile it leaves out (TLS on a connector itself loads)
NO_BROKER_PROFILE = refused("sslProfile 'broker-tls': no sslProfile entity has that name")
# a snippet whose listener names a profile the snippet leaves out (qdrouterd refuses it too)
NO_SUCH_PROFILE = refused("sslProfile 'inter_router_tls': no sslProfile entity has that name")
NO_INTER_ROUTER_PROFILE = refused("sslProfile 'inter-router-tls': no sslProfile entity has that "
                                  "name")
# the snippet's listener names a profile it leaves out (SASL EXTERNAL itself loads)
NO_SERVICE_PROFILE = refused("sslProfile 'service-tls': no sslProfile entity has that name")
# the user guide's vhost allows unknown users without a $default group for them (qdrouterd
# 1.19 refuses it too: "allows connections by default but default settings are not defined")
NO_DEFAULT_GROUP = refused("true needs a '$default' group")
FAILOVER_URLS = refused("Junction does not support failoverUrls (a failover list for clients)")
GROUPS_NOT_JSON = refused("attribute 'groups': invalid JSON in its value")

# Every file of the corpus with its outcome today, sorted by file name. When a file's outcome
# changes, change its line here in the same commit.
EXPECTED = {
    'docs/adding-metadata-to-connections-L40.conf': SERVES,
    'docs/adding-metadata-to-connections-L76.conf': SERVES,
    'docs/configuring-address-semantics-L38.conf': SERVES,
    'docs/configuring-addresses-prioritized-message-delivery-L45.conf': SERVES,
    'docs/configuring-default-logging-L38.conf': SERVES,
    'docs/configuring-default-logging-L71.conf': SERVES,
    'docs/configuring-router-properties-L40.conf': SERVES,
    'docs/connecting-routers-L54.conf': SERVES,
    'docs/connecting-routers-L74.conf': SERVES,
    'docs/connecting-routers-external-amqp-containers-L45.conf': SERVES,
    'docs/connecting-using-mutual-ssl-tls-authentication-L46.conf': SERVES,
    'docs/connecting-using-mutual-ssl-tls-authentication-L83.conf': NO_BROKER_PROFILE,
    'docs/connecting-using-one-way-ssl-tls-authentication-L38.conf': SERVES,
    'docs/connecting-using-one-way-ssl-tls-authentication-L56.conf': NO_BROKER_PROFILE,
    'docs/connecting-using-username-password-authentication-L49.conf': SERVES,
    'docs/creating-link-route-L49.conf': SERVES,
    'docs/creating-link-route-L65.conf': SERVES,
    'docs/creating-link-route-L93.conf': SERVES,
    'docs/creating-vhost-policies-L42.conf': NO_DEFAULT_GROUP,
    'docs/creating-vhost-policies-L92.conf': GROUPS_NOT_JSON,
    'docs/creating-vhost-policies-json-L40.conf': SERVES,
    'docs/creating-vhost-policies-json-L56.json': SERVES,
    'docs/enabling-ssl-tls-client-authentication-L48.conf': NO_SERVICE_PROFILE,
    'docs/enabling-ssl-tls-encryption-L46.conf': SERVES,
    'docs/enabling-ssl-tls-encryption-L85.conf': NO_SUCH_PROFILE,
    'docs/enabling-username-password-authentication-L110.conf': SERVES,
    'docs/enabling-username-password-authentication-L94.conf': SERVES,
    'docs/enabling-vhost-policies-L36.conf': SERVES,
    'docs/exploring-default-router-configuration-file-L49.conf': SERVES,
    'docs/handling-undeliverable-messages-for-address-L50.conf': SERVES,
    'docs/handling-undeliverable-messages-for-address-L63.conf': SERVES,
    'docs/handling-undeliverable-messages-for-address-L81.conf': SERVES,
    'docs/integrating-with-kerberos-L70.conf': SERVES,
    'docs/integrating-with-kerberos-L83.conf': SERVES,
    'docs/link-route-example-L50.conf': SERVES,
    'docs/listening-client-connections-L45.conf': FAILOVER_URLS,
    'docs/reliability-L110.conf': SERVES,
    'docs/reliability-L217.conf': SERVES,
    'docs/reliability-L254.conf': SERVES,
    'docs/reliability-L303.conf': SERVES,
    'docs/reliability-L53.conf': SERVES,
    'docs/reliability-L583.conf': SERVES,
    'docs/reliability-L85.conf': SERVES,
    'docs/routing-messages-through-broker-queues-L102.conf': SERVES,
    'docs/routing-messages-through-broker-queues-L40.conf': SERVES,
    'docs/routing-messages-through-broker-queues-L77.conf': SERVES,
    'docs/securing-connections-between-routers-L115.conf': NO_SUCH_PROFILE,
    'docs/securing-connections-between-routers-L56.conf': SERVES,
    'docs/securing-connections-between-routers-L93.conf': NO_INTER_ROUTER_PROFILE,
    'docs/setting-global-connection-limits-L38.conf': SERVES,
    'docs/setting-resource-limits-outgoing-connections-L44.conf': GROUPS_NOT_JSON,
    'docs/setting-resource-limits-outgoing-connections-L73.conf': SERVES,
    'docs/setting-up-access-web-console-L40.conf': SERVES,
    'docs/setting-up-access-web-console-L66.conf': SERVES,
    'etc/qdrouterd.conf': SERVES,
    'tests/c_benchmarks/minimal_silent.conf': SERVES,
    'tests/c_unittests/minimal_silent.conf': SERVES,
    'tests/c_unittests/minimal_trace.conf': SERVES,
    'tests/config-0-empty/qdrouterd-empty.conf': SERVES,
    'tests/config-1/A.conf': SERVES,
    'tests/config-1/A.json': SERVES,
    'tests/config-2-broker/A.conf': SERVES,
    'tests/config-2-broker/B.conf': SERVES,
    'tests/config-2-edge/EDGE25.conf': SERVES,
    'tests/config-2-edge/INTA.conf': SERVES,
    'tests/config-2-edge/INTB.conf': SERVES,
    'tests/config-2/A-ssl.conf.in': SERVES,
    'tests/config-2/A.conf': SERVES,
    'tests/config-2/B-ssl.conf.in': SERVES,
    'tests/config-2/B.conf': SERVES,
    'tests/config-3-linear/A.conf': SERVES,
    'tests/config-3-linear/B.conf': SERVES,
    'tests/config-3-linear/C.conf': SERVES,
    'tests/config-6/A.conf': SERVES,
    'tests/config-6/B.conf': SERVES,
    'tests/config-6/C.conf': SERVES,
    'tests/config-6/D.conf': SERVES,
    'tests/config-6/X.conf': SERVES,
    'tests/config-6/Y.conf': SERVES,
    'tests/config-console/A.conf': SERVES,
    'tests/dummy.conf': SERVES,
    'tests/one-router-policy/default.json': SERVES,
    'tests/policy-1/management-access.json': SERVES,
    'tests/policy-1/policy-boardwalk.json': SERVES,
    'tests/policy-1/policy-boardwalk.json.in': SERVES,
    'tests/policy-1/policy-safari.json': SERVES,
    'tests/policy-1/policy-safari.json.in': SERVES,
    'tests/policy-1/test-policy-conf-includes-folder.conf.in': SERVES,
    'tests/policy-2/test-router-with-policy.json.in': SERVES,
    'tests/policy-3/test-sender-receiver-limits.json': SERVES,
    'tests/policy-4/management-access.json': SERVES,
    'tests/policy-5/permissive-default.json': SERVES,
    'tests/policy-7/permissive-default-link-pattern.json': SERVES,
    'tests/policy-8/management-access.json': SERVES,
    'tests/policy-authz/default.json': SERVES,
    'tests/threads4.conf': SERVES,
}

# Files that are not router configurations, with the reason (they stay out of the counts).
NOT_CONFIGS = {
    "etc/sasl2/qdrouterd.conf": "Cyrus SASL's own configuration (a router reads it through "
                                "saslConfigDir), not a router configuration",
    "tests/policy-2/policy-photoserver-sasl.conf.in": "Cyrus SASL's own configuration (a router "
                                                      "reads it through saslConfigDir), not a "
                                                      "router configuration",
}

CERT_KEYS = {"certfile", "cacertfile", "certdb", "trustedcerts", "trustedcertsfile"}
KEY_KEYS = {"privatekeyfile", "keyfile"}
DIR_KEYS = {"policydir", "saslconfigdir", "saslconfigpath", "httprootdir"}
FILE_KEYS = {"outputfile", "debugdump", "displaynamefile"} | CERT_KEYS | KEY_KEYS
PASSWORD_KEYS = {"password", "saslpassword"}
AUTH_KEYS = {"authenticatepeer", "requirepeerauth"}
NET_ENTITIES = {"listener", "connector"}
ABSOLUTE_PATH_RE = re.compile(r"(?<![\w.:])/(?:etc|usr|var|opt|home|path|tmp|run)/")


def corpus_files():
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*")
                  if p.is_file() and re.search(r"\.(conf|json)(\.in)?$", p.name))


def norm(key):
    return key.replace("-", "").replace("_", "").lower()


def strip_json_comments(text):
    return "\n".join("" if ln.lstrip().startswith("#") else ln for ln in text.split("\n"))


def is_policy_file(text):
    """A vhost policy file: qdrouterd's JSON form holding only vhost entities."""
    if text.lstrip().startswith("#") or text.lstrip().startswith("["):
        try:
            ents = json.loads(strip_json_comments(text))
        except ValueError:
            return False
        return isinstance(ents, list) and bool(ents) and all(
            isinstance(e, list) and e and e[0] == "vhost" for e in ents)
    return False


class Prepared:
    """One corpus file rewritten to run here (see the module comment)."""

    def __init__(self, tmp, keypair):
        self.tmp = tmp
        self.keypair = keypair
        self.files = tmp / "files"
        self.files.mkdir(exist_ok=True)
        self.listeners = []  # [(port, is_http)]
        self.auth_ports = set()  # the listeners' with authenticatePeer or no ANONYMOUS
        self.suffix = ".conf"
        self._key, self._key_password = None, None  # this entity's private key and password

    def end_entity(self):
        """An entity that names a private key and gives its password in clear (not file:,
        env: or pass:) gets the key encrypted with that password, as its file expects."""
        key, password = self._key, self._key_password
        self._key, self._key_password = None, None
        if key and password and password != PASSWORD and shutil.which("openssl"):
            subprocess.run(["openssl", "pkey", "-in", key, "-passin", "pass:" + PASSWORD,
                            "-aes256", "-passout", "pass:" + password, "-out", key + ".new"],
                           check=True, capture_output=True)
            os.replace(key + ".new", key)

    # ---- values ----
    def local_path(self, value, kind):
        """A path in the tmp dir for an absolute path of the file (kind: file, dir)."""
        if not value.startswith("/"):
            return value  # relative: to the router's working directory, the tmp dir
        p = Path(value)
        if str(p).startswith(str(self.tmp)):
            target = p
        else:
            target = self.files / (p.name or "root")
        if kind == "dir":
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
        return str(target)

    def value(self, entity, key, value):
        """The rewritten value of attribute `key` of `entity`, or None to keep it."""
        k = norm(key)
        ent = norm(entity)
        if k == "port":
            port = free_port()
            if ent == "listener":
                self._listener_port = port
            return str(port)
        if k in ("host", "addr") and ent in NET_ENTITIES:
            return "127.0.0.1"
        if k in DIR_KEYS and value:
            return self.local_path(value, "dir")
        if k == "outputfile" and value in ("stderr", "stdout", "syslog"):
            return None
        if k in FILE_KEYS and value:
            path = self.local_path(value, "file")
            if k in CERT_KEYS:
                shutil.copyfile(self.keypair[0], path)
            elif k in KEY_KEYS:
                shutil.copyfile(self.keypair[1], path)
                self._key = path
            return path
        if k == "password" and value and not re.match(r"^(file|env|pass|literal):", value):
            self._key_password = value
        if k in PASSWORD_KEYS and value.startswith("file:"):
            path = self.local_path(value[5:], "file")
            Path(path).write_text(PASSWORD + "\n")
            return "file:" + path
        return None

    # ---- the two dialects ----
    def rewrite_conf(self, text):
        out = []
        entity = None
        depth = 0
        http = auth = False
        for line in text.split("\n"):
            s = line.strip()
            m = re.match(r"^([\w$.-]+)\s*:\s*(.*)$", s)
            if depth == 0:
                em = re.match(r"^([\w.-]+)\s*\{$", s)
                if em:
                    entity, depth, http, auth = em.group(1), 1, False, False
                    self._listener_port = None
            elif s.endswith("{"):
                depth += 1
            elif s.startswith("}"):
                depth -= 1
                if depth == 0:
                    self.end_entity()
                if depth == 0 and norm(entity or "") == "listener":
                    self.listeners.append((self._listener_port, http))
                    if auth:
                        self.auth_ports.add(self._listener_port)
            elif depth == 1 and m and not s.startswith("#"):
                key, val = m.group(1), m.group(2).split("#")[0].strip()
                if norm(key) in ("http",) and val.lower() in ("true", "yes", "on", "1"):
                    http = True
                if norm(key) == "httprootdir" and val:
                    http = True
                if norm(key) in AUTH_KEYS and val.lower() in ("true", "yes", "on", "1"):
                    auth = True
                if norm(key) == "saslmechanisms" and "ANONYMOUS" not in val.upper():
                    auth = True  # an anonymous client cannot get past its SASL layer
                new = self.value(entity, key, val)
                if new is not None:
                    indent = line[:len(line) - len(line.lstrip())]
                    line = "%s%s: %s" % (indent, key, new)
            out.append(line)
        text = "\n".join(out)
        if not self.listeners:
            port = free_port()
            self.listeners.append((port, False))
            text += "\n\n# added by the test: a listener to check\nlistener {\n" \
                    "    host: 127.0.0.1\n    port: %d\n}\n" % port
        return text

    def rewrite_json(self, text):
        self.suffix = ".json"
        ents = json.loads(strip_json_comments(text))
        for ent in ents:
            etype, attrs = ent[0], ent[1]
            self._listener_port = None
            http = False
            for key in list(attrs):
                val = attrs[key]
                if norm(key) == "http" and str(val).lower() in ("true", "yes", "on", "1"):
                    http = True
                if norm(key) == "httprootdir" and val:
                    http = True
                if isinstance(val, (str, int)) and not isinstance(val, bool):
                    new = self.value(etype, key, str(val))
                    if new is not None:
                        attrs[key] = new
            self.end_entity()
            if norm(etype) == "listener":
                self.listeners.append((self._listener_port, http))
                if any((norm(k) in AUTH_KEYS and str(v).lower() in ("true", "yes", "on", "1"))
                       or (norm(k) == "saslmechanisms" and "ANONYMOUS" not in str(v).upper())
                       for k, v in attrs.items()):
                    self.auth_ports.add(self._listener_port)
        if not self.listeners:
            port = free_port()
            self.listeners.append((port, False))
            ents.append(["listener", {"host": "127.0.0.1", "port": str(port)}])
        return "[\n" + ",\n".join("  " + json.dumps(e) for e in ents) + "\n]\n"

    def rewrite(self, text):
        if strip_json_comments(text).lstrip()[:1] in ("[", "{"):
            return self.rewrite_json(text)
        return self.rewrite_conf(text)


def cmake_configure(text, build, home):
    """CMake's configure_file() on a template: ${VAR} and @VAR@ replaced, the binary and source
    dirs by the build tree (see build_tree), the install prefix by a dir of the tmp dir; a
    variable the test does not know fails."""
    values = {"CMAKE_CURRENT_BINARY_DIR": str(build), "CMAKE_CURRENT_SOURCE_DIR": str(build),
              "QPID_DISPATCH_HOME_INSTALLED": str(home)}

    def sub(m):
        name = m.group(1) or m.group(2)
        assert name in values, "a CMake variable the test does not know: %s" % name
        return values[name]
    return re.sub(r"\$\{(\w+)\}|@(\w+)@", sub, text)


def build_tree(tmp):
    """The corpus's tests/ folder as qpid-dispatch's build tree holds it: .in templates
    configured (policy JSON templates as its policy tests fill them)."""
    build = tmp / "build"
    home = tmp / "home"
    if not build.exists():
        shutil.copytree(CORPUS / "tests", build)
        for p in list(build.rglob("*.in")):
            text = cmake_configure(p.read_text(), build, home)
            text = text.replace("{IPV6_LOOPBACK}", ", ::1")  # system_tests_policy.py
            p.with_suffix("").write_text(text)
            p.unlink()
    return build, home


@pytest.fixture(scope="module")
def keypair(tmp_path_factory):
    """A self-signed certificate (its own CA) and its private key, encrypted with PASSWORD,
    made now: the corpus's certificates and keys are not committed."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    if shutil.which("openssl"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-passout", "pass:" + PASSWORD,
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
    else:
        cert.write_text("")
        key.write_text("")
    return cert, key


def prepare(rel, tmp, keypair):
    """(Prepared, the config text to start) for corpus file `rel`."""
    build, home = build_tree(tmp)
    text = (CORPUS / rel).read_text()
    if rel.endswith(".in"):
        text = cmake_configure(text, build, home).replace("{IPV6_LOOPBACK}", ", ::1")
    prep = Prepared(tmp, keypair)
    if is_policy_file(text):
        # qdrouterd reads a vhost policy file from its policyDir
        pdir = tmp / "policies"
        pdir.mkdir()
        (pdir / Path(rel).name.replace(".in", "")).write_text(text)
        text = ("router {\n    mode: standalone\n    id: Policy.Test\n}\n"
                "listener {\n    host: 127.0.0.1\n    port: 0\n}\n"
                "policy {\n    enableVhostPolicy: true\n    policyDir: %s\n}\n" % pdir)
    config = prep.rewrite(text)
    left = ABSOLUTE_PATH_RE.findall(config.replace(str(tmp), "TMP"))
    assert not left, "a path outside the tmp dir is left in %s:\n%s" % (rel, config)
    return prep, config


def answers_amqp(port):
    """The listener answers an AMQP open: with its own open, or with vhost policy's refusal of
    an open whose hostname (127.0.0.1) no vhost of the file has (qdrouterd's condition)."""
    c = Client(timeout=10)
    try:
        conn = c.connect("amqp://127.0.0.1:%d" % port, wait=False)
        c.wait(lambda: conn.pn.state & Endpoint.REMOTE_ACTIVE or conn.remote_closed
               or conn.transport_closed, msg="the router's open")
        if conn.pn.state & Endpoint.REMOTE_ACTIVE:
            return True
        cond = conn.pn.remote_condition
        assert cond is not None, "closed without an open: %s" % conn.transport_condition
        assert (cond.name, cond.description) == ("amqp:resource-limit-exceeded",
                                                 "connection disallowed by local policy")
        return True
    finally:
        c.close()


def answers_sasl(port):
    """A listener with authenticatePeer answers the SASL layer: its header and a
    sasl-mechanisms frame (an anonymous client, as answers_amqp's, is refused there)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"AMQP\x03\x01\x00\x00")
        data = b""
        while len(data) < 19:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    # the header, then a frame of type 1 (SASL) whose body starts with descriptor 0x40
    return (data[:8] == b"AMQP\x03\x01\x00\x00" and data[13] == 1 and
            data[16:19] == b"\x00\x53\x40")


def answers_http(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return re.match(rb"HTTP/1\.[01] \d{3} ", data) is not None


def stop_signals_blocked(pid):
    """True once junctiond's main thread blocks SIGTERM (its stop signals are read from a
    signalfd from then on), whatever the configuration does with the log."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) & (1 << (15 - 1)))
    except OSError:
        pass
    return False


def wait_start(router, ports, timeout=20.0):
    """True once every port takes a TCP connection and SIGTERM would stop junctiond as an
    operator's does, False when junctiond exited first.  (A file with no listeners has no
    port to wait for: a SIGTERM sent before main() blocks the stop signals kills it.)"""
    deadline = time.monotonic() + timeout
    pending = list(ports)
    while pending or not stop_signals_blocked(router.proc.pid):
        if router.proc.poll() is not None:
            return False
        if pending:
            try:
                socket.create_connection(("127.0.0.1", pending[0]), timeout=1).close()
                pending.pop(0)
                continue
            except OSError:
                pass
        assert time.monotonic() < deadline, "junctiond neither served %s nor stopped:\n%s" % (
            pending, router.stderr_text())
        time.sleep(0.05)
    return True


def observe(rel, tmp, keypair):
    """Start junctiond on corpus file `rel`; returns SERVES or "refused: <its one line>"."""
    prep, config = prepare(rel, tmp, keypair)
    r = Router(tmp, [], name="corpus")
    r.config_path = tmp / ("corpus" + prep.suffix)
    r.start(wait=False, config_text=config)
    try:
        if wait_start(r, [p for p, _ in prep.listeners]):
            for port, http in prep.listeners:
                if http:
                    assert answers_http(port), "http listener %d does not answer" % port
                elif port in prep.auth_ports:
                    assert answers_sasl(port), "listener %d does not answer SASL" % port
                else:
                    assert answers_amqp(port)
            status = r.stop()
            problems = r.problems()
            assert not problems, "%s\n%s" % (problems, r.stderr_text())
            assert status == 0
            return SERVES
        r.stop()
        text = r.stderr_text()
        assert sanitizer_report(text) is None, text
        assert r.returncode not in (0, None) and r.returncode > 0, (r.returncode, text)
        lines = [ln for ln in text.split("\n") if ln.strip() and "(warning)" not in ln]
        assert len(lines) == 1, "want one line, got:\n%s\n---- config:\n%s" % (text, config)
        return "refused: " + lines[0]
    finally:
        if r.is_running():
            r.stop()


OBSERVED = {}


def test_table_lists_every_file():
    files = set(corpus_files())
    listed = set(EXPECTED) | set(NOT_CONFIGS)
    assert files - listed == set(), "files of the corpus missing in EXPECTED"
    assert listed - files == set(), "EXPECTED names files the corpus does not have"
    assert not set(EXPECTED) & set(NOT_CONFIGS)


@pytest.mark.deadline(120)
@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_corpus_file(rel, tmp_path, keypair):
    got = observe(rel, tmp_path, keypair)
    want = EXPECTED[rel]
    if want == SERVES:
        OBSERVED[rel] = got
        assert got == SERVES, "%s no longer serves: %s" % (rel, got)
        return
    assert want.startswith("refused: ")
    feature = want[len("refused: "):]
    OBSERVED[rel] = got if got == SERVES else "refused: " + feature
    assert got != SERVES, ("%s serves now: set its line in EXPECTED to SERVES (the count "
                           "goes up)" % rel)
    assert feature in got, "%s: want the line to name %r, got %r" % (rel, feature, got)
    assert "corpus.conf: " in got or "corpus.json: " in got, "the line names no file: " + got


def test_corpus_summary():
    """The counts (this file's EXPECTED, and what this run saw when it ran every file)."""
    by = collections.Counter(v for v in EXPECTED.values())
    serves = by.pop(SERVES, 0)
    lines = ["corpus: %d files, %d serve, %d refused (one line, counted by its reason below), "
             "%d not router configurations" % (len(EXPECTED) + len(NOT_CONFIGS), serves,
                                               sum(by.values()), len(NOT_CONFIGS))]
    for feature, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append("  %3d  %s" % (n, feature))
    if len(OBSERVED) == len(EXPECTED):
        seen = sum(1 for v in OBSERVED.values() if v == SERVES)
        lines.append("this run: %d of %d files served" % (seen, len(OBSERVED)))
        assert seen == serves
    print("\n" + "\n".join(lines))
    assert serves >= 1
