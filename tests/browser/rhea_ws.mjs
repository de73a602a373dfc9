// tests/browser/rhea_ws.mjs: an AMQP 1.0 client (rhea, the client qdrouterd's console used)
// that talks to junctiond over a WebSocket (tests/system/test_websocket.py, test_https.py) or
// over TCP with TLS and SASL PLAIN (amqps:// url, `username`, `password`: test_rhea_tls.py).
//
//   node rhea_ws.mjs '{"url": "ws://127.0.0.1:PORT/", "protocol": "binary", "mode": "send",
//                      "address": "closest.x", "count": 100}'
//
// Modes:
//   send      attach a sender to `address`, send `count` messages (body "msg-<i>",
//             application property seq=i) and wait until every one is settled;
//   receive   attach a receiver to `address` with `count` credit, print {"ready": true} once
//             it is attached, accept `count` messages;
//   roundtrip two WebSocket connections, the sender's with `protocol` and the receiver's with
//             `receive_protocol`: receiver first, then `count` messages through the router.
// Prints one JSON line per event ({"ready": true}, then the result: {"sent", "accepted",
// "outcomes"}, {"received": [bodies], "seq": [...]}) and exits 0; on an error or after
// `timeout` seconds (default 30) prints {"error": "..."} and exits 1.

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const rhea = require('rhea');
const WebSocket = require('ws');

const opts = JSON.parse(process.argv[2] || '{}');
const count = opts.count ?? 10;
const timeout = (opts.timeout ?? 30) * 1000;

function out(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function fail(msg) {
    out({error: String(msg)});
    process.exit(1);
}

const timer = setTimeout(() => fail('timed out after ' + timeout / 1000 + ' s (' +
                                    JSON.stringify(state) + ')'), timeout);
const state = {sent: 0, settled: 0, accepted: 0, outcomes: {}, received: [], seq: []};

// An amqp:// or amqps:// url connects over TCP (amqps: TLS, the server's certificate checked
// against NODE_EXTRA_CA_CERTS); `username`/`password` make rhea log in with SASL PLAIN.
function connectOptions(protocol, container) {
    const u = new URL(opts.url);
    if (u.protocol === 'ws:' || u.protocol === 'wss:') {
        const ws = container.websocket_connect(WebSocket);
        return {connection_details: ws(opts.url, [protocol], {})};
    }
    const o = {host: u.hostname, port: Number(u.port)};
    if (u.protocol === 'amqps:') {
        o.transport = 'tls';
        o.servername = u.hostname;
        o.rejectUnauthorized = true;
    }
    if (opts.username !== undefined) {
        o.username = opts.username;
        o.password = opts.password;
    }
    return o;
}

function open(protocol, id) {
    const container = rhea.create_container({id: id});
    const conn = container.connect(Object.assign(connectOptions(protocol, container), {
        reconnect: false,
        idle_time_out: 0,
    }));
    conn.on('connection_error', (ctx) => fail('connection error: ' +
                                              JSON.stringify(ctx.connection.error)));
    conn.on('disconnected', (ctx) => {
        if (!conn.done)
            fail('disconnected: ' + (ctx.error ? ctx.error.message || ctx.error : 'closed'));
    });
    conn.on('error', (ctx) => fail('error: ' + JSON.stringify(ctx.error)));
    return conn;
}

function finish(conns, result) {
    for (const c of conns) {
        c.done = true;
        c.close();
    }
    clearTimeout(timer);
    out(result);
    // Let the close frames go out before exiting.
    setTimeout(() => process.exit(0), 200);
}

function startSender(conn, onDone) {
    const snd = conn.open_sender({target: {address: opts.address}, autosettle: true});
    snd.on('sendable', () => {
        while (snd.sendable() && state.sent < count) {
            snd.send({body: 'msg-' + state.sent, application_properties: {seq: state.sent}});
            state.sent++;
        }
    });
    const settle = (outcome) => (ctx) => {
        state.settled++;
        state.outcomes[outcome] = (state.outcomes[outcome] || 0) + 1;
        if (outcome === 'accepted')
            state.accepted++;
        if (state.settled === count)
            onDone();
    };
    snd.on('accepted', settle('accepted'));
    snd.on('rejected', settle('rejected'));
    snd.on('released', settle('released'));
    snd.on('modified', settle('modified'));
}

function startReceiver(conn, onReady, onDone) {
    const rcv = conn.open_receiver({source: {address: opts.address}, credit_window: 0,
                                    autoaccept: true});
    rcv.on('receiver_open', () => {
        rcv.add_credit(count);
        onReady();
    });
    rcv.on('message', (ctx) => {
        state.received.push(ctx.message.body);
        state.seq.push(ctx.message.application_properties ?
                       ctx.message.application_properties.seq : null);
        if (state.received.length === count)
            onDone();
    });
}

const protocol = opts.protocol || 'binary';
if (opts.mode === 'send') {
    const c = open(protocol, 'rhea-sender');
    startSender(c, () => finish([c], {sent: state.sent, accepted: state.accepted,
                                      outcomes: state.outcomes}));
} else if (opts.mode === 'receive') {
    const c = open(protocol, 'rhea-receiver');
    startReceiver(c, () => out({ready: true}),
                  () => finish([c], {received: state.received, seq: state.seq}));
} else if (opts.mode === 'roundtrip') {
    const rc = open(opts.receive_protocol || protocol, 'rhea-receiver');
    let sc = null;
    let got = false;
    let sentDone = false;
    const maybeDone = () => {
        if (got && sentDone)
            finish([rc, sc], {sent: state.sent, accepted: state.accepted,
                              outcomes: state.outcomes, received: state.received,
                              seq: state.seq});
    };
    startReceiver(rc, () => {
        sc = open(protocol, 'rhea-sender');
        startSender(sc, () => {
            sentDone = true;
            maybeDone();
        });
    }, () => {
        got = true;
        maybeDone();
    });
} else {
    fail('unknown mode ' + JSON.stringify(opts.mode) + ' (send, receive, roundtrip)');
}
