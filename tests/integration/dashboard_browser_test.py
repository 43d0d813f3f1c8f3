#!/usr/bin/env python3
"""Browser test of the dashboard: a real controller, real workers, a real job,
and headless Chromium driven over the DevTools protocol (Python stdlib only).

It asserts from the page (a script run in it) that the pool shows the
workers, the timeline shows every task of the job, and the job reaches
`succeeded`; that the timeline's legend names every colour the chart
paints; that a long job is cancelled by the job page's Cancel button; and,
on a second controller started with --token-file, that Cancel asks for the
token, refuses a wrong one (the job runs on) and cancels with the right one.
It saves screenshots. A missing Chromium FAILS the test
(scripts/install-deps.sh installs it). Every process it starts is stopped by
PID (Chromium by its own process group).

usage: dashboard_browser_test.py --hmpmd build/bin/hmpmd --spec JOB.json --out DIR
"""
import argparse, base64, json, os, shutil, signal, socket, struct, subprocess, sys, tempfile
import re, time, urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402

# Every wait below is bounded but generous: ctest runs this at -j2 on a 2-core
# machine beside compile-heavy tests, where Chromium alone can take 20 s to
# come up. A broken dashboard still fails (a readiness signal never comes),
# only later.
STARTUP_S = 60       # controller + workers, the page, its event stream
CHROMIUM_TRIES = 2   # Chromium's start-up is retried once with a fresh profile
CHROMIUM_START_S = 60
JOB_S = 90           # the job to finish and show on the page
HTTP_S = 30          # one HTTP request


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def http(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    if body is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=HTTP_S) as r:
        return r.status, r.read()


def wait_for(what, fn, timeout, alive=None, on_timeout=fail):
    """Polls fn until it returns a truthy value; fails after timeout seconds
    (monotonic), or at once when alive() says a process it needs has died."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        if alive is not None:
            dead = alive()
            if dead:
                return on_timeout("%s while waiting for %s" % (dead, what))
        try:
            value = fn()
            if value:
                return value
            last = value
            if callable(getattr(fn, "describe", None)):
                last = fn.describe()
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.1)
    return on_timeout("timed out after %d s waiting for %s (last: %r)" % (timeout, what, last))


class Cdp:
    """A minimal DevTools client: one WebSocket, hand-made handshake."""

    def __init__(self, ws_url):
        assert ws_url.startswith("ws://")
        hostport, path = ws_url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=HTTP_S)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                fail("DevTools closed the WebSocket handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            fail("DevTools refused the WebSocket: %r" % head[:200])
        self.next_id = 0

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                fail("DevTools closed the connection")
            buf += chunk
        return buf

    def _recv_message(self):
        data = b""
        while True:
            b0, b1 = self._recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            payload = self._recv_exact(n)
            if b0 & 0x0F == 0x8:
                fail("DevTools closed the WebSocket")
            data += payload
            if b0 & 0x80:
                return data

    def call(self, method, **params):
        self.next_id += 1
        msg = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        header = bytes([0x81])
        if len(msg) < 126:
            header += bytes([0x80 | len(msg)])
        elif len(msg) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(msg))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(msg))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
        while True:
            reply = json.loads(self._recv_message())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    fail("%s: %s" % (method, reply["error"]))
                return reply["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            fail("script in page failed: %s" % r["exceptionDetails"].get("text"))
        return r["result"].get("value")

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))
        print("screenshot: " + path)


def stop(p, group):
    """Stops one process (with its process group when group) by PID: SIGTERM,
    then SIGKILL after 10 s."""
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM) if group else p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL) if group else p.kill()
        p.wait()
    if group:  # children Chromium left behind in its group
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# A job that runs until it is cancelled: one task sleeping 10 minutes.
LONG_JOB = json.dumps({
    "name": "long-nap",
    "submodels": [{"name": "nap", "kind": "encoder", "devices": 1}],
    "tasks": [{"id": "nap0", "submodel": "nap", "kernel": "sleep", "args": {"us": 600000000}}],
}).encode()


# A job whose only task fails on its worker: crash_worker's `fail` kernel
# logs a line and throws this message.
BAD_MESSAGE = "shard 3 has 7 rows, expected 8"
BAD_JOB = json.dumps({
    "name": "bad-shard",
    "tasks": [{"id": "half", "kernel": "fail", "args": {"message": BAD_MESSAGE}}],
}).encode()


def job_state(base, job):
    return json.loads(http(base + "/api/v1/jobs/%d" % job)[1])["state"]


def check_legend(cdp, subs, what):
    """The timeline's legend names every sub-model in subs and failed runs,
    and has a swatch for every colour (and fade) the chart painted."""
    legend = cdp.eval("[...document.querySelectorAll('#timeline-legend .legend-entry')].map(e => ({"
                      "label: e.textContent, swatches: [...e.querySelectorAll('.swatch')]"
                      ".map(s => s.dataset.color + '|' + s.dataset.alpha)}))")
    painted = cdp.eval("window.hmpmdDashboard.snapshot().timelinePainted")
    labels = [e["label"] for e in legend]
    missing = [name for name in subs + ["failed"] if name not in labels]
    if missing:
        fail("%s: the timeline's legend %r does not name %r" % (what, labels, missing))
    swatches = {c for e in legend for c in e["swatches"]}
    unnamed = [c for c in painted if c not in swatches]
    if not painted or unnamed:
        fail("%s: the timeline painted %r; the legend has no swatch for %r" % (what, painted, unnamed))
    print("legend (%s): %s" % (what, json.dumps(legend)))


def page_text(cdp, selector):
    return cdp.eval("(e => e && !e.hidden ? e.textContent : null)(document.querySelector(%s))"
                    % json.dumps(selector))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hmpmd", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--crash-worker", required=True, help="tests/integration's crash_worker")
    ap.add_argument("--chromium", default=os.environ.get("HMPMD_CHROMIUM", "chromium"))
    a = ap.parse_args()
    chromium = shutil.which(a.chromium)
    if chromium is None:
        fail("'%s' not found: run scripts/install-deps.sh (installs Debian's chromium)" % a.chromium)
    os.makedirs(a.out, exist_ok=True)
    spec = open(a.spec, "rb").read()
    tasks_expected = None

    procs = []  # (Popen, kill the group?)
    profiles = []  # Chromium's user-data dirs, one a try
    try:
        zport, hport = free_port(), free_port()
        base = "http://127.0.0.1:%d" % hport
        logs = open(os.path.join(a.out, "dashboard_browser_test.log"), "w")
        procs.append((subprocess.Popen([a.hmpmd, "controller", "--listen", "tcp://127.0.0.1:%d" % zport,
                                        "--http", "127.0.0.1:%d" % hport, "--log-level", "warn", "--db", ""],
                                       stdout=logs, stderr=logs), False))
        for i, cores in enumerate(["cube=1,vector=1", "cube=1,vector=1"]):
            procs.append((subprocess.Popen([a.hmpmd, "worker", "--controller", "tcp://127.0.0.1:%d" % zport,
                                            "--cores", cores, "--name", "worker-%d" % i],
                                           stdout=logs, stderr=logs), False))
        cluster = procs[:]

        def cluster_dead():
            for p, _ in cluster:
                if p.poll() is not None:
                    return "%s exited with %d (log: %s)" % (p.args[1], p.returncode, logs.name)
            return None
        wait_for("2 live workers", lambda: json.loads(http(base + "/api/v1/pool")[1])["alive_devices"] == 2,
                 STARTUP_S, alive=cluster_dead)

        devtools = None
        for attempt in range(1, CHROMIUM_TRIES + 1):
            profile = tempfile.mkdtemp(prefix="hmpmd-chromium-")
            profiles.append(profile)
            chrome = subprocess.Popen(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--user-data-dir=" + profile, "--remote-debugging-port=0", "--window-size=1400,1100",
                 base + "/"],
                stdout=logs, stderr=logs, start_new_session=True)
            procs.append((chrome, True))
            port_file = os.path.join(profile, "DevToolsActivePort")

            def chrome_dead():
                return "Chromium exited with %d" % chrome.returncode if chrome.poll() is not None else None
            last_try = attempt == CHROMIUM_TRIES
            port_line = wait_for("Chromium's DevTools port (try %d of %d)" % (attempt, CHROMIUM_TRIES),
                                 lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                                 CHROMIUM_START_S, alive=chrome_dead,
                                 on_timeout=fail if last_try else lambda msg: print("retrying: " + msg))
            if port_line:
                devtools = int(port_line.split()[0])
                break
            stop(chrome, True)
        if devtools is None:
            fail("Chromium never opened its DevTools port")

        def page_target():
            targets = json.loads(http("http://127.0.0.1:%d/json/list" % devtools)[1])
            pages = [t for t in targets if t.get("type") == "page" and t.get("url", "").startswith(base)]
            return pages[0]["webSocketDebuggerUrl"] if pages else None
        cdp = Cdp(wait_for("the dashboard page", page_target, STARTUP_S, alive=cluster_dead))

        def snapshot():
            return cdp.eval("window.hmpmdDashboard ? window.hmpmdDashboard.snapshot() : null")
        wait_for("the page to connect to /api/v1/events", lambda: (snapshot() or {}).get("connected"), STARTUP_S,
                 alive=cluster_dead)

        status, body = http(base + "/api/v1/jobs", "POST", spec)
        if status != 201:
            fail("submit: HTTP %d %s" % (status, body))
        job = json.loads(body)["id"]
        tasks_expected = json.loads(http(base + "/api/v1/jobs/%d" % job)[1])["tasks"]

        def done():
            s = snapshot()
            return s if s and s["jobs"].get(str(job)) == "succeeded" and s["timelineBars"] >= tasks_expected else None
        done.describe = snapshot
        s = wait_for("job %d to show as succeeded with %d tasks on the timeline" % (job, tasks_expected),
                     done, JOB_S, alive=cluster_dead)
        print("page snapshot: " + json.dumps(s))
        if s["devices"] != 2 or s["aliveDevices"] != 2:
            fail("pool shows %d devices (%d alive), want 2 live workers" % (s["devices"], s["aliveDevices"]))
        if s["timelineJob"] != job:
            fail("timeline shows job %r, want %d" % (s["timelineJob"], job))
        if s["timelineBars"] != tasks_expected:
            fail("timeline holds %d finished tasks of job %d, want %d" % (s["timelineBars"], job, tasks_expected))
        if s["timelineDrawn"] < 1:
            fail("timeline drew no bars")
        # The DOM agrees: the jobs table row and the pool cards.
        row = cdp.eval("document.querySelector('#jobs tr[data-job=\"%d\"] .state').textContent" % job)
        if row != "succeeded":
            fail("jobs table shows state %r" % row)
        names = cdp.eval("[...document.querySelectorAll('#pool .device .name')].map(e => e.textContent).sort()")
        if names != ["worker-0", "worker-1"]:
            fail("pool shows devices %r" % names)
        # Each card says what its worker's object store holds (/pool's store_bytes).
        states = cdp.eval("[...document.querySelectorAll('#pool .device .state')].map(e => e.textContent)")
        if len(states) != 2 or not all(re.search(r"tasks done, \d+(\.\d)? (B|KiB|MiB|GiB|TiB) stored$", t)
                                       for t in states):
            fail("pool cards say %r, want what each worker stores" % states)
        cdp.screenshot(os.path.join(a.out, "dashboard.png"))
        # The job page: DAG and step metrics.
        cdp.eval("location.hash = '#/jobs/%d'" % job)
        wait_for("the job page", lambda: cdp.eval(
            "document.querySelectorAll('#job-dag rect').length > 0 && "
            "document.querySelector('#job-title').textContent.includes('succeeded')"), STARTUP_S)
        subs = cdp.eval("[...document.querySelectorAll('#job-dag rect')].map(e => e.dataset.submodel).sort()")
        want = sorted(s_["name"] for s_ in json.loads(http(base + "/api/v1/jobs/%d/dag" % job)[1])["submodels"])
        if subs != want:
            fail("job page DAG shows %r, want %r" % (subs, want))
        # Its wall-clock times, as REST gives them (RFC 3339, UTC).
        summary = json.loads(http(base + "/api/v1/jobs/%d" % job)[1])
        cards = cdp.eval("Object.fromEntries([...document.querySelectorAll('#job-summary .card')]"
                         ".map(c => [c.firstChild.textContent, c.querySelector('b').textContent]))")
        for k in ("submitted", "started", "finished"):
            if cards.get(k) != summary.get(k + "_at") or not summary.get(k + "_at", "").endswith("Z"):
                fail("job page shows %s %r, REST says %r" % (k, cards.get(k), summary.get(k + "_at")))
        cdp.screenshot(os.path.join(a.out, "dashboard-job.png"))
        # A task's log panel (GET /api/v1/jobs/{id}/logs): the first task
        # of the spec, done; the built-in kernels log nothing.
        first = json.loads(spec)["tasks"][0]["id"]
        cdp.eval("location.hash = '#/jobs/%d/tasks/%s/0'" % (job, first))
        wait_for("the task log of %r" % first, lambda: cdp.eval(
            "document.querySelector('#task-log').textContent.includes(%s)"
            % json.dumps(first + " (step 0): done")), STARTUP_S)
        cdp.screenshot(os.path.join(a.out, "dashboard-task.png"))
        check_legend(cdp, want, "job %d" % job)

        # Cancel from the page: a long job, its Cancel button clicked.
        status, body = http(base + "/api/v1/jobs", "POST", LONG_JOB)
        long_job = json.loads(body)["id"]
        wait_for("job %d to run" % long_job, lambda: job_state(base, long_job) == "running", JOB_S,
                 alive=cluster_dead)
        cdp.eval("location.hash = '#/jobs/%d'" % long_job)
        wait_for("job %d's Cancel button" % long_job, lambda: page_text(cdp, "#job-cancel") == "Cancel", STARTUP_S)
        wait_for("job %d's running (faded) bar on the timeline" % long_job, lambda: any(
            not c.endswith("|1") for c in cdp.eval("window.hmpmdDashboard.snapshot().timelinePainted")), STARTUP_S)
        check_legend(cdp, ["nap"], "job %d running" % long_job)
        cdp.screenshot(os.path.join(a.out, "dashboard-cancel.png"))
        cdp.eval("document.querySelector('#job-cancel').click()")
        wait_for("job %d cancelled (REST)" % long_job, lambda: job_state(base, long_job) == "cancelled", JOB_S)
        wait_for("the page to say job %d is cancelled and drop its button" % long_job, lambda: (
            page_text(cdp, "#job-message") == "job %d cancelled" % long_job
            and page_text(cdp, "#job-cancel") is None), STARTUP_S)
        print("PASS: pool shows 2 workers, timeline %d tasks, job %d succeeded, job %d cancelled from the page"
              % (tasks_expected, job, long_job))

        # A failed task: its panel shows the worker's error and the line
        # its kernel logged (a test worker with a kernel that fails).
        procs.append((subprocess.Popen([a.crash_worker, "--controller", "tcp://127.0.0.1:%d" % zport,
                                        "--cores", "cube=1,vector=1", "--name", "failing-worker"],
                                       stdout=logs, stderr=logs), False))
        cluster.append(procs[-1])
        wait_for("the failing worker", lambda: json.loads(http(base + "/api/v1/pool")[1])["alive_devices"] == 3,
                 STARTUP_S, alive=cluster_dead)
        status, body = http(base + "/api/v1/jobs", "POST", BAD_JOB)
        bad_job = json.loads(body)["id"]
        wait_for("job %d to fail" % bad_job, lambda: job_state(base, bad_job) == "failed", JOB_S, alive=cluster_dead)
        cdp.eval("location.hash = '#/jobs/%d/tasks/half/0'" % bad_job)
        wait_for("the failed task's error on the page", lambda: (
            "half (step 0): failed" in (page_text(cdp, "#task-log") or "")
            and BAD_MESSAGE in cdp.eval("[...document.querySelectorAll('#task-log p.error')]"
                                        ".map(e => e.textContent).join()")
            and "checking the input" in cdp.eval("[...document.querySelectorAll('#task-log pre.log')]"
                                                 ".map(e => e.textContent).join()")), STARTUP_S)
        cdp.screenshot(os.path.join(a.out, "dashboard-failed.png"))
        print("PASS: job %d's failed task shows its error and log line" % bad_job)

        # A controller with a token and --public-read: Cancel asks for the
        # token, refuses a wrong one.
        token = "dashboard-" + base64.b16encode(os.urandom(8)).decode().lower()
        fd, token_file = tempfile.mkstemp(prefix="hmpmd-dashboard-token-")  # mode 0600
        os.write(fd, (token + "\n").encode())
        os.close(fd)
        try:
            zport2, hport2 = free_port(), free_port()
            base2 = "http://127.0.0.1:%d" % hport2
            procs.append((subprocess.Popen([a.hmpmd, "controller", "--listen", "tcp://127.0.0.1:%d" % zport2,
                                            "--http", "127.0.0.1:%d" % hport2, "--log-level", "warn",
                                            "--db", "", "--token-file", token_file, "--public-read"],
                                           stdout=logs, stderr=logs), False))
            procs.append((subprocess.Popen([a.hmpmd, "worker", "--controller", "tcp://127.0.0.1:%d" % zport2,
                                            "--cores", "cube=1,vector=1", "--name", "token-worker",
                                            "--token-file", token_file], stdout=logs, stderr=logs), False))
            cluster[:] = procs[-2:] + cluster
            wait_for("the token controller's worker",
                     lambda: json.loads(http(base2 + "/api/v1/pool")[1])["alive_devices"] == 1,
                     STARTUP_S, alive=cluster_dead)
            status, body = http(base2 + "/api/v1/jobs", "POST", LONG_JOB,
                                headers={"Authorization": "Bearer " + token})
            job2 = json.loads(body)["id"]
            wait_for("job %d to run" % job2, lambda: job_state(base2, job2) == "running", JOB_S, alive=cluster_dead)
            cdp.call("Page.navigate", url=base2 + "/#/jobs/%d" % job2)
            wait_for("the page on the token controller", lambda: cdp.eval(
                "location.port === '%d' && !!window.hmpmdDashboard && window.hmpmdDashboard.snapshot().connected"
                % hport2), STARTUP_S, alive=cluster_dead)
            wait_for("job %d's Cancel button" % job2, lambda: page_text(cdp, "#job-cancel") == "Cancel", STARTUP_S)
            # The page opened while job2's task ran: the timeline draws it
            # out (faded) from the task table.
            wait_for("job %d's running bar on a page opened mid-run" % job2, lambda: cdp.eval(
                "(s => s.timelineJob === %d && s.timelinePainted.some(c => !c.endsWith('|1')))"
                "(window.hmpmdDashboard.snapshot())" % job2), STARTUP_S)
            cdp.eval("document.querySelector('#job-cancel').click()")
            wait_for("the token form", lambda: page_text(cdp, "#token-form") is not None and
                     "needs its token" in (page_text(cdp, "#job-message") or ""), STARTUP_S)
            if job_state(base2, job2) != "running":
                fail("job %d is %s after a cancel without a token" % (job2, job_state(base2, job2)))
            cdp.screenshot(os.path.join(a.out, "dashboard-token.png"))

            def submit_token(t):
                cdp.eval("document.querySelector('#token-input').value = %s;"
                         "document.querySelector('#token-form').requestSubmit()" % json.dumps(t))
            submit_token("not-" + token)
            wait_for("the wrong-token message", lambda: (page_text(cdp, "#job-message") or "").startswith(
                "Wrong token: job %d was not cancelled" % job2) and page_text(cdp, "#token-form") is not None,
                STARTUP_S)
            if job_state(base2, job2) != "running":
                fail("job %d is %s after a cancel with a wrong token" % (job2, job_state(base2, job2)))
            submit_token(token)
            wait_for("job %d cancelled with the token (REST)" % job2,
                     lambda: job_state(base2, job2) == "cancelled", JOB_S)
            wait_for("the page to say job %d is cancelled" % job2, lambda: (
                page_text(cdp, "#job-message") == "job %d cancelled" % job2
                and page_text(cdp, "#job-cancel") is None and page_text(cdp, "#token-form") is None), STARTUP_S)
            where = cdp.eval("location.href + ' ' + document.title")
            if token in where:
                fail("the token is in the page's address or title: %r" % where)
            if cdp.eval("sessionStorage.getItem('hmpmd.token')") != token:
                fail("the page does not keep the token for the tab")
            print("PASS: with --public-read, Cancel asked for the token, refused a wrong one, "
                  "cancelled job %d" % job2)

            # Without --public-read, reads need the token too: the page asks
            # for it before anything shows, refuses a wrong one, and with
            # the right one reads and streams (the stream by its cookie).
            zport3, hport3 = free_port(), free_port()
            base3 = "http://127.0.0.1:%d" % hport3
            procs.append((subprocess.Popen([a.hmpmd, "controller", "--listen", "tcp://127.0.0.1:%d" % zport3,
                                            "--http", "127.0.0.1:%d" % hport3, "--log-level", "warn",
                                            "--db", "", "--token-file", token_file],
                                           stdout=logs, stderr=logs), False))
            cluster[:] = procs[-1:] + cluster
            wait_for("the read-guarded controller", lambda: http(
                base3 + "/api/v1/pool", headers={"Authorization": "Bearer " + token})[0] == 200,
                STARTUP_S, alive=cluster_dead)
            try:
                http(base3 + "/api/v1/pool")
                fail("a read without the token was answered")
            except urllib.error.HTTPError as e:
                if e.code != 401:
                    fail("a read without the token: HTTP %d, not 401" % e.code)
            cdp.eval("sessionStorage.clear()")
            cdp.call("Page.navigate", url=base3 + "/")
            wait_for("the read token form", lambda: cdp.eval("location.port === '%d'" % hport3) and
                     "needs its token to show anything" in (page_text(cdp, "#read-token-form") or ""),
                     STARTUP_S, alive=cluster_dead)
            if cdp.eval("window.hmpmdDashboard.snapshot().connected"):
                fail("the page streams events from a controller that wants its token")

            def submit_read_token(t):
                cdp.eval("document.querySelector('#read-token-input').value = %s;"
                         "document.querySelector('#read-token-form').requestSubmit()" % json.dumps(t))
            submit_read_token("not-" + token)
            wait_for("the wrong read token message", lambda: "Wrong token: enter it again." in (
                page_text(cdp, "#read-token-form") or ""), STARTUP_S)
            submit_read_token(token)
            wait_for("the page reading and streaming with the token", lambda: cdp.eval(
                "window.hmpmdDashboard.snapshot().connected") and page_text(cdp, "#read-token-form") is None,
                STARTUP_S, alive=cluster_dead)
            cdp.screenshot(os.path.join(a.out, "dashboard-read-token.png"))
            where = cdp.eval("location.href + ' ' + document.title")
            if token in where:
                fail("the token is in the page's address or title: %r" % where)
        finally:
            os.unlink(token_file)
        print("PASS: without --public-read, the page asked for the token, refused a wrong one, "
              "and read and streamed with the right one")
    finally:
        for p, group in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM) if group else p.send_signal(signal.SIGTERM)
        for p, group in reversed(procs):
            stop(p, group)
        for profile in profiles:
            shutil.rmtree(profile, ignore_errors=True)

if __name__ == "__main__":
    main()
