"""Node.js clients for the system tests: the console page in headless Chromium and rhea over
WebSocket (the scripts are in tests/browser/, their npm packages in tests/browser/node_modules).

* `require_node()` skips the test when node is not installed, `require_chromium()` when
  /usr/bin/chromium is not; both install tests/browser's packages with `npm ci` first when
  they are missing (scripts/test has normally done it), and fail when that does not work.
* `http_router(make_router)` starts a router with an AMQP listener and an http listener.
* `ConsolePage(url)` runs tests/browser/console.mjs: `read()` returns what the page shows,
  `wait_for(pred)` reads until `pred(page)` holds, `filter(text)`, `screenshot(paths)`.
* `run_rhea(opts)` / `start_rhea(opts)` run tests/browser/rhea_ws.mjs.
"""

import json
import os
import queue
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import REPO_ROOT, free_port, router_entities

BROWSER_DIR = REPO_ROOT / "tests" / "browser"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
TIMEOUT = float(os.environ.get("JUNCTION_TEST_TIMEOUT", "10"))
if os.environ.get("JUNCTION_SLOW"):
    TIMEOUT *= 10

_npm_lock = threading.Lock()


def require_node():
    """The node executable; skips when there is none, fails when the packages are missing."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (scripts/test installs Debian's nodejs)")
    with _npm_lock:
        if not (BROWSER_DIR / "node_modules" / "rhea").is_dir() or \
                not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("tests/browser/node_modules is missing and npm is not installed")
            r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
                               cwd=str(BROWSER_DIR), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=300)
            if r.returncode != 0:
                pytest.fail("npm ci in tests/browser failed:\n" + r.stdout[-2000:])
    return node


def require_chromium():
    node = require_node()
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("%s is not installed (scripts/test installs Debian's chromium)" % CHROMIUM)
    return node


def http_router(make_router, http_port=None, http=None, **kw):
    """A router with an AMQP listener (port 0) and an http listener on `http_port` (a free
    one by default).  Returns (router, amqp_url, http_port)."""
    http_port = http_port or free_port()
    lst_http = {"host": "127.0.0.1", "port": str(http_port), "http": True}
    lst_http.update(http or {})
    listeners = [{"host": "127.0.0.1", "port": "0"}, lst_http]
    r = make_router(router_entities(listeners=listeners, **kw))
    amqp = [p for h, p in r.addresses if p != http_port]
    assert amqp, "no AMQP Listening line besides the http port %d: %s" % (http_port,
                                                                          r.addresses)
    return r, "amqp://127.0.0.1:%d" % amqp[0], http_port


def http_get(url, timeout=TIMEOUT):
    """(status, content type, body bytes) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


class _Lines:
    """JSON lines from a child's stdout, read by a thread (so reads can time out)."""

    def __init__(self, proc):
        self.proc = proc
        self.q = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read, args=(proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(proc.stderr, False), daemon=True).start()

    def _read(self, stream, is_out):
        for line in iter(stream.readline, ""):
            if is_out:
                self.q.put(line)
            else:
                self.stderr.append(line.rstrip("\n"))
        if is_out:
            self.q.put(None)

    def next(self, timeout, what, pump=None):
        """The next line as a dict.  `pump(seconds)` (e.g. a Proton Client's run_for) is
        called while waiting, so the test's own clients keep working meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.q.get(timeout=0 if pump else timeout)
                break
            except queue.Empty:
                if not pump or time.monotonic() > deadline:
                    raise AssertionError("%s: no output in %.0f s; stderr:\n%s" % (
                        what, timeout, "\n".join(self.stderr[-30:])))
                pump(0.05)
        if line is None:
            self.proc.wait(5)
            raise AssertionError("%s exited (status %s) early; stderr:\n%s" % (
                what, self.proc.returncode, "\n".join(self.stderr[-30:])))
        try:
            return json.loads(line)
        except ValueError:
            raise AssertionError("%s printed something that is not JSON: %r" % (what, line))


class ConsolePage:
    """The console page open in headless Chromium (tests/browser/console.mjs)."""

    def __init__(self, url, node):
        self.url = url
        self.proc = subprocess.Popen(
            [node, str(BROWSER_DIR / "console.mjs"), url], cwd=str(BROWSER_DIR),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            bufsize=1)
        self.lines = _Lines(self.proc)
        first = self.lines.next(max(60.0, TIMEOUT * 3), "console.mjs start-up")
        assert "error" not in first, first["error"]
        self.loaded = first

    def command(self, cmd, timeout=None):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        r = self.lines.next(timeout or max(30.0, TIMEOUT * 3), "console.mjs %s" % cmd["cmd"])
        assert "error" not in r, "console.mjs: %s" % r["error"]
        return r

    def read(self):
        return self.command({"cmd": "read"})

    def wait_for(self, pred, what, timeout=None):
        """Read the page until pred(page) is true; returns that reading.  Fails with the
        last reading after `timeout` seconds (default: 2 x JUNCTION_TEST_TIMEOUT)."""
        deadline = time.monotonic() + (timeout or 2 * TIMEOUT)
        while True:
            page = self.read()
            if pred(page):
                return page
            if time.monotonic() > deadline:
                shown = {k: v for k, v in page.items() if not k.endswith("Table")}
                raise AssertionError("the console page never showed %s; it shows %s" % (
                    what, json.dumps(shown)))
            time.sleep(0.2)

    def filter(self, text):
        return self.command({"cmd": "filter", "text": text})

    def screenshot(self, paths):
        return self.command({"cmd": "screenshot", "paths": [str(p) for p in paths]})

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)


def start_rhea(node, opts):
    """Start tests/browser/rhea_ws.mjs with `opts`; returns (process, lines)."""
    proc = subprocess.Popen([node, str(BROWSER_DIR / "rhea_ws.mjs"), json.dumps(opts)],
                            cwd=str(BROWSER_DIR), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1)
    return proc, _Lines(proc)


def rhea_result(proc, lines, timeout=None, pump=None):
    """The result line of a rhea_ws.mjs run (fails on its error line or exit status);
    `pump` as in _Lines.next."""
    r = lines.next(timeout or max(60.0, TIMEOUT * 4), "rhea_ws.mjs", pump)
    assert "error" not in r, "rhea_ws.mjs: %s\nstderr:\n%s" % (r["error"],
                                                             "\n".join(lines.stderr[-20:]))
    proc.wait(30)
    assert proc.returncode == 0, "rhea_ws.mjs exited with status %s" % proc.returncode
    return r


def run_rhea(node, opts, timeout=None, pump=None):
    proc, lines = start_rhea(node, opts)
    try:
        return rhea_result(proc, lines, timeout, pump)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
