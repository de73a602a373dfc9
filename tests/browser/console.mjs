// tests/browser/console.mjs: opens junctiond's web console in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core) and answers questions about what the page
// shows, for tests/system/test_console.py.
//
//   node console.mjs http://127.0.0.1:PORT/
//
// Reads one JSON command per line on standard input and answers each with one JSON line on
// standard output (the first line, {"ready": true, ...}, comes once the page has loaded):
//   {"cmd": "read"}                   what the page shows now (see readPage below)
//   {"cmd": "filter", "text": "..."}  type into the statistics filter box
//   {"cmd": "screenshot", "paths": ["a.png", ...]}  the whole page, saved to each path
//   {"cmd": "quit"}
// Errors answer {"error": "..."}.  Every value is read from the page's DOM, the way a user
// sees it: numbers are the text of the cards and table cells.

import { createRequire } from 'node:module';
import { copyFileSync } from 'node:fs';
import readline from 'node:readline';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');

const url = process.argv[2];
if (!url) {
    process.stdout.write(JSON.stringify({error: 'usage: node console.mjs URL'}) + '\n');
    process.exit(2);
}

function out(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

const pageErrors = [];    // uncaught exceptions in the page's scripts
const consoleErrors = []; // console.error() lines (the browser's own network errors too)

const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
    timeout: 60000,
});
const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
page.on('pageerror', (e) => pageErrors.push('exception: ' + e.message));
page.on('console', (m) => {
    if (m.type() === 'error')
        consoleErrors.push(m.text());
});

// What the page shows, as plain data.
function readPage() {
    const num = (text) => {
        const t = (text || '').replace(/,/g, '').trim();
        return /^-?\d+$/.test(t) ? Number(t) : null;
    };
    const text = (id) => {
        const el = document.getElementById(id);
        return el ? el.textContent.trim() : null;
    };
    const table = (id) => {
        const el = document.getElementById(id);
        const rows = [];
        if (!el || !el.tBodies[0])
            return rows;
        for (const tr of el.tBodies[0].rows) {
            if (!tr.dataset.id)
                continue; // the "none" row
            const row = {id: tr.dataset.id};
            for (const td of tr.cells) {
                const key = td.dataset.col || (td.cellIndex === 0 ? 'name' : 'value');
                const n = num(td.textContent);
                row[key] = n === null ? td.textContent : n;
            }
            rows.push(row);
        }
        return rows;
    };
    const banner = document.getElementById('banner');
    return {
        routerId: text('router-id'),
        version: text('router-version'),
        mode: text('router-mode'),
        uptime: text('router-uptime'),
        state: document.getElementById('feed-state').dataset.state,
        banner: !banner.hidden && banner.offsetParent !== null,
        bannerText: banner.textContent.replace(/\s+/g, ' ').trim(),
        connections: num(text('stat-connections')),
        links: num(text('stat-links')),
        addresses: num(text('stat-addresses')),
        ingress: num(text('stat-ingress')),
        egress: num(text('stat-egress')),
        rateIn: text('rate-in'),
        rss: text('stat-rss'),
        charts: document.querySelectorAll('.uplot canvas').length,
        connTable: table('conn-table'),
        linkTable: table('link-table'),
        addrTable: table('addr-table'),
        statsTable: table('stats-table'),
        statsCount: text('stats-count'),
    };
}

try {
    const resp = await page.goto(url, {waitUntil: 'load', timeout: 30000});
    out({ready: true, status: resp ? resp.status() : null, title: await page.title()});
} catch (e) {
    out({error: 'could not load ' + url + ': ' + e.message});
    await browser.close();
    process.exit(1);
}

const rl = readline.createInterface({input: process.stdin});
for await (const line of rl) {
    if (!line.trim())
        continue;
    let cmd;
    try {
        cmd = JSON.parse(line);
    } catch (e) {
        out({error: 'not JSON: ' + line});
        continue;
    }
    try {
        if (cmd.cmd === 'read') {
            const r = await page.evaluate(readPage);
            r.errors = pageErrors.slice();
            r.consoleErrors = consoleErrors.slice();
            out(r);
        } else if (cmd.cmd === 'filter') {
            await page.fill('#stats-filter', cmd.text);
            out({ok: true});
        } else if (cmd.cmd === 'screenshot') {
            const [first, ...rest] = cmd.paths;
            await page.screenshot({path: first, fullPage: true});
            for (const p of rest)
                copyFileSync(first, p);
            out({ok: true});
        } else if (cmd.cmd === 'quit') {
            break;
        } else {
            out({error: 'unknown command ' + JSON.stringify(cmd.cmd)});
        }
    } catch (e) {
        out({error: cmd.cmd + ': ' + e.message});
    }
}
await browser.close();
out({bye: true});
