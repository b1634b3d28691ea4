"""Processes and HTTP for the live stack test: daemons whose stdout lines can
be waited for, free loopback ports, HTTP without proxies, Prometheus range
queries and promtool.
"""

import json
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from deploytest import fail

# Loopback only: never through a proxy from the environment.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def tail(path, size=1500):
    """The end of a log file ("" if it cannot be read)."""
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


class Daemon:
    """A child process: stdout kept in memory to wait for lines, stderr in `log`."""

    def __init__(self, name, argv, log):
        self.name, self.log = name, log
        with open(log, "wb") as err:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True
            )
        self.out = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.out += line

    def line(self, pattern, seconds=30):
        """The first match of `pattern` in stdout; fails after `seconds` or if the process ends."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            match = re.search(pattern, self.out)
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        fail(
            f"{self.name} printed no line matching {pattern} (stdout: {self.out.strip()}; "
            f"exit {self.process.poll()}; log {tail(self.log)})"
        )

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def free_port():
    """A loopback TCP port free now (for a program that cannot listen on port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    """(status, body) of a GET."""
    try:
        with _HTTP.open(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def promtool_metrics(text):
    """promtool check metrics of an exposition: (clean, what it printed)."""
    run = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    said = (run.stdout + run.stderr).strip()
    return run.returncode == 0 and not said, f"exit {run.returncode}: {said}"


class Prometheus:
    """Range queries against a Prometheus at `url` over [start, end] in 0.5 s steps."""

    def __init__(self, url):
        self.url = url
        self.start = self.end = None

    def range(self, expr):
        """The result of a range query; raises RuntimeError when Prometheus refuses it."""
        query = urllib.parse.urlencode(
            {"query": expr, "start": self.start, "end": self.end, "step": "0.5"}
        )
        status, body = http_get(f"{self.url}/api/v1/query_range?{query}")
        try:
            answer = json.loads(body)
        except ValueError:
            answer = {}
        if answer.get("status") != "success":
            raise RuntimeError(f"{expr}: {answer.get('error') or f'HTTP {status}: {body}'}")
        return answer["data"]["result"]
