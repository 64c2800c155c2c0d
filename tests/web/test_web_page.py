"""The served web page in a real headless browser: Debian's chromium driven through chromedriver's W3C
WebDriver HTTP API (urllib only). Against `h3-engine serve --api-key` on the tiny CPU checkpoint, loopback only:
the key is asked once, a tiny job is submitted and its progress reaches 100 %, the video element plays the MP4
(readyState >= 2 and currentTime advances) and a download link offers it, a job is cancelled, a bad field shows
its error next to the field, the history lists the jobs. The checkpoint declares its defaults (h3_defaults.json):
the page names the model (GET /v1/models) and fills its fields with them. Saves page.png (a screenshot) into the
work folder.

usage: test_web_page.py H3_ENGINE WORK_DIR
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

H3, WORK = sys.argv[1], sys.argv[2]
CHROMIUM = os.environ.get("H3_CHROMIUM", "/usr/bin/chromium")
DRIVER = os.environ.get("H3_CHROMEDRIVER", "/usr/bin/chromedriver")
KEY = "page-test-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for(what, fn, timeout=90, interval=0.2):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            v = fn()
        except (urllib.error.URLError, ConnectionError):  # not listening yet (server, chromedriver)
            v = None
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


class Browser:
    def __init__(self, port, profile):
        self.base = f"http://127.0.0.1:{port}"
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--autoplay-policy=no-user-gesture-required",
                     "--window-size=1100,1400", f"--user-data-dir={profile}"]}}}}
        st, body = http("POST", self.base + "/session", caps, timeout=120)
        assert st == 200, body
        self.sid = json.loads(body)["value"]["sessionId"]

    def cmd(self, method, path, body=None):
        st, raw = http(method, f"{self.base}/session/{self.sid}{path}", body)
        v = json.loads(raw)["value"] if raw else None
        if st != 200:
            raise AssertionError(f"webdriver {method} {path}: {v}")
        return v

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def el(self, css):
        v = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(v.values()))

    def type(self, css, text, clear=True):
        e = self.el(css)
        if clear:
            self.cmd("POST", f"/element/{e}/clear", {})
        self.cmd("POST", f"/element/{e}/value", {"text": text})

    def click(self, css):
        self.cmd("POST", f"/element/{self.el(css)}/click", {})

    def text(self, css):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)

    def quit(self):
        http("DELETE", f"{self.base}/session/{self.sid}")


def main():
    for exe in (CHROMIUM, DRIVER):
        assert os.access(exe, os.X_OK), f"{exe} is missing (scripts/install_deps.sh installs chromium " \
                                        "and chromium-driver)"
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    subprocess.run([H3, "make-tiny", f"{WORK}/tiny", "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    with open(f"{WORK}/tiny/h3_defaults.json", "w") as f:
        json.dump({"size": "64x32", "frames": 107, "num_inference_steps": 3}, f)
    port, dport = free_port(), free_port()
    log = open(f"{WORK}/serve.log", "w")
    server = subprocess.Popen([H3, "serve", "--model", f"{WORK}/tiny", "--device", "cpu", "--port", str(port),
                               "--output-dir", f"{WORK}/videos", "--api-key", KEY, "--max-body-bytes", "4000000"],
                              stdout=log, stderr=subprocess.STDOUT)
    driver = subprocess.Popen([DRIVER, f"--port={dport}", "--allowed-ips=127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    profile = tempfile.mkdtemp(prefix="h3-chromium-")
    browser = None
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for("the server", lambda: http("GET", url + "/health", timeout=2)[0] == 200 or None, 30)
        wait_for("chromedriver", lambda: _up(dport), 30)
        browser = Browser(dport, profile)
        # the page itself needs no key; the API does: the page asks for it once
        st, _ = http("GET", url + "/")
        assert st == 200
        assert http("GET", url + "/v1/videos")[0] == 401
        browser.cmd("POST", "/url", {"url": url + "/"})
        wait_for("the key form", lambda: browser.js("return !document.getElementById('key-form').hidden;"))
        browser.type("#api-key", KEY)
        browser.click("#key-form button")
        wait_for("the key accepted",
                 lambda: browser.js("return document.getElementById('key-form').hidden && "
                                    "sessionStorage.getItem('h3.apiKey') === arguments[0];", KEY))

        # the model and its defaults, from GET /v1/models
        info = wait_for("the model line", lambda: (lambda t: t if t and "tiny" in t else None)(
            browser.text("#model-info")))
        assert "64x32" in info and "107 frames" in info and "3 steps" in info, info
        fields = browser.js("return ['size', 'seconds', 'steps'].map(i => document.getElementById(i).value);")
        assert fields == ["64x32", "4.458", "3"], fields
        print("model:", info)

        # a bad field: the 400's param puts the message next to the field
        browser.type("#prompt", "a red fox runs through snow")
        browser.type("#size", "100x64")
        browser.type("#seconds", "4")
        browser.type("#steps", "3")
        browser.click("#submit")
        err = wait_for("the size error", lambda: browser.text("#err-size"))
        assert "multiple of 32" in err or "100" in err, err
        assert browser.js("return document.getElementById('size').getAttribute('aria-invalid');") == "true"
        assert browser.text("#err-prompt") == ""
        print("bad field:", err.strip()[:100])

        # a tiny job: progress to 100 %, the video plays
        browser.type("#size", "64x32")
        browser.click("#submit")
        wait_for("the job section", lambda: browser.js("return !document.getElementById('job').hidden;"))
        seen = set()

        def completed():
            seen.add(browser.js("return document.getElementById('job-progress').value;"))
            return browser.text("#job-status") == "completed" or None
        wait_for("the job to complete", completed, 120, 0.05)
        assert browser.js("return document.getElementById('job-progress').value;") == 100
        assert browser.text("#job-percent").strip() == "100 %"
        print("progress values seen:", sorted(seen))
        wait_for("the video to load", lambda: browser.js(
            "return document.getElementById('player').readyState >= 2;"), 30)
        browser.js("document.getElementById('player').play();")
        t0 = browser.js("return document.getElementById('player').currentTime;")
        wait_for("playback", lambda: browser.js(
            "return document.getElementById('player').currentTime > arguments[0];", t0), 20)
        dims = browser.js("const v = document.getElementById('player'); return [v.videoWidth, v.videoHeight];")
        assert dims == [64, 32], dims
        print("video plays:", dims)
        link = browser.js("const a = document.getElementById('download'); "
                          "return [a.hidden, a.href.slice(0, 5), a.download, a.dataset.videoId];")
        assert link[0] is False and link[1] == "blob:" and link[2] == link[3] + ".mp4", link
        print("download link:", link[2])

        # a long job, cancelled from the page
        browser.type("#steps", "400")
        browser.click("#submit")
        wait_for("the long job to run", lambda: browser.text("#job-status") == "in_progress" or None, 60)
        browser.click("#cancel")
        wait_for("the job to be cancelled", lambda: browser.text("#job-status") == "cancelled" or None, 60)
        print("cancelled:", browser.text("#job-id"))
        # the cancel answer can be a snapshot from before the worker stopped and arrive after the stream's
        # "cancelled" event: a stale non-final snapshot must not move the finished job back
        browser.js("showJob({id: current.id, status: 'in_progress', progress: 40});")
        assert browser.text("#job-status") == "cancelled", browser.text("#job-status")
        assert browser.js("return document.getElementById('cancel').disabled;") is True

        # the history lists both jobs (newest first)
        rows = wait_for("the history", lambda: (lambda r: r if r and len(r) >= 2 else None)(browser.js(
            "return [...document.querySelectorAll('#history tbody tr')].map(r => r.cells[1].textContent);")))
        assert rows[0] == "cancelled" and "completed" in rows, rows
        png = browser.cmd("GET", "/screenshot")
        with open(f"{WORK}/page.png", "wb") as f:
            f.write(base64.b64decode(png))
        print("history:", rows)
        print("web page: all checks passed")
        return 0
    finally:
        if browser:
            browser.quit()
        driver.terminate()
        server.terminate()
        for p in (driver, server):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(profile, ignore_errors=True)


def _up(dport):
    try:
        return http("GET", f"http://127.0.0.1:{dport}/status", timeout=2)[0] == 200 or None
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
