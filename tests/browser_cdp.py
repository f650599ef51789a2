"""Open a page in real headless Chromium and record what a user's browser would: console errors,
network requests, the rendered text and DOM, and a screenshot.

A minimal Chrome DevTools Protocol client over `websocket-client` (a dependency of the
`kubernetes` package): Chromium listens on a free port (`--remote-debugging-port=0`) and writes
it to `DevToolsActivePort` in its profile directory.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

DEADLINE = 120.0
"""Seconds to wait for Chromium to start, answer or close: generous, since every wait ends as soon
as its condition holds, and a busy machine starts a browser slowly."""

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


def chromium_available() -> bool:
    return Path(CHROMIUM).is_file()


@dataclass
class Visit:
    """What happened while a page loaded."""

    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    text: str = ""
    dom: str = ""
    png: bytes = b""
    probes: dict[str, Any] = field(default_factory=dict)
    """What each probe script (a JavaScript expression) returned, by name."""


class _Session:
    def __init__(self, ws: websocket.WebSocket, visit: Visit) -> None:
        self.ws, self.visit, self.ids, self.session = ws, visit, itertools.count(1), None
        self.events: list[str] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, deadline: float = DEADLINE
    ) -> dict[str, Any]:
        msg_id = next(self.ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            reply = self.read()
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(f"no answer to {method} within {deadline} s")

    def read(self) -> dict[str, Any]:
        reply = json.loads(self.ws.recv())
        method, params = reply.get("method"), reply.get("params", {})
        if method:
            self.events.append(method)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.visit.console_errors.append(
                " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
                )
            )
        elif method == "Runtime.exceptionThrown":
            self.visit.console_errors.append(str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.visit.console_errors.append(str(params["entry"].get("text")))
        elif method == "Network.requestWillBeSent":
            self.visit.requests.append(params.get("request", {}).get("url", ""))
        return reply

    def wait_for(self, method: str, deadline: float = DEADLINE) -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if method in self.events:
                return
            self.read()
        raise TimeoutError(f"no {method} within {deadline} s")


def visit(
    url: str,
    profile: Path,
    width: int = 1280,
    height: int = 2400,
    probes: dict[str, str] | None = None,
) -> Visit:
    """Load `url` in a fresh headless Chromium with profile dir `profile`; return what was seen,
    with the value of each JavaScript expression in `probes` (measured boxes, for example)."""
    profile.mkdir(parents=True, exist_ok=True)
    log = (profile / "chromium.log").open("wb")
    proc = subprocess.Popen(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        end = time.monotonic() + DEADLINE
        while not (port_file.is_file() and len(port_file.read_text().split()) >= 2):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(
                    f"chromium did not start: {(profile / 'chromium.log').read_text()[-2000:]}"
                )
            time.sleep(0.05)
        port, path = port_file.read_text().split()[:2]
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{port}{path}", timeout=DEADLINE, suppress_origin=True
        )
        result = Visit()
        try:
            cdp = _Session(ws, result)
            target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            cdp.session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            for domain in ("Runtime", "Log", "Network", "Page"):
                cdp.send(f"{domain}.enable")
            cdp.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
            cdp.events.clear()
            cdp.send("Page.navigate", {"url": url})
            cdp.wait_for("Page.loadEventFired")
            time.sleep(0.3)  # late errors or requests, if any, arrive now
            cdp.send("Runtime.evaluate", {"expression": "1"})
            result.text = cdp.send(
                "Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True}
            )["result"]["value"]
            result.dom = cdp.send(
                "Runtime.evaluate",
                {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            )["result"]["value"]
            result.png = base64.b64decode(
                cdp.send("Page.captureScreenshot", {"format": "png"})["data"]
            )
            for name, expression in (probes or {}).items():
                reply = cdp.send(
                    "Runtime.evaluate", {"expression": expression, "returnByValue": True}
                )
                if "exceptionDetails" in reply:
                    details = reply["exceptionDetails"]
                    raise RuntimeError(
                        f"probe {name}: {details.get('exception', {}).get('description', details)}"
                    )
                result.probes[name] = reply["result"].get("value")
            cdp.session = None
            cdp.send("Browser.close")
        finally:
            ws.close()
        proc.wait(timeout=DEADLINE)
        return result
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
