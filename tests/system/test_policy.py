"""Vhost policies (router/policy.c): qdrouterd 1.19's policy engine with real Proton clients
authenticated through SASL users of a sasldb made here with saslpasswd2.

The vhost is chosen by the open's hostname (Proton's virtual_host), else defaultVhost; the
user's group by name, `*` or `$default`; the remote host by remoteHosts.  Denials carry
qdrouterd's conditions and descriptions (amqp:resource-limit-exceeded "connection disallowed by
local policy", amqp:unauthorized-access or amqp:resource-limit-exceeded "link disallowed by
local policy", "session disallowed by local policy") and are logged once each."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest
from proton import Delivery, Message

from clients import Client
from conftest import REPO_ROOT, free_port
from meshnet import stop_process
from qdr_peer import start_standalone

REALM = "example.com"
PASSWORD = "pw-Policy-1"
USERS = ["alice", "bob", "carol", "dave"]

pytestmark = pytest.mark.skipif(shutil.which("saslpasswd2", path=os.environ.get("PATH", "") +
                                             ":/usr/sbin:/sbin") is None,
                                reason="saslpasswd2 (Debian package sasl2-bin) is not installed")

CONN_DENIED = ("amqp:resource-limit-exceeded", "connection disallowed by local policy")
LINK_UNAUTH = ("amqp:unauthorized-access", "link disallowed by local policy")
LINK_LIMIT = ("amqp:resource-limit-exceeded", "link disallowed by local policy")


def user(name):
    return "%s@%s" % (name, REALM)


@pytest.fixture
def sasl_dir(tmp_path):
    d = tmp_path / "sasl"
    d.mkdir()
    exe = shutil.which("saslpasswd2", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    for u in USERS:
        subprocess.run([exe, "-c", "-p", "-f", str(d / "users.sasldb"), "-u", REALM, u],
                       input=PASSWORD + "\n", text=True, check=True, timeout=30)
    (d / "junction.conf").write_text("pwcheck_method: auxprop\nauxprop_plugin: sasldb\n"
                                     "sasldb_path: %s\nmech_list: PLAIN ANONYMOUS\n"
                                     % (d / "users.sasldb"))
    return d


# Two vhosts: "photoserver" (alice and bob in "users"; carol in "admins"; unknown users get
# $default), and "strict" (only alice, only from 10.0.0.0/8).
PHOTOSERVER = {
    "hostname": "photoserver",
    "maxConnections": 50,
    "maxConnectionsPerUser": 2,
    "maxConnectionsPerHost": 20,
    "allowUnknownUser": True,
    "groups": {
        "users": {
            "users": "%s, %s" % (user("alice"), user("bob")),
            "remoteHosts": "*",
            "maxSessions": 2,
            "maxSenders": 2,
            "maxReceivers": 2,
            "maxFrameSize": 4096,
            "sources": "public, private.${user}, tmp-*",
            "targets": "public, ${user}.inbox",
        },
        "admins": {
            "users": user("carol"),
            "remoteHosts": "127.0.0.1",
            "allowDynamicSource": True,
            "allowAnonymousSender": True,
            "allowWaypointLinks": False,
            "maxMessageSize": 1000,
            "sourcePattern": "admin.#, ${user}.#",
            "targetPattern": "admin.#",
        },
        "$default": {
            "remoteHosts": "*",
            "sources": "public",
            "targets": "",
        },
    },
}
STRICT = {
    "hostname": "strict",
    "groups": {"only": {"users": user("alice"), "remoteHosts": "10.0.0.0-10.255.255.255",
                        "sources": "*", "targets": "*"}},
}


def policy_router(make_router, sasl_dir, default_vhost="", extra=(), **listen):
    """A router with vhost policy, PHOTOSERVER, STRICT and the vhosts of `extra`; `listen` is
    make_router's listener= or listeners= (default: one listener, PLAIN and ANONYMOUS)."""
    policy = {"enableVhostPolicy": True, "defaultVhost": default_vhost}
    return make_router(router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
                       **(listen or {"listener": {"saslMechanisms": "PLAIN ANONYMOUS"}}),
                       extra=[["policy", policy], ["vhost", PHOTOSERVER], ["vhost", STRICT],
                              *extra],
                       logs=[["log", {"module": "POLICY", "enable": "info+"}]])


def connect(client, r, who, vhost, wait=True):
    kw = {"virtual_host": vhost}
    if who == "anonymous":
        kw["allowed_mechs"] = "ANONYMOUS"
    else:
        kw.update(user=user(who), password=PASSWORD, allowed_mechs="PLAIN")
    return client.connect(r.url, wait=wait, **kw)


def refused_with(conn, want):
    conn.wait_closed_by_peer()
    cond = conn.pn.remote_condition
    assert cond is not None, "closed without a condition"
    assert (cond.name, cond.description) == want


def link_refused(link, want):
    assert link.wait_remote_closed(), "link %s not refused" % link.pn.name
    cond = link.remote_condition
    assert cond is not None
    assert (cond.name, cond.description) == want


def count_log(r, text):
    return sum(1 for line in r.stderr_lines() if text in line)


def test_vhost_by_hostname_group_by_user(make_router, sasl_dir):
    r = policy_router(make_router, sasl_dir)
    c = Client()
    try:
        # alice is in "users" of photoserver: admitted, its routes work
        a = connect(c, r, "alice", "photoserver")
        rcv = a.receiver("public", settle="accept")
        snd = a.sender("public")
        snd.send(Message(body="hello"))
        assert rcv.get().body == "hello"
        # the group's maxFrameSize is the open's
        assert a.pn.transport.remote_max_frame_size == 4096
        # a hostname no vhost has, and no defaultVhost: refused
        n = connect(c, r, "alice", "nosuchhost", wait=False)
        refused_with(n, CONN_DENIED)
        r.wait_log(r"DENY AMQP Open for user '%s', rhost '127\.0\.0\.1', vhost 'nosuchhost': "
                   r"No policy defined for vhost" % user("alice"))
        # strict: alice only from 10/8
        s = connect(c, r, "alice", "strict", wait=False)
        refused_with(s, CONN_DENIED)
        r.wait_log("User is not allowed to connect from this network host")
        # strict has no unknown users: bob is refused
        b = connect(c, r, "bob", "strict", wait=False)
        refused_with(b, CONN_DENIED)
        r.wait_log("User is not in a user group and unknown users are denied")
        # each denial logged once
        assert count_log(r, "vhost 'nosuchhost': No policy defined") == 1
    finally:
        c.close()


def test_default_vhost_and_unknown_users(make_router, sasl_dir):
    r = policy_router(make_router, sasl_dir, default_vhost="photoserver")
    c = Client()
    try:
        # an unknown hostname falls back on defaultVhost; dave is in no group: $default
        d = connect(c, r, "dave", "elsewhere")
        rcv = d.receiver("public")
        assert not rcv.is_remote_closed()
        # $default has no targets: a sender is refused
        link_refused(d.sender("public"), LINK_UNAUTH)
        # anonymous (no SASL user) is an unknown user too
        an = connect(c, r, "anonymous", "photoserver")
        link_refused(an.receiver("private"), LINK_UNAUTH)
    finally:
        c.close()


def test_connection_limits_per_user(make_router, sasl_dir):
    r = policy_router(make_router, sasl_dir)
    c = Client()
    try:
        first = [connect(c, r, "bob", "photoserver") for _ in range(2)]
        third = connect(c, r, "bob", "photoserver", wait=False)
        refused_with(third, CONN_DENIED)
        r.wait_log("Connection denied by application per user limit")
        # alice is counted apart
        connect(c, r, "alice", "photoserver")
        # one of bob's ends: bob may connect again
        first[0].close()
        connect(c, r, "bob", "photoserver")
    finally:
        c.close()


def test_link_rules(make_router, sasl_dir):
    r = policy_router(make_router, sasl_dir)
    c = Client()
    try:
        a = connect(c, r, "alice", "photoserver")
        # sources: public, private.${user}, tmp-*
        a.receiver("private." + user("alice"))
        link_refused(a.receiver("private." + user("bob")), LINK_UNAUTH)
        b = connect(c, r, "bob", "photoserver")
        b.receiver("tmp-anything")
        link_refused(b.receiver("tmpx"), LINK_UNAUTH)
        # targets: public, ${user}.inbox
        b.sender(user("bob") + ".inbox")
        link_refused(b.sender(user("alice") + ".inbox"), LINK_UNAUTH)
        # no anonymous sender, no dynamic source for "users"
        link_refused(b.sender(None), LINK_UNAUTH)
        link_refused(b.receiver(dynamic=True), LINK_UNAUTH)
        # maxReceivers 2: bob has one receiver (tmp-anything) open; the second is admitted,
        # a third refused with resource-limit-exceeded
        b.receiver("public")
        link_refused(b.receiver("public"), LINK_LIMIT)
        r.wait_log("DENY AMQP Attach receiver link 'public' for user '%s'.*maxReceivers"
                   % user("bob"))

        # carol (admins): patterns, dynamic source, anonymous sender, no waypoints
        k = connect(c, r, "carol", "photoserver")
        k.receiver("admin.a.b")
        k.receiver(user("carol") + ".x")
        link_refused(k.receiver("other.x"), LINK_UNAUTH)
        k.receiver(dynamic=True)
        k.sender(None)
        k.sender("admin.q")
        link_refused(k.sender("elsewhere"), LINK_UNAUTH)
    finally:
        c.close()


def test_sessions_limit(make_router, sasl_dir):
    r = policy_router(make_router, sasl_dir)
    c = Client()
    try:
        a = connect(c, r, "alice", "photoserver")
        # maxSessions 2 is the open's channel-max (1)
        assert a.pn.transport.remote_channel_max == 1
    finally:
        c.close()


def test_max_message_size_of_the_group(make_router, sasl_dir):
    r = policy_router(make_router, sasl_dir)
    c = Client()
    try:
        k = connect(c, r, "carol", "photoserver")
        snd = k.sender("admin.big")
        k.receiver("admin.big")
        snd.send(Message(body="x" * 2000), wait_credit=True)
        assert snd.wait_remote_closed()
        assert snd.remote_condition.name == "amqp:link:message-size-exceeded"
        assert "1000 bytes" in snd.remote_condition.description
    finally:
        c.close()


def test_message_rules(make_router, sasl_dir):
    """allowUserIdProxy false: a message whose user-id is not the connection's user is
    rejected; an anonymous sender's messages go only to its targets (qdrouterd's outcomes)."""
    r = policy_router(make_router, sasl_dir)
    c = Client()
    try:
        k = connect(c, r, "carol", "photoserver")
        rcv = k.receiver("admin.x", settle="accept")
        anon = k.sender(None)
        d = anon.send(Message(address="admin.x", body="to a target"))
        assert anon.wait_outcome(d) == Delivery.ACCEPTED
        assert rcv.get().body == "to a target"
        d = anon.send(Message(address="elsewhere", body="not a target"))
        assert anon.wait_outcome(d) == Delivery.REJECTED
        assert d.remote.condition.name == "amqp:unauthorized-access"
        assert d.remote.condition.description == "policy violation on target"
        snd = k.sender("admin.x")
        d = snd.send(Message(user_id=user("carol").encode(), body="mine"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        d = snd.send(Message(user_id=b"someone-else", body="proxied"))
        assert snd.wait_outcome(d) == Delivery.REJECTED
        assert d.remote.condition.description == "user_id proxy violation"
        assert rcv.get().body == "mine"
    finally:
        c.close()


def test_message_rules_on_messages_in_several_frames(make_router, sasl_dir):
    """The same rules when the properties come in a later frame than the message's start, or
    cut by a frame's end: the router reads them where they arrived (zero-copy input keeps a
    message of several frames in its read buffers) or from a joined copy.  The annotations
    before them move the properties across the first 16 KiB frame's end a few bytes at a
    time."""
    bulk = {"hostname": "bulk",
            "groups": {"admins": {"users": user("carol"), "remoteHosts": "127.0.0.1",
                                  "allowAnonymousSender": True, "sourcePattern": "admin.#",
                                  "targetPattern": "admin.#"}}}
    r = policy_router(make_router, sasl_dir, extra=[["vhost", bulk]])
    c = Client()
    try:
        k = connect(c, r, "carol", "bulk")
        rcv = k.receiver("admin.x", settle="accept")
        snd = k.sender("admin.x")
        anon = k.sender(None)
        sent = 0
        for pad in range(16150, 16500, 13):  # about the annotations' bytes (98 a pair)
            ann = {"k%03d" % i: "v" * 90 for i in range(pad // 98)}
            ann["tail"] = "t" * (pad % 98)
            m = Message(user_id=user("carol").encode(), annotations=ann, body="mine %d" % pad)
            d = snd.send(m)
            assert snd.wait_outcome(d) == Delivery.ACCEPTED, pad
            d = snd.send(Message(user_id=b"someone-else", annotations=ann, body="proxied"))
            assert snd.wait_outcome(d) == Delivery.REJECTED, pad
            assert d.remote.condition.description == "user_id proxy violation"
            d = anon.send(Message(address="elsewhere", annotations=ann, body="not a target"))
            assert anon.wait_outcome(d) == Delivery.REJECTED, pad
            assert d.remote.condition.description == "policy violation on target"
            d = anon.send(Message(address="admin.x", annotations=ann, body="to %d" % pad))
            assert anon.wait_outcome(d) == Delivery.ACCEPTED, pad
            for body in ("mine %d" % pad, "to %d" % pad):
                got = rcv.get()
                assert got.body == body
                assert {k: v for k, v in got.message.annotations.items()
                        if not k.startswith("x-opt-qd.")} == ann
            sent += 1
        assert sent == 27
    finally:
        c.close()


# ---- management: qdstat --vhosts/--vhostgroups/--vhoststats, qdmanage on vhost ----------

PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"
# the management tools' vhost: what qdrouterd 1.19's management-access.json gives them
MGMT_VHOST = {
    "hostname": "mgmt",
    "allowUnknownUser": True,
    "groups": {"$default": {"users": "*", "remoteHosts": "*", "allowDynamicSource": True,
                            "allowAnonymousSender": True, "sources": "$management",
                            "targets": "$management"}},
}


def tool(name):
    exe = PEER_BIN / name
    if not exe.exists():
        pytest.skip("the reference %s is not in ../shared/peer (%s)" % (name, exe))
    return exe


def run_tool(name, r, *args, listener=1, pump=None):
    """The real qdstat/qdmanage on listener 1 (policyVhost mgmt) or `listener`.  pump: a
    Client whose connections are kept serviced while the tool runs.  Each run takes seconds
    on a loaded machine, and a test's client that goes unserviced through several of them
    sends no heartbeat: the router closes it when its idle timeout (16 s) expires."""
    h, p = r.addresses[listener]
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([str(tool(name)), "-b", "%s:%d" % (h, p)] + list(args),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                text=True, env=dict(os.environ, PYTHONPATH=""))
        try:
            if pump is not None:
                pump.run_for(60, stop=lambda: proc.poll() is not None)
            rc = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        return rc, out.read()


def mgmt_router(make_router, sasl_dir):
    return policy_router(make_router, sasl_dir, extra=[["vhost", MGMT_VHOST]],
                         listeners=[{"host": "127.0.0.1", "port": "0",
                                     "saslMechanisms": "PLAIN ANONYMOUS"},
                                    {"host": "127.0.0.1", "port": "0", "policyVhost": "mgmt"}])


def table(text, title):
    """qdstat's table under `title`: a list of dicts by its header."""
    lines = text.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip() == title)
    head = next(k for k in range(i, len(lines)) if lines[k].strip().startswith("===="))
    cols = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", lines[head - 1])]
    rows = []
    for line in lines[head + 1:]:
        if not line.strip():
            break
        rows.append({name: line[a:cols[k + 1][0] if k + 1 < len(cols) else None].strip()
                     for k, (a, name) in enumerate(cols)})
    return rows


def test_qdstat_vhosts_groups_and_stats(make_router, sasl_dir):
    r = mgmt_router(make_router, sasl_dir)
    c = Client()
    try:
        connect(c, r, "alice", "photoserver")
        refused_with(connect(c, r, "bob", "strict", wait=False), CONN_DENIED)
        b = connect(c, r, "bob", "photoserver")
        link_refused(b.sender("nowhere"), LINK_UNAUTH)

        rc, out = run_tool("qdstat", r, "--vhosts", pump=c)
        assert rc == 0, out
        rows = {x["hostname"]: x for x in table(out, "Vhosts")}
        assert set(rows) == {"photoserver", "strict", "mgmt"}
        assert rows["photoserver"]["maxConnections"] == "50"
        assert rows["photoserver"]["maxConnectionsPerUser"] == "2"
        assert rows["photoserver"]["allowUnknownUser"] == "True"
        assert rows["photoserver"]["groups"] == "3"

        rc, out = run_tool("qdstat", r, "--vhostgroups", pump=c)
        assert rc == 0, out
        groups = {(x["vhost"], x["group"]): x for x in table(out, "Vhost Groups")}
        assert groups[("photoserver", "users")]["maxSenders"] == "2"
        assert groups[("photoserver", "admins")]["allowDynamicSource"] == "True"
        assert "Vhost 'photoserver' UserGroup 'users'" in out

        rc, out = run_tool("qdstat", r, "--vhoststats", pump=c)
        assert rc == 0, out
        stats = {x["hostname"]: x for x in table(out, "Vhost Stats")}
        assert stats["photoserver"]["connectionsApproved"] == "2"
        assert stats["photoserver"]["connectionsCurrent"] == "2"
        assert stats["photoserver"]["senderDenied"] == "1"
        assert stats["strict"]["connectionsDenied"] == "1"
        users = [x for x in table(out, "Vhost User Stats") if x["vhost"] == "photoserver"]
        assert {x["user"] for x in users} == {user("alice"), user("bob")}
        # denials per user (Junction's perUserDenied)
        rc, out = run_tool("qdmanage", r, "query", "--type=vhostStats", pump=c)
        assert rc == 0, out
        rows = {x["hostname"]: x for x in json.loads(out)}
        assert rows["photoserver"]["perUserDenied"] == {user("bob"): 1}
        assert rows["strict"]["perUserDenied"] == {user("bob"): 1}
    finally:
        c.close()


def test_qdmanage_vhost_changes_apply_at_once(make_router, sasl_dir):
    r = mgmt_router(make_router, sasl_dir)
    c = Client()
    try:
        refused_with(connect(c, r, "dave", "newhost", wait=False), CONN_DENIED)
        rc, out = run_tool("qdmanage", r, "create", "--type=vhost", "--name=newhost",
                           "hostname=newhost", "allowUnknownUser=true",
                           'groups={"$default": {"remoteHosts": "*", "sources": "a, b"}}', pump=c)
        assert rc == 0, out
        assert json.loads(out)["hostname"] == "newhost"
        d = connect(c, r, "dave", "newhost")  # admitted at once
        d.receiver("b")
        # UPDATE: the next connection gets the new rules; qdmanage reads them back
        rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=newhost",
                           'groups={"$default": {"remoteHosts": "*", "sources": "a"}}', pump=c)
        assert rc == 0, out
        assert json.loads(out)["groups"]["$default"]["sources"] == "a"
        d2 = connect(c, r, "dave", "newhost")
        link_refused(d2.receiver("b"), LINK_UNAUTH)
        d2.receiver("a")
        # a bad vhost is refused with the reason, and changes nothing
        rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=newhost",
                           "maxConnections=70000", pump=c)
        assert rc != 0 and "maxConnections" in out and "65535" in out, out
        # DELETE: the next open to it is refused
        # the hostname may be written 'id' (its old name), not both at once
        rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=newhost",
                           "id=newhost", "maxConnections=7", pump=c)
        assert rc == 0 and json.loads(out)["maxConnections"] == 7, out
        rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=newhost",
                           "id=newhost", "hostname=newhost", pump=c)
        assert rc != 0 and "given twice" in out, out
        # a vhost of the configuration is named vhost/<hostname> (qdrouterd's name for it)
        rc, out = run_tool("qdmanage", r, "read", "--type=vhost", "--name=vhost/strict", pump=c)
        assert rc == 0 and json.loads(out)["hostname"] == "strict", out
        rc, out = run_tool("qdmanage", r, "delete", "--type=vhost", "--name=newhost", pump=c)
        assert rc == 0, out
        refused_with(connect(c, r, "dave", "newhost", wait=False), CONN_DENIED)
        rc, out = run_tool("qdmanage", r, "query", "--type=vhost", pump=c)
        assert rc == 0 and "newhost" not in out, out
    finally:
        c.close()


def test_management_access_is_governed_by_policy(make_router, sasl_dir):
    """$management is an address like any other to policy (qdrouterd): the photoserver vhost
    lists no $management in its sources or targets, so its users cannot reach it; the mgmt
    vhost (qdrouterd's management-access.json's settings) can."""
    r = mgmt_router(make_router, sasl_dir)
    c = Client()
    try:
        a = connect(c, r, "alice", "photoserver")
        link_refused(a.sender("$management"), LINK_UNAUTH)
        rc, out = run_tool("qdstat", r, "-g", listener=0, pump=c)
        assert rc != 0  # qdstat's open names 127.0.0.1: no such vhost
        rc, out = run_tool("qdstat", r, "-g", pump=c)
        assert rc == 0 and "JTest" in out, out
    finally:
        c.close()


def test_allow_admin_status_update(make_router, sasl_dir):
    """A connection whose group has allowAdminStatusUpdate false may not close connections
    through management (qdrouterd's 403 "You are not allowed to perform this operation.");
    with it true (the default) it may."""
    r = mgmt_router(make_router, sasl_dir)
    c = Client()
    try:
        victim = connect(c, r, "alice", "photoserver")
        rc, out = run_tool("qdmanage", r, "query", "--type=connection", pump=c)
        assert rc == 0, out
        ids = [x["identity"] for x in json.loads(out) if x.get("user") == user("alice")]
        assert len(ids) == 1, out
        group = dict(MGMT_VHOST["groups"]["$default"], allowAdminStatusUpdate=False)
        rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=vhost/mgmt",
                           "groups=" + json.dumps({"$default": group}), pump=c)
        assert rc == 0, out
        rc, out = run_tool("qdmanage", r, "update", "--type=connection", "--identity=" + ids[0],
                           "adminStatus=deleted", pump=c)
        assert rc != 0 and "You are not allowed to perform this operation." in out, out
        assert not victim.remote_closed
        rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=vhost/mgmt",
                           "groups=" + json.dumps(MGMT_VHOST["groups"]), pump=c)
        assert rc == 0, out
        rc, out = run_tool("qdmanage", r, "update", "--type=connection", "--identity=" + ids[0],
                           "adminStatus=deleted", pump=c)
        assert rc == 0, out
        victim.wait_closed_by_peer()
    finally:
        c.close()


# Bad vhosts for CREATE, and qdmanage's answer from qdrouterd 1.19: 400 (BadRequestStatus) for
# what its schema refuses, 500 (InternalServerErrorStatus) for what its policy compiler refuses.
# Each: (qdmanage arguments after `create --type=vhost`, a JSON body for --stdin or None, the
# status class qdmanage prints, a text both routers' descriptions hold).
BAD_VHOSTS = [
    (["hostname=badjson", "groups={bad json"], None, "BadRequestStatus", ""),
    ([], {"hostname": "unknown", "frobnicate": 1}, "BadRequestStatus", "frobnicate"),
    ([], {"hostname": "range", "maxConnections": 70000}, "InternalServerErrorStatus",
     "maxConnections"),
    ([], {"hostname": "twogroups", "groups": {"a": {"users": "x"}, "b": {"users": "x"}}},
     "InternalServerErrorStatus", "'x'"),
    ([], {"hostname": "option", "groups": {"a": {"maxSenders": "abc"}}},
     "InternalServerErrorStatus", "maxSenders"),
    ([], {"hostname": "nodefault", "allowUnknownUser": True}, "InternalServerErrorStatus",
     "PolicyError: Policy 'nodefault' is invalid: "),
    ([], {"hostname": "dup"}, "BadRequestStatus", ""),  # after a first CREATE of "dup"
]


def qdmanage_create(addr, args, body):
    h, p = addr
    out = subprocess.run([str(tool("qdmanage")), "-b", "%s:%d" % (h, p), "create",
                          "--type=vhost"] + args + (["--stdin"] if body is not None else []),
                         input=json.dumps(body) if body is not None else "",
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=""))
    return out.returncode, out.stdout + out.stderr


def check_bad_vhosts(addr):
    """CREATE each of BAD_VHOSTS through the real qdmanage at addr: the answers, then that
    none of them was made."""
    rc, out = qdmanage_create(addr, [], {"hostname": "dup"})
    assert rc == 0, out
    answers = []
    for args, body, status, text in BAD_VHOSTS:
        rc, out = qdmanage_create(addr, args, body)
        last = out.strip().splitlines()[-1] if out.strip() else ""
        assert rc != 0, (args, body, out)
        answers.append(last)
        assert last.startswith(status + ": "), (args, body, out)
        assert text in last, (args, body, out)
    h, p = addr
    out = subprocess.run([str(tool("qdmanage")), "-b", "%s:%d" % (h, p), "query",
                          "--type=vhost"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=""))
    made = {x["hostname"] for x in json.loads(out.stdout)}
    bad = {(b or {}).get("hostname") for _, b, _, _ in BAD_VHOSTS} | {"badjson"}
    assert made & bad == {"dup"}, made
    return answers


def test_vhost_create_errors_as_qdrouterd(make_router, sasl_dir, tmp_path):
    """qdmanage CREATE of a bad vhost gets qdrouterd 1.19's status from both routers: 400 for
    what its schema refuses (a `groups` that is not JSON, an unknown attribute, a hostname that
    exists already), 500 for what its policy compiler refuses (maxConnections out of range, a
    user in two groups, a bad group option, allowUnknownUser without a $default group)."""
    r = mgmt_router(make_router, sasl_dir)
    junction = check_bad_vhosts(r.addresses[1])
    # Junction's descriptions name the attribute, the group and the option
    assert "attribute 'groups': user 'x' is in two groups, 'a' and 'b'" in junction[3]
    assert "expected an integer from 0 to 65535, got 70000" in junction[2]

    port = free_port()
    p = start_standalone(tmp_path / "qdr.json", [
        ["router", {"mode": "standalone", "id": "QDR"}],
        ["listener", {"host": "127.0.0.1", "port": port, "authenticatePeer": False,
                      "saslMechanisms": "ANONYMOUS"}],
        ["policy", {"enableVhostPolicy": False}],
    ], port)
    try:
        check_bad_vhosts(("127.0.0.1", port))
    finally:
        stop_process(p)


CONN_LINK_ROUTE = "org.apache.qpid.dispatch.router.connection.linkRoute"


def test_allow_dynamic_link_routes(make_router, sasl_dir, tmp_path):
    """allowDynamicLinkRoutes false: a connection of the group may not CREATE a
    connection-scoped link route (router.connection.linkRoute) through management - qdrouterd
    1.19's 403 "Forbidden" - counted for the user and logged once; true (the default) does not
    refuse it (qdrouterd makes the route; Junction, which has no connection-scoped link routes
    yet, says so).  The same two requests to a qdrouterd with the same vhosts get the same
    refusal."""
    r = mgmt_router(make_router, sasl_dir)
    group = dict(MGMT_VHOST["groups"]["$default"], allowDynamicLinkRoutes=False)
    rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=vhost/mgmt",
                       "groups=" + json.dumps({"$default": group}))
    assert rc == 0, out
    for t in (CONN_LINK_ROUTE, "router.connection.linkRoute"):
        rc, out = run_tool("qdmanage", r, "create", "--type=" + t, "pattern=a.#",
                           "direction=in")
        assert rc != 0 and out.strip().splitlines()[-1] == "ForbiddenStatus: Forbidden", out
    r.wait_log(r"POLICY \(info\) \[C\d+\] DENY management CREATE of a connection-scoped link "
               r"route for user 'anonymous', rhost '127\.0\.0\.1', vhost 'mgmt': "
               r"allowDynamicLinkRoutes is false", timeout=15)
    deadline = time.monotonic() + 15
    while count_log(r, "DENY management CREATE of a connection-scoped link route") < 2:
        assert time.monotonic() < deadline, r.stderr_lines()
        time.sleep(0.05)
    assert count_log(r, "DENY management CREATE of a connection-scoped link route") == 2
    rc, out = run_tool("qdmanage", r, "query", "--type=vhostStats")
    assert rc == 0, out
    rows = {x["hostname"]: x for x in json.loads(out)}
    assert rows["mgmt"]["perUserDenied"] == {"anonymous": 2}, rows["mgmt"]
    # allowed again (the default): not forbidden
    rc, out = run_tool("qdmanage", r, "update", "--type=vhost", "--name=vhost/mgmt",
                       "groups=" + json.dumps(MGMT_VHOST["groups"]))
    assert rc == 0, out
    rc, out = run_tool("qdmanage", r, "create", "--type=" + CONN_LINK_ROUTE, "pattern=a.#",
                       "direction=in")
    assert "Forbidden" not in out and "connection-scoped link routes" in out, out

    # qdrouterd: the refusal, and the route made when allowed
    port, port2 = free_port(), free_port()
    default = dict(MGMT_VHOST["groups"]["$default"], allowDynamicLinkRoutes=False)
    p = start_standalone(tmp_path / "qdr.json", [
        ["router", {"mode": "standalone", "id": "QDR"}],
        ["listener", {"host": "127.0.0.1", "port": port, "authenticatePeer": False,
                      "saslMechanisms": "ANONYMOUS"}],
        ["listener", {"host": "127.0.0.1", "port": port2, "authenticatePeer": False,
                      "saslMechanisms": "ANONYMOUS", "policyVhost": "mgmt"}],
        ["policy", {"enableVhostPolicy": True}],
        ["vhost", {"hostname": "$default", "allowUnknownUser": True,
                   "groups": {"$default": default}}],
        ["vhost", MGMT_VHOST],
    ], port)
    try:
        for pt, forbidden in ((port, True), (port2, False)):
            out = subprocess.run([str(tool("qdmanage")), "-b", "127.0.0.1:%d" % pt, "create",
                                  "--type=" + CONN_LINK_ROUTE, "pattern=a.#", "direction=in"],
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=60, env=dict(os.environ, PYTHONPATH=""))
            text = out.stdout + out.stderr
            if forbidden:
                assert out.returncode != 0 and \
                    text.strip().splitlines()[-1] == "ForbiddenStatus: Forbidden", text
            else:
                assert out.returncode == 0 and json.loads(out.stdout)["pattern"] == "a.#", text
    finally:
        stop_process(p)
