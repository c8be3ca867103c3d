#!/usr/bin/env python3
"""Browser test: a page served from another origin uses the AWS SDK for
JavaScript v3 (DynamoDBClient and DocumentClient, bundled by esbuild)
against extenddb in headless Chromium, creates a table, writes and reads
an item, and lists the tables into the DOM. The page posts what its DOM
shows back to the page server, and this script asserts it.

    browser_test.py EXTENDDB_BIN CHROMIUM SDK_BUNDLE

Only the standard library; every process it starts is stopped by PID.
"""

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(url, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"extenddb exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("extenddb did not become healthy")


def stop(proc, group=False):
    if proc.poll() is not None:
        return
    try:
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.terminate()
        proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait(timeout=10)


def main():
    binary, chromium, bundle = sys.argv[1], sys.argv[2], sys.argv[3]
    work = Path(tempfile.mkdtemp(prefix="extenddb-browser-"))
    site = work / "site"
    site.mkdir()
    shutil.copy(HERE / "page.html", site / "index.html")
    shutil.copy(bundle, site / "sdk.bundle.js")

    results = []
    got = threading.Event()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(site), **kw)

        def do_POST(self):
            if self.path != "/result":
                self.send_error(404)
                return
            n = int(self.headers.get("Content-Length", "0"))
            results.append(json.loads(self.rfile.read(n)))
            self.send_response(204)
            self.end_headers()
            got.set()

        def log_message(self, *a):
            pass

    db_port, page_port = free_port(), free_port()
    endpoint = f"http://127.0.0.1:{db_port}"
    # The page's origin is localhost:<page_port>: another host and port
    # than the endpoint, so the browser enforces CORS.
    page_server = http.server.ThreadingHTTPServer(("127.0.0.1", page_port), Handler)
    threading.Thread(target=page_server.serve_forever, daemon=True).start()

    log = open(work / "extenddb.log", "w")
    db = subprocess.Popen([binary, "serve", "--memory", "--listen", f"127.0.0.1:{db_port}", "--log-level", "debug"],
                          stdout=log, stderr=subprocess.STDOUT)
    browser = None
    try:
        wait_health(endpoint, db)
        table = f"browser_{os.getpid()}"
        url = f"http://localhost:{page_port}/index.html?endpoint={endpoint}&table={table}"
        profile = work / "profile"
        profile.mkdir()
        blog = open(work / "chromium.log", "w")
        browser = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url],
                                   stdout=blog, stderr=subprocess.STDOUT, start_new_session=True)
        if not got.wait(90):
            print("browser: the page reported nothing within 90 s")
            print((work / "chromium.log").read_text()[-3000:])
            print((work / "extenddb.log").read_text()[-3000:])
            print("browser: 0 passed, 1 failed")
            return 1
        r = results[0]
        problems = []
        if not r.get("ok"):
            problems.append(f"the page failed: {r.get('error')}")
        else:
            if table not in r["tables"]:
                problems.append(f"table {table} not listed in the DOM: {r['tables']}")
            if r["status"] != "ok":
                problems.append(f"status {r['status']!r}")
            if r["item"] != {"id": "a", "n": 42, "tags": ["x", "y"]}:
                problems.append(f"item read back {r['item']}")
            if r.get("partiql") != [{"id": "a", "n": 43}]:
                problems.append(f"PartiQL UPDATE then DocumentClient SELECT read back {r.get('partiql')}")
            if len(r["requestId"]) < 16:
                problems.append("x-amzn-RequestId not readable by the page (Access-Control-Expose-Headers)")
        srv_log = (work / "extenddb.log").read_text()
        if "method=OPTIONS" not in srv_log and "OPTIONS" not in srv_log:
            problems.append("no preflight reached the server (was the page really cross-origin?)")
        if problems:
            for p in problems:
                print("browser: FAIL:", p)
            print(srv_log[-3000:])
            print("browser: 0 passed, 1 failed")
            return 1
        print(f"browser: headless Chromium listed {r['tables']} from origin http://localhost:{page_port} "
              f"against {endpoint} (request id {r['requestId'][:12]}...)")
        print("browser: 1 passed, 0 failed")
        return 0
    finally:
        if browser is not None:
            stop(browser, group=True)
        stop(db)
        page_server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
