"""The page at /: headless Chromium (Debian's chromium, driven by Playwright) asks a question and
reads the rendered action, answer and a claim's verdict; a screenshot is saved in tmp_path."""

from __future__ import annotations

import shutil
import tempfile

import pytest

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def browser_page():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        pytest.fail("chromium is not installed: apt-get install -y chromium (.ci/run does)")
    with sync_api.sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                       viewport={"width": 1280, "height": 900})
        yield context.new_page()
        context.close()


def test_the_page_shows_the_action_the_answer_and_each_claims_verdict(service, browser_page, tmp_path):
    page = browser_page
    page.goto(f"{service.base}/")
    page.fill("#question", "Who founded Acme Rockets?")
    page.click("#submit")
    page.wait_for_selector("#claims li .badge", timeout=60_000)
    assert page.inner_text("#action") == "correct"
    # the action is decided on the draft: its confidence against the operating point, and why
    why = page.inner_text("#action-why")
    assert why.startswith("draft confidence 0.") and "(accept 0.50): the draft holds up: it is the answer; " in why
    assert page.inner_text("#answer") == "Acme Rockets was founded by Jane Roe [1]."
    assert page.get_attribute("#answer a", "href") == "#strip-1"
    # the same citation as ask, the JSON and the stream: [1] -> acme.md#0, linked to its strip
    assert page.inner_text("#citations li").startswith("[1] ") and "acme.md#0" in page.inner_text("#citations li")
    assert page.get_attribute("#citation-1 a", "href") == "#strip-1"
    assert page.locator("#citations li").count() == 1
    assert page.inner_text("#strip-1").startswith("Acme Rockets was founded by Jane Roe in 1999.")
    assert page.inner_text("#claims li .badge") == "fully"
    assert "lower 0.2 · upper 0.6" in page.inner_text("#thresholds")
    assert "relevant" in page.inner_text("#passages")
    steps = page.inner_text("#steps")
    assert steps.index("question") < steps.index("graded") < steps.index("action") < steps.index("claims")
    shot = tmp_path / "page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_the_page_shows_a_refused_question(service, browser_page):
    page = browser_page
    page.goto(f"{service.base}/")
    page.fill("#question", "   ")
    page.evaluate("document.getElementById('question').removeAttribute('required')")
    page.click("#submit")
    page.wait_for_selector("#status.error", timeout=30_000)
    assert page.inner_text("#status") == "error 422: question: the question is empty"


def test_the_page_reads_only_the_documents_its_filter_names(service, browser_page):
    page = browser_page
    page.goto(f"{service.base}/")
    page.fill("#question", "Who founded Acme Rockets, by the filter?")
    page.fill("#paths", "danube.md")
    page.click("#submit")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('answered')", timeout=60_000)
    assert "read only: path danube.md" in page.inner_text("#flags")
    assert "filter path danube.md (1 file(s)); the web is not filtered" in page.inner_text("#steps")
    assert "acme.md" not in page.inner_text("#passages") and "acme.md" not in page.inner_text("#citations")
    page.fill("#paths", "archive/**")
    page.click("#submit")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('answered')", timeout=60_000)
    assert page.inner_text("#answer") == "No documents match the filter: path archive/**."
    assert "no documents match the filter (path archive/**)" in page.inner_text("#flags")
