"""textdp serve in a real browser: Debian's headless Chromium driven by Playwright for Python.

Never downloads a browser (no ``playwright install``): it launches ``/usr/bin/chromium`` from Debian's
packages (``apt-get install chromium``) and is skipped, with the reason, when that or Playwright is absent.
The test types a text, moves ε with the keyboard, and checks that the output, the guarantee and the kept
fraction change; its screenshot is the README's (``TEXTDP_UPDATE_SCREENSHOT=1`` writes it to docs/serve.png).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-sync"]
TEXT = ("Dear Anna, the quarterly report for the Boston office is late again. Please send the revised budget "
        "figures to Michael before Friday, and remind the auditors about the pension fund review.")
DOCS_PNG = Path(__file__).resolve().parents[1] / "docs" / "serve.png"


def _require_browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium); browser tests skipped")
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is absent; browser tests skipped")
    pytest.importorskip("uvicorn", reason="textdp serve needs the [serve] extra")


@pytest.fixture(scope="module")
def server():
    _require_browser()
    proc = subprocess.Popen([sys.executable, "-m", "textdp", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        m = re.fullmatch(r"textdp serve: (http://127\.0\.0\.1:\d+/)\n", line)
        assert m, f"unexpected first line: {line!r}"
        yield m.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 1000})
            pg.set_default_timeout(60_000)
            pg.goto(server)
            yield pg
        finally:
            browser.close()


def _expect(page, selector):
    """Playwright's waiting assertions (they run under the page's strict CSP, unlike string predicates)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # a loaded 2-core machine fits a new mechanism in seconds
    return expect(page.locator(selector))


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_type_move_epsilon_and_see_the_release_change(page, tmp_path):
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.wait_for_selector("#mechanism option[value='earth-movers']", state="attached")
    assert page.input_value("#mechanism") == "earth-movers"
    assert "no text leaves this machine" in page.text_content("#local-note")

    page.fill("#text", TEXT)
    page.wait_for_selector("#output .w")
    kept0 = page.text_content("#kept-fraction")
    guarantee0 = page.text_content("#guarantee")
    assert "epsilon=10 " in guarantee0 and "N=10" in guarantee0
    assert page.text_content("#not-covered").strip() not in ("", "–")

    # move ε down to its minimum with the keyboard: everything is replaced, the guarantee says 0.1
    page.focus("#epsilon-slider")
    page.keyboard.press("Home")
    _expect(page, "#guarantee").to_contain_text("epsilon=0.1 ")
    _expect(page, "#kept-fraction").not_to_have_text(kept0)
    kept1 = page.text_content("#kept-fraction")
    assert kept1 == "0%" and page.input_value("#epsilon") == "0.1"
    assert page.locator("#output .w.kept").count() == 0

    # and to its maximum: every protected word survives
    page.keyboard.press("End")
    _expect(page, "#kept-fraction").to_have_text("100%")
    assert "epsilon=1000 " in page.text_content("#guarantee")
    assert page.locator("#output .w.replaced").count() == 0
    assert page.locator("#input-view .w.kept").count() == 10

    # a mechanism that replaces words in place: the output keeps the order, the guarantee changes unit
    page.select_option("#mechanism", "random")
    _expect(page, "#guarantee").to_contain_text("per word")
    _expect(page, "#output .w").to_have_count(18)

    # back to the default view for the screenshot: earth-movers at ε = 10, the curve, the audit
    page.select_option("#mechanism", "earth-movers")
    _expect(page, "#guarantee").to_contain_text("epsilon=10 ")
    page.wait_for_selector("#plot polyline")
    _expect(page, "#target-eps").to_contain_text("keeps 50%")
    page.click("#audit-button")
    page.wait_for_selector("#audit-result .verdict")
    assert "PASSED" in page.text_content("#audit-result .verdict")

    # a bad ε typed in the box: one clear message on the page
    page.fill("#epsilon", "5000000")
    page.dispatch_event("#epsilon", "change")
    _expect(page, "#error").to_be_visible()
    assert "outside the supported range" in page.text_content("#error")
    _expect(page, "#output").to_have_class(re.compile(r"\bstale\b"))  # the last release is dimmed, not taken as new
    page.fill("#epsilon", "10")
    page.dispatch_event("#epsilon", "change")
    _expect(page, "#error").to_be_hidden()
    _expect(page, "#busy").to_be_hidden()
    _expect(page, "#output").not_to_have_class(re.compile(r"\bstale\b"))
    _expect(page, "#kept-fraction").not_to_have_text("–")

    shot = tmp_path / "serve.png"
    page.screenshot(path=str(shot), full_page=True)
    width, height = _png_size(shot)
    assert width == 1280 and 900 < height < 2400
    if os.environ.get("TEXTDP_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, DOCS_PNG)

    # text is shown as text, never as markup
    page.fill("#text", "<img src=x> <b>quarterly</b> report from the Boston office: budget figures, pension fund "
                       "review, auditors")
    _expect(page, "#input-view").to_contain_text("<img src=x> <b>quarterly</b>")
    _expect(page, "#input-view").not_to_have_class(re.compile(r"\bstale\b"))
    assert page.locator("#input-view img, #input-view b, #output img, #output b").count() == 0
    assert not [e for e in errors if "Content Security Policy" in e], errors
