"""Real-browser helpers: start the dashboard on a free port and drive Debian's chromium with Playwright."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def require_chromium():
    """Skip when chromium is absent on a developer machine; in CI (CI=true) its absence is a failure."""
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dashboard(store: Path | None, timeout: float = 60.0, env: dict | None = None, toolbar: str = "minimal"):
    """Run ``streamlit run app.py`` with SAGO_STORE=store on 127.0.0.1 (extra ``env``: e.g. share mode); yield its URL.

    ``toolbar``: Streamlit's ``client.toolbarMode`` ("viewer": the menu ⋮ with the theme, as .streamlit/config.toml)."""
    port = free_port()
    env = {k: v for k, v in {**os.environ, "SAGO_STORE": str(store or ""), "HF_HUB_OFFLINE": "1", **(env or {})}.items()
           if v != ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--client.toolbarMode", toolbar],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stdout.read().decode(errors="replace")) from None
                time.sleep(0.3)
        else:
            raise TimeoutError("dashboard did not start")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


#: While ``shared_chromium`` is open: [playwright, browser or None (launched at the first ``browser_page``)].
_SHARED: list | None = None


@contextmanager
def shared_chromium():
    """Within this block every ``browser_page`` opens a fresh context (cookies, storage, viewport of its own) in
    one chromium, launched at the first page and closed at the end; outside it each page launches its own.

    Playwright's sync API holds an event loop for as long as it runs, so the block must not outlive the tests
    that use it (tests/browser/conftest.py opens one per test module)."""
    global _SHARED
    _SHARED = [None, None]
    try:
        yield
    finally:
        pw, b = _SHARED
        _SHARED = None
        if b is not None:
            b.close()
        if pw is not None:
            pw.stop()


def _launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


@contextmanager
def browser_page(width: int = 1400, height: int = 1000, color_scheme: str = "light"):
    """A chromium page of this viewport in a context of its own; ``color_scheme`` "dark" makes Streamlit (theme:
    the system's) dark. Every context the test opens on its browser is closed at the end."""
    from playwright.sync_api import sync_playwright

    if _SHARED is None:
        with sync_playwright() as p:
            b = _launch(p)
            try:
                yield b.new_page(viewport={"width": width, "height": height}, color_scheme=color_scheme)
            finally:
                b.close()
        return
    if _SHARED[1] is None or not _SHARED[1].is_connected():
        if _SHARED[0] is None:
            _SHARED[0] = sync_playwright().start()
        _SHARED[1] = _launch(_SHARED[0])
    b = _SHARED[1]
    before = list(b.contexts)
    try:
        context = b.new_context(viewport={"width": width, "height": height}, color_scheme=color_scheme)
        yield context.new_page()
    finally:
        for c in b.contexts:
            if c not in before:
                c.close()


#: Every size × theme a presenter uses (for checks where the layout depends on both at once).
ALL_SCREENS = [(1280, 720, "light"), (1280, 720, "dark"), (1440, 900, "light"), (1440, 900, "dark")]
#: Each size and each theme once, the small screen dark (where contrast and fit are tightest): for checks
#: of content, whose size and theme effects do not interact.
SCREENS = [(1280, 720, "dark"), (1440, 900, "light")]


def screenshot_dir() -> Path:
    d = Path(os.environ.get("SAGO_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def listen_addresses(port: int) -> set[str]:
    """IPv4 addresses a local socket listens on for ``port`` (from /proc/net/tcp; Linux)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        ip_hex, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:  # 0A = LISTEN
            out.add(socket.inet_ntoa(bytes.fromhex(ip_hex)[::-1]))
    return out


@contextmanager
def launcher(args: list[str], env: dict | None = None, timeout: float = 90.0, log: Path | None = None):
    """Start the dashboard through scripts/dashboard.sh (setup skipped) on a free port; yield (url, port).

    ``log``: a file that receives the server's stdout and stderr (kept after the server stops)."""
    port = free_port()
    env = {**os.environ, "SAGO_SKIP_SETUP": "1", "HF_HUB_OFFLINE": "1", "SAGO_LIVE_WARMUP": "0", **(env or {})}
    env.pop("SAGO_STORE", None)
    out = open(log, "wb") if log is not None else subprocess.PIPE
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "dashboard.sh"), *args, "--server.port", str(port)],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    text = Path(log).read_bytes() if log is not None else proc.stdout.read()
                    raise RuntimeError(text.decode(errors="replace")) from None
                time.sleep(0.3)
        else:
            raise TimeoutError("dashboard did not start")
        yield url, port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log is not None:
            out.close()


#: Injected before any page script: records every entry Streamlit's own sidebar page list ever shows.
NAV_RECORDER = """
window.__sagoNavSeen = [];
new MutationObserver(() => {
  for (const el of document.querySelectorAll('[data-testid="stSidebarNav"] a, [data-testid="stSidebarNavItems"] a')) {
    const t = (el.textContent || '').trim();
    if (t && !window.__sagoNavSeen.includes(t)) window.__sagoNavSeen.push(t);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def download(page, key: str, timeout_ms: int = 120_000) -> tuple[str, bytes]:
    """Click the download button whose widget key is ``key``; return the file's suggested name and bytes.

    A click on a long page can land while the page is still scrolling the button into view and start
    no download: the button is clicked once more before the test fails (AssertionError naming ``key``).
    """
    btn = page.locator(f".st-key-{key} button").first
    btn.wait_for(timeout=60_000)
    try:
        with page.expect_download(timeout=min(timeout_ms, 30_000)) as info:
            btn.click(timeout=60_000)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: the click started nothing; once more
        try:
            with page.expect_download(timeout=timeout_ms) as info:
                btn.click(timeout=60_000)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"no file from the download button {key}") from e
    return info.value.suggested_filename, Path(info.value.path()).read_bytes()


#: True once Streamlit's running indicator is gone (a rerun finished).
READY = "!document.querySelector('[data-testid=\"stStatusWidget\"]')"


#: True once the script has finished and stayed finished for ``quiet`` ms: Streamlit's own script state on the
#: app's root is "notRunning" and its running indicator is gone. The frame may rerun a page once, and a short
#: run never shows the indicator, so the state must hold for a while, not only be reached. Charts draw after
#: the run: the quiet time ends only once every Plotly chart holds its svg and every Vega-Lite chart its
#: canvas or svg, or after 3 s of quiet (a chart that never draws is the test's to find).
_SETTLED_JS = """quiet => {
  const app = document.querySelector('[data-testid="stApp"]');
  const idle = !!app && app.dataset.testScriptState === 'notRunning'
               && !document.querySelector('[data-testid="stStatusWidget"]');
  const now = performance.now();
  if (!idle) { window.__sagoIdleSince = null; return false; }
  if (window.__sagoIdleSince == null) window.__sagoIdleSince = now;
  const drawn = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('svg.main-svg'))
    && [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].every(c => c.querySelector('canvas, svg'));
  const t = now - window.__sagoIdleSince;
  return t >= quiet && (drawn || t >= 3000);
}"""


def settle(page, quiet_ms: int = 500, timeout: int = 180_000, rerun: bool = False) -> None:
    """Wait until the page's script run has finished and no new run started for ``quiet_ms`` (polled every
    50 ms in the page). After a navigation as is; after an input that starts a rerun pass ``rerun=True``: it
    first waits (up to 2 s) for that run to start. Raises playwright's TimeoutError after ``timeout`` ms."""
    if rerun:
        try:
            page.wait_for_function("() => document.querySelector('[data-testid=\"stApp\"]')?.dataset"
                                   ".testScriptState !== 'notRunning'", polling=20, timeout=2_000)
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: the run was over before the first poll
            pass
    page.evaluate("() => { window.__sagoIdleSince = null; }")
    page.wait_for_function(_SETTLED_JS, arg=quiet_ms, polling=50, timeout=timeout)


#: The bounding box of the first match of a selector and of every element it draws inside; waited on until
#: it holds still (a chart lays out after it mounts).
_BOXES_JS = """sel => {
  const el = document.querySelector(sel);
  if (!el) return null;
  const r = e => { const b = e.getBoundingClientRect(); return [b.top, b.bottom, b.left, b.right].map(Math.round); };
  const parts = [...el.querySelectorAll('svg, canvas')];
  return parts.length ? JSON.stringify([r(el), ...parts.map(r)]) : '';
}"""


def wait_still(page, selector: str, frames: int = 5, timeout: int = 60_000) -> None:
    """Wait until the first ``selector`` has drawn (an svg or canvas inside) and it and everything it draws keep
    the same boxes over ``frames`` polls 100 ms apart (a chart has laid out); returns at once when nothing
    matches; raises playwright's TimeoutError after ``timeout`` ms."""
    js = ("([sel, n]) => { const now = (" + _BOXES_JS + ")(sel); const w = window.__sagoStill || (window.__sagoStill = {});"
          " if (now === null) return true; if (now === '') return false; if (w[sel] && w[sel].boxes === now) w[sel].n += 1;"
          " else w[sel] = {boxes: now, n: 0}; return w[sel].n >= n; }")
    page.evaluate("() => { window.__sagoStill = {}; }")
    page.wait_for_function(js, arg=[selector, frames], polling=100, timeout=timeout)


def wait_ready(page, timeout: int = 180_000, rerun: bool = False) -> None:
    """Wait until the app's frame is drawn (sidebar, open or collapsed) and no rerun is running; no exception shown.

    ``rerun``: the page was not opened but changed by an input (``settle``)."""
    page.locator("[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl']").first.wait_for(
        state="attached", timeout=timeout)
    settle(page, timeout=timeout, rerun=rerun)
    assert page.locator("[data-testid='stException']").count() == 0


def fill_live_form(page, prompt: str, max_variants: int, new_tokens: int) -> None:
    """On the Live page: set Max variants and New tokens, type ``prompt`` and commit it (Ctrl+Enter); returns
    when the page lists the ``max_variants`` planned variants."""
    box = page.locator("[data-testid='stTextArea'] textarea").first
    box.wait_for(timeout=120_000)
    for label, value in (("Max variants", str(max_variants)), ("New tokens", str(new_tokens))):
        field = page.get_by_role("spinbutton", name=label)
        field.fill(value)
        field.press("Enter")
        page.wait_for_timeout(400)
    box.fill(prompt)
    box.press("Control+Enter")
    page.get_by_text(f"Variants ({max_variants})").wait_for(timeout=60_000)
