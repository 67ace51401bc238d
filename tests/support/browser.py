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


@contextmanager
def browser_page(width: int = 1400, height: int = 1000, color_scheme: str = "light"):
    """A chromium page of this viewport; ``color_scheme`` "dark" makes Streamlit (theme: the system's) dark."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = b.new_page(viewport={"width": width, "height": height}, color_scheme=color_scheme)
            yield page
        finally:
            b.close()


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


def wait_ready(page, timeout: int = 180_000) -> None:
    """Wait until the app's frame is drawn (sidebar, open or collapsed) and no rerun is running; no exception shown."""
    page.locator("[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl']").first.wait_for(
        state="attached", timeout=timeout)
    page.wait_for_timeout(800)
    page.wait_for_function(READY, timeout=timeout)
    page.wait_for_timeout(1200)
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
