/* stats/console/console.js: the live console page (index.html) - plain JavaScript, no
 * framework, no build step of its own.
 *
 * Feed: one WebSocket to the page's own host with the subprotocol "junction-mgmt", which
 * speaks the management socket's protocol (stats/stats.h, "Management protocol"): each
 * request is one JSON object per text message, each reply line comes back as one text
 * message.  What the page asks for:
 *   - stats.subscribe "router.*" every second: the cards and the two charts (deliveries per
 *     second in and out, from the router's counters; resident memory);
 *   - entity.query "connection", "link", "address" once a second, one after the other
 *     (a streamed reply must end before the next request): the three tables;
 *   - stats.subscribe over the filter box's glob: the statistics table;
 *   - the hello line (when the server sends one) or entity.query "router": id, version, mode.
 *
 * The router "stops answering" when the feed closes, cannot be opened, or leaves a request
 * without a reply for REPLY_TIMEOUT_MS: a banner says so, and goes away once replies flow
 * again.  A feed stuck for STUCK_MS is dropped and opened anew; a closed one is reopened
 * every RECONNECT_MS.
 */
'use strict';

(function () {
    const PROTOCOL = 'junction-mgmt';
    const REPLY_TIMEOUT_MS = 4000; /* a request older than this: "not answering" */
    const STUCK_MS = 15000;        /* a feed silent this long is dropped and reopened */
    const RECONNECT_MS = 2000;     /* between attempts while the router is away */
    const POLL_MS = 1000;          /* the tables' refresh */
    const HISTORY = 300;           /* chart points kept (5 minutes at one a second) */
    const TABLE_ROWS = 200;        /* rows asked for per entity type */
    const STATS_ROWS = 500;        /* statistics shown at most */

    const $ = (id) => document.getElementById(id);
    const intFmt = new Intl.NumberFormat('en-US');
    const rateFmt = new Intl.NumberFormat('en-US', {maximumFractionDigits: 1});

    /* ---- the feed --------------------------------------------------------------------- */

    const feed = {
        ws: null,            /* the WebSocket, or null between attempts */
        openedAt: 0,         /* when the current attempt started (ms) */
        lastMessage: 0,      /* when anything last arrived (ms) */
        nextId: 1,
        pending: new Map(),  /* id -> {resolve, reject, sent, acc} */
        subs: new Map(),     /* subscription number -> handler(update) */
        early: new Map(),    /* updates for a subscription whose reply is not in yet */
        maxSub: 0,           /* the highest subscription number replied (numbers only grow) */
        down: '',            /* why the router is not answering ('' = it is) */
        answered: false,     /* something arrived on the current WebSocket */
        refused: '',         /* an error line without an id on it (the server refusing it) */
        everUp: false,       /* the feed worked once (the first attempt shows "connecting") */
    };

    function feedUrl() {
        return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/';
    }

    function connect() {
        const ws = new WebSocket(feedUrl(), PROTOCOL);
        feed.ws = ws;
        feed.answered = false;
        feed.refused = '';
        feed.openedAt = Date.now();
        ws.onopen = () => {
            if (feed.ws === ws)
                onFeedOpen();
        };
        ws.onmessage = (ev) => {
            if (feed.ws === ws)
                onFeedMessage(ev.data);
        };
        ws.onclose = (ev) => {
            if (feed.ws === ws) {
                dropFeed(feed.refused ? 'the router refused the feed: ' + feed.refused :
                         ev.wasClean ? 'the router closed the feed' : 'the feed was cut');
            }
        };
    }

    /* Forget the current WebSocket (closing it if needed) and try again later. */
    function dropFeed(why) {
        const ws = feed.ws;
        feed.ws = null;
        feed.answered = false;
        if (ws) {
            ws.onopen = ws.onmessage = ws.onclose = null;
            if (ws.readyState === WebSocket.CONNECTING || ws.readyState === WebSocket.OPEN)
                ws.close();
        }
        for (const p of feed.pending.values())
            p.reject(new Error(why));
        feed.pending.clear();
        feed.subs.clear();
        feed.early.clear();
        feed.maxSub = 0;
        router.prev = null;
        stats.sub = null;
        chartGap();
        setDown(why);
        setTimeout(connect, RECONNECT_MS);
    }

    /* Send one request; the promise gets its result (streamed replies gathered into one). */
    function request(op, args) {
        const ws = feed.ws;
        if (!ws || ws.readyState !== WebSocket.OPEN)
            return Promise.reject(new Error('the feed is not open'));
        const id = feed.nextId++;
        return new Promise((resolve, reject) => {
            feed.pending.set(id, {resolve, reject, sent: Date.now(), acc: null});
            ws.send(JSON.stringify(Object.assign({id: id, op: op}, args || {})));
        });
    }

    function onFeedMessage(text) {
        feed.lastMessage = Date.now();
        feed.answered = true;
        let m;
        try {
            m = JSON.parse(text);
        } catch (e) {
            console.warn('console: not JSON from the router:', text.slice(0, 200));
            return;
        }
        if (m.hello) {
            showIdent(m.hello.router_id, m.hello.version, m.hello.mode);
        } else if (m.id !== undefined && m.id !== null && feed.pending.has(m.id)) {
            const p = feed.pending.get(m.id);
            if (m.error) {
                feed.pending.delete(m.id);
                p.reject(new Error(m.error.message || ('error ' + m.error.code)));
            } else if (m.more) {
                p.acc = merge(p.acc, m.result);
                p.sent = Date.now(); /* a streamed reply is answering */
            } else {
                feed.pending.delete(m.id);
                p.resolve(merge(p.acc, m.result));
            }
        } else if (m.sub !== undefined && m.values !== undefined) {
            const h = feed.subs.get(m.sub);
            if (h)
                h(m);
            else if (m.sub > feed.maxSub) /* its subscribe reply is on its way */
                feed.early.set(m.sub, (feed.early.get(m.sub) || []).concat([m]));
        } else if (m.error) {
            /* e.g. 503, too many clients: the router closes the feed next; say why then */
            if (m.id === null || m.id === undefined)
                feed.refused = m.error.message || ('error ' + m.error.code);
            console.warn('console: router error:', m.error);
        }
        checkHealth();
    }

    /* Streamed replies: rows (entity.query) or values (stats.snapshot) of every line. */
    function merge(acc, result) {
        if (!acc)
            return result;
        if (Array.isArray(acc.results) && Array.isArray(result.results))
            acc.results = acc.results.concat(result.results);
        if (acc.values && result.values)
            Object.assign(acc.values, result.values);
        return acc;
    }

    /* Subscribe to `match`; `handler` gets every update.  Resolves with the number. */
    async function subscribe(match, intervalMs, handler) {
        const r = await request('stats.subscribe', {match: match, interval_ms: intervalMs});
        feed.subs.set(r.sub, handler);
        feed.maxSub = Math.max(feed.maxSub, r.sub);
        for (const u of feed.early.get(r.sub) || [])
            handler(u);
        feed.early.delete(r.sub);
        return r.sub;
    }

    function onFeedOpen() {
        subscribe('router.*', 1000, onRouterUpdate).catch(noteError);
        request('entity.query', {type: 'router'}).then((r) => {
            const row = rowsOf(r)[0];
            if (row)
                showIdent(row.id, row.version, row.mode);
        }).catch(noteError);
        resubscribeStats();
    }

    function noteError(e) {
        if (feed.ws)
            console.warn('console:', e.message);
    }

    /* The banner: shown while the router is not answering. */
    function checkHealth() {
        const now = Date.now();
        const ws = feed.ws;
        let why = '';
        if (!ws) {
            why = feed.down || 'the feed is closed';
        } else if (!feed.answered) {
            /* Nothing came on this feed yet: the first attempt gets REPLY_TIMEOUT_MS before
             * it counts as down; a new attempt after an outage stays down until it answers. */
            if (feed.everUp && feed.down)
                why = feed.down;
            else if (now - feed.openedAt > REPLY_TIMEOUT_MS)
                why = 'no answer for ' + secs(now - feed.openedAt);
        } else {
            let oldest = now;
            for (const p of feed.pending.values())
                oldest = Math.min(oldest, p.sent);
            if (now - oldest > REPLY_TIMEOUT_MS)
                why = 'no reply for ' + secs(now - oldest);
        }
        if (ws && why && now - Math.max(feed.openedAt, feed.lastMessage) > STUCK_MS) {
            dropFeed(why);
            return;
        }
        if (!why && feed.answered)
            feed.everUp = true;
        setDown(why);
    }

    function secs(ms) {
        return Math.round(ms / 1000) + ' s';
    }

    function setDown(why) {
        feed.down = why;
        const state = $('feed-state');
        if (why) {
            $('banner-detail').textContent = '(' + why.charAt(0).toUpperCase() + why.slice(1) +
                                             '.)';
            $('banner').hidden = false;
            state.dataset.state = 'down';
            state.textContent = 'not answering';
        } else {
            $('banner').hidden = true;
            state.dataset.state = feed.answered ? 'live' : 'connecting';
            state.textContent = feed.answered ? 'live' : 'connecting';
        }
    }

    /* ---- the router's identity and totals ------------------------------------------- */

    function showIdent(id, version, mode) {
        if (id) {
            $('router-id').textContent = id;
            document.title = id + ' \u00b7 Junction console';
        }
        if (version)
            $('router-version').textContent = version;
        if (mode)
            $('router-mode').textContent = mode;
    }

    const router = {
        values: {},  /* router.* by full name */
        prev: null,  /* {t, inn, out} at the previous update, for the rates */
    };

    function onRouterUpdate(u) {
        Object.assign(router.values, u.values);
        const v = (f) => router.values['router.' + f];
        setText('stat-connections', intText(v('connectionCount')));
        setText('stat-links', intText(v('linkCount')));
        setText('stat-addresses', intText(v('addrCount')));
        setText('stat-ingress', intText(v('deliveriesIngress')));
        setText('stat-egress', intText(v('deliveriesEgress')));
        setText('stat-rss', bytesText(v('residentMemory')));
        setText('stat-vm', v('memoryUsage') === undefined ? '' :
                               bytesText(v('memoryUsage')) + ' virtual');
        $('router-uptime').textContent = durationText(v('uptimeSeconds'));

        const t = Date.now() / 1000;
        const inn = v('deliveriesIngress');
        const out = v('deliveriesEgress');
        let rin = null;
        let rout = null;
        const p = router.prev;
        if (p && t > p.t && inn >= p.inn && out >= p.out) {
            rin = (inn - p.inn) / (t - p.t);
            rout = (out - p.out) / (t - p.t);
        }
        router.prev = {t: t, inn: inn, out: out};
        if (rin !== null) {
            setText('rate-in', rateFmt.format(rin) + ' /s');
            setText('rate-out', rateFmt.format(rout) + ' /s');
        }
        chartPush(t, rin, rout, v('residentMemory'));
    }

    function setText(id, text) {
        const el = $(id);
        if (el.textContent !== text) {
            el.textContent = text;
            flash(el);
        }
    }

    /* Highlight a value that just changed, for about a second.  A class set now and taken
     * off by one sweep (not an animation: that would repaint every frame, all the time, on
     * a page where something changes every second). */
    const flashed = new Map(); /* element -> when it was highlighted (ms) */

    function flash(el) {
        el.classList.add('changed');
        flashed.set(el, Date.now());
    }

    function unflash() {
        const now = Date.now();
        for (const [el, t] of flashed) {
            if (now - t >= 900) {
                el.classList.remove('changed');
                flashed.delete(el);
            }
        }
    }

    function intText(n) {
        return n === undefined || n === null ? '\u2013' : intFmt.format(n);
    }

    function bytesText(n) {
        if (n === undefined || n === null)
            return '\u2013';
        const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
        let i = 0;
        while (n >= 1024 && i < units.length - 1) {
            n /= 1024;
            i++;
        }
        return (i ? n.toFixed(n < 10 ? 2 : 1) : String(n)) + ' ' + units[i];
    }

    function durationText(s) {
        if (s === undefined || s === null)
            return '\u2013';
        const d = Math.floor(s / 86400);
        const h = Math.floor(s / 3600) % 24;
        const m = Math.floor(s / 60) % 60;
        const parts = [];
        if (d)
            parts.push(d + 'd');
        if (d || h)
            parts.push(h + 'h');
        if (d || h || m)
            parts.push(m + 'm');
        parts.push((s % 60) + 's');
        return parts.join(' ');
    }

    /* ---- charts (uPlot) -------------------------------------------------------------- */

    const chart = {
        t: [],
        inn: [],
        out: [],
        rss: [],
        rate: null, /* uPlot instances, or null when uPlot did not load */
        mem: null,
    };

    /* Steps for the value axes: whole numbers (1, 2, 5, 10, 20, 50 ...). */
    const INCRS = [];
    for (let m = 1; m < 1e13; m *= 10)
        INCRS.push(m, 2 * m, 5 * m);

    /* The time axis: the data's span, and at least the last minute, so that a few points do
     * not stretch over the axis (uPlot widens a lone point's range to 1000 days itself, so
     * this reads the data rather than the min and max it is given). */
    function timeRange(u) {
        const xs = u.data[0];
        const max = xs.length ? xs[xs.length - 1] : Date.now() / 1000;
        const min = xs.length ? xs[0] : max;
        return [Math.min(min, max - 60), max];
    }

    /* The value axis: from 0 to a little over the largest value shown (read from the data
     * for the same reason). */
    function valueRange(u) {
        let max = 0;
        for (let i = 1; i < u.data.length; i++) {
            for (const v of u.data[i]) {
                if (v !== null && v > max)
                    max = v;
            }
        }
        return [0, Math.max(max * 1.1, 1)];
    }

    function makeChart(el, series, valueFmt) {
        if (typeof uPlot !== 'function')
            return null;
        const axis = {stroke: '#64748b', grid: {stroke: '#e2e8f0', width: 1},
                      ticks: {stroke: '#e2e8f0', width: 1}, font: '11px system-ui, sans-serif'};
        return new uPlot({
            width: Math.max(200, el.clientWidth),
            height: 200,
            cursor: {drag: {x: false, y: false}},
            legend: {live: false},
            scales: {
                x: {time: true, range: timeRange},
                y: {range: valueRange},
            },
            axes: [axis, Object.assign({}, axis, {size: 64, incrs: INCRS,
                                                  values: (u, vals) => vals.map(valueFmt)})],
            series: [{}].concat(series.map((s) => ({
                label: s.label, stroke: s.color, width: 2, fill: s.fill, dash: s.dash,
            }))),
        }, [[]].concat(series.map(() => [])), el);
    }

    function chartInit() {
        chart.rate = makeChart($('chart-rate'), [
            {label: 'in', color: '#2563eb', fill: 'rgba(37, 99, 235, 0.08)'},
            {label: 'out', color: '#16a34a', fill: 'rgba(22, 163, 74, 0.08)', dash: [6, 4]},
        ], (v) => rateFmt.format(v));
        chart.mem = makeChart($('chart-mem'), [
            {label: 'resident', color: '#9333ea', fill: 'rgba(147, 51, 234, 0.08)'},
        ], (v) => (Number.isInteger(v) || v >= 10 ? Math.round(v) : v.toFixed(1)) + ' MiB');
        window.addEventListener('resize', () => {
            for (const [c, id] of [[chart.rate, 'chart-rate'], [chart.mem, 'chart-mem']]) {
                if (c)
                    c.setSize({width: Math.max(200, $(id).clientWidth), height: 200});
            }
        });
    }

    function chartPush(t, rin, rout, rss) {
        chart.t.push(t);
        chart.inn.push(rin);
        chart.out.push(rout);
        chart.rss.push(rss === undefined || rss === null ? null : rss / 1048576);
        if (chart.t.length > HISTORY) {
            for (const a of [chart.t, chart.inn, chart.out, chart.rss])
                a.shift();
        }
        if (chart.rate)
            chart.rate.setData([chart.t, chart.inn, chart.out]);
        if (chart.mem)
            chart.mem.setData([chart.t, chart.rss]);
    }

    /* A break in the lines while the router is away. */
    function chartGap() {
        if (chart.t.length && chart.inn[chart.inn.length - 1] !== null)
            chartPush(Date.now() / 1000, null, null, null);
    }

    /* ---- the entity tables ----------------------------------------------------------- */

    const TABLES = {
        connection: {
            table: 'conn-table', count: 'conn-count', total: 'connectionCount',
            sort: (a, b) => Number(a.identity) - Number(b.identity),
            cols: [
                ['identity', 'id'], ['host', 'host'], ['container', 'container'],
                ['dir', 'dir'], ['deliveriesIn', 'deliveries in', intText],
                ['deliveriesOut', 'deliveries out', intText],
                ['uptimeSeconds', 'uptime', durationText],
            ],
        },
        link: {
            table: 'link-table', count: 'link-count', total: 'linkCount',
            sort: (a, b) => Number(a.identity) - Number(b.identity),
            cols: [
                ['identity', 'id'], ['connectionId', 'connection'], ['linkDir', 'dir'],
                ['owningAddr', 'address'], ['capacity', 'capacity', intText],
                ['creditAvailable', 'credit', intText],
                ['undeliveredCount', 'undelivered', intText],
                ['unsettledCount', 'unsettled', intText],
                ['deliveryCount', 'deliveries', intText],
                ['acceptedCount', 'accepted', intText], ['rejectedCount', 'rejected', intText],
                ['releasedCount', 'released', intText], ['modifiedCount', 'modified', intText],
                ['presettledCount', 'presettled', intText],
            ],
        },
        address: {
            table: 'addr-table', count: 'addr-count', total: 'addrCount',
            sort: (a, b) => String(a.name).localeCompare(String(b.name), 'en', {numeric: true}),
            cols: [
                ['name', 'address'], ['distribution', 'distribution'],
                ['subscriberCount', 'consumers', intText], ['senderCount', 'senders', intText],
                ['deliveriesIngress', 'deliveries in', intText],
                ['deliveriesEgress', 'deliveries out', intText],
                ['deliveriesTransit', 'transit', intText],
            ],
        },
    };

    /* Rows as objects keyed by attribute name. */
    function rowsOf(result) {
        const names = result.attributeNames || [];
        return (result.results || []).map((r) => {
            const o = {};
            names.forEach((n, i) => (o[n] = r[i]));
            return o;
        });
    }

    let polling = false;

    async function poll() {
        if (polling || !feed.ws || feed.ws.readyState !== WebSocket.OPEN)
            return;
        polling = true;
        for (const type of Object.keys(TABLES)) {
            try {
                const r = await request('entity.query', {type: type, count: TABLE_ROWS});
                renderTable(TABLES[type], rowsOf(r));
            } catch (e) {
                if (!feed.ws)
                    break; /* the feed went away: the banner says so */
                $(TABLES[type].count).textContent = 'error: ' + e.message;
            }
        }
        polling = false;
    }

    /* Make `trs` the rows of `body`, in order, moving only the rows out of place (a table
     * rebuilt every second would be laid out anew every second); an empty table gets one
     * "none" row of `ncols` cells. */
    function placeRows(body, trs, ncols) {
        let cur = body.firstElementChild;
        for (const tr of trs) {
            if (tr === cur)
                cur = cur.nextElementSibling;
            else
                body.insertBefore(tr, cur);
        }
        while (cur) {
            const next = cur.nextElementSibling;
            if (trs.length || !cur.querySelector('td.empty'))
                cur.remove();
            cur = next;
        }
        if (!trs.length && !body.rows.length) {
            const td = body.insertRow().insertCell();
            td.colSpan = ncols;
            td.className = 'empty';
        }
    }

    function renderTable(spec, rows) {
        const table = $(spec.table);
        if (!table.tHead) {
            const tr = table.createTHead().insertRow();
            for (const [key, label, fmt] of spec.cols) {
                const th = document.createElement('th');
                th.textContent = label;
                th.dataset.col = key;
                if (fmt)
                    th.className = 'num';
                tr.appendChild(th);
            }
            table.createTBody();
        }
        rows.sort(spec.sort);
        const body = table.tBodies[0];
        const old = new Map();
        for (const tr of body.rows)
            old.set(tr.dataset.id, tr);
        const trs = [];
        for (const row of rows) {
            const id = String(row.identity !== undefined ? row.identity : row.name);
            let tr = old.get(id);
            if (!tr) {
                tr = document.createElement('tr');
                tr.dataset.id = id;
                for (const [key, , fmt] of spec.cols) {
                    const td = tr.insertCell();
                    td.dataset.col = key;
                    if (fmt)
                        td.className = 'num';
                }
            }
            spec.cols.forEach(([key, , fmt], i) => {
                const v = row[key];
                const text = fmt ? fmt(v) : (v === null || v === undefined ? '' : String(v));
                const td = tr.cells[i];
                if (td.textContent !== text) {
                    const had = td.textContent !== '';
                    td.textContent = text;
                    if (had && fmt && key !== 'uptimeSeconds')
                        flash(td);
                }
            });
            trs.push(tr);
        }
        placeRows(body, trs, spec.cols.length);
        const none = body.querySelector('td.empty');
        if (none)
            none.textContent = 'none';
        const total = router.values['router.' + spec.total];
        $(spec.count).textContent = total !== undefined && total > rows.length ?
            'showing ' + intFmt.format(rows.length) + ' of ' + intFmt.format(total) :
            '(' + intFmt.format(rows.length) + ')';
    }

    /* ---- the statistics table and its filter ----------------------------------------- */

    const stats = {
        sub: null,        /* the subscription, or null */
        match: '',        /* its glob */
        values: new Map(),
        names: null,      /* values' names sorted, or null when that must be redone */
        truncated: false,
        error: '',
        dirty: false,
    };

    function globOf(text) {
        text = text.trim();
        if (!text)
            return '*';
        if (/[*?\\]/.test(text))
            return text;
        return '*' + text + '*';
    }

    async function resubscribeStats() {
        const match = globOf($('stats-filter').value);
        const old = stats.sub;
        stats.sub = null;
        stats.match = match;
        stats.values.clear();
        stats.names = null;
        stats.truncated = false;
        stats.error = '';
        renderStatsSoon();
        if (old !== null) {
            feed.subs.delete(old);
            request('stats.unsubscribe', {sub: old}).catch(noteError);
        }
        try {
            const sub = await subscribe(match, 1000, (u) => {
                if (u.sub !== stats.sub && stats.sub !== null)
                    return;
                for (const [k, v] of Object.entries(u.values)) {
                    if (!stats.values.has(k))
                        stats.names = null;
                    stats.values.set(k, v);
                }
                for (const k of u.gone || []) {
                    if (stats.values.delete(k))
                        stats.names = null;
                }
                stats.truncated = !!u.truncated;
                renderStatsSoon();
            });
            if (stats.match !== match) { /* the filter changed meanwhile */
                feed.subs.delete(sub);
                request('stats.unsubscribe', {sub: sub}).catch(noteError);
                return;
            }
            stats.sub = sub;
        } catch (e) {
            if (stats.match === match) {
                stats.error = e.message;
                renderStatsSoon();
            }
        }
    }

    function renderStatsSoon() {
        if (!stats.dirty) {
            stats.dirty = true;
            requestAnimationFrame(renderStats);
        }
    }

    function statText(v) {
        if (v !== null && typeof v === 'object') {
            return 'count ' + intFmt.format(v.count) + ', p50 ' + v.p50 + ', p90 ' + v.p90 +
                   ', p99 ' + v.p99;
        }
        return intText(v);
    }

    function renderStats() {
        stats.dirty = false;
        const table = $('stats-table');
        if (!table.tHead) {
            const tr = table.createTHead().insertRow();
            tr.innerHTML = '<th>name</th><th class="num">value</th>';
            table.createTBody();
        }
        const body = table.tBodies[0];
        if (!stats.names)
            stats.names = Array.from(stats.values.keys()).sort();
        const names = stats.names;
        const shown = names.slice(0, STATS_ROWS);
        const old = new Map();
        for (const tr of body.rows)
            old.set(tr.dataset.id, tr);
        const trs = shown.map((name) => {
            let tr = old.get(name);
            if (!tr) {
                tr = document.createElement('tr');
                tr.dataset.id = name;
                tr.insertCell().textContent = name;
                tr.insertCell().className = 'num';
            }
            const text = statText(stats.values.get(name));
            if (tr.cells[1].textContent !== text) {
                const had = tr.cells[1].textContent !== '';
                tr.cells[1].textContent = text;
                if (had)
                    flash(tr.cells[1]);
            }
            return tr;
        });
        placeRows(body, trs, 2);
        const none = body.querySelector('td.empty');
        if (none) {
            none.textContent = stats.error ? 'error: ' + stats.error :
                                             'no statistic matches ' + stats.match;
        }
        $('stats-count').textContent = names.length > shown.length || stats.truncated ?
            'showing ' + intFmt.format(shown.length) + ' of ' + intFmt.format(names.length) +
                (stats.truncated ? '+' : '') :
            '(' + intFmt.format(names.length) + ')';
    }

    /* ---- start ------------------------------------------------------------------------ */

    let filterTimer = null;
    $('stats-filter').addEventListener('input', () => {
        clearTimeout(filterTimer);
        filterTimer = setTimeout(() => {
            if (feed.ws && feed.ws.readyState === WebSocket.OPEN)
                resubscribeStats();
        }, 300);
    });

    chartInit();
    renderStats();
    connect();
    setInterval(poll, POLL_MS);
    setInterval(checkHealth, 500);
    setInterval(unflash, 300);
})();
