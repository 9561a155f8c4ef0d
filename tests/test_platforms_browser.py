"""The platforms page in headless Chromium against the session's live ``moescope serve`` holding the
reference and an "H200" report built from it (test_platforms._other_gpu): opened without
arguments (the newest report of each GPU), at 1440 and 1024 px, printed. Screenshots and
PDF: test-output/screenshots/platforms-*."""

from __future__ import annotations

from typing import Any

import pytest
import test_dashboard_browser
from conftest import _REFERENCE, LiveServer
from selenium.webdriver.common.by import By
from shared_server import SharedServer
from test_compare_browser import printed
from test_dashboard_browser import SCREENSHOTS, drawn, wait_for
from test_platforms import _other_gpu

pytestmark = pytest.mark.live

browser = test_dashboard_browser.browser


@pytest.fixture(scope="module")
def server(shared_server: SharedServer) -> tuple[LiveServer, list[int]]:
    """The session's server holding these two reports and nothing else: the page opened
    without arguments, and the "compare with…" links, show the newest report of every GPU
    in the database, so it is emptied first."""
    shared_server.empty()
    return shared_server.live, shared_server.post([_REFERENCE, _other_gpu(_REFERENCE)])


def test_platforms_page_draws_labelled_charts_and_the_winner_matrix(
        browser: Any, server: tuple[LiveServer, list[int]]) -> None:
    live, (gb300, h200) = server
    groups = {(c["mode"], c["category"]) for c in _REFERENCE["cases"]}
    n = len(_REFERENCE["cases"])
    browser.get_log("browser")
    for width in (1440, 1024):
        browser.set_window_size(width, 1000)
        browser.get(live.url + "/platforms")
        charts = wait_for(browser, lambda d: len(c := drawn(d)) == len(groups) + 1 and c,
                          "every platforms chart")
        headline = browser.find_element(By.ID, "platforms-headline").text
        assert headline == ("H200 vs GB300 NVL72: peaks and shapes differ, matched by "
                            f"configuration: {n - 1} of {n}")
        # Every bar's value is written beside it (no hover needed): one text per bar.
        labels = browser.execute_script(
            "return document.getElementById('platforms-bars-0')"
            ".querySelectorAll('.bartext').length")
        assert labels == charts["platforms-bars-0"]
        ticks = browser.execute_script(
            "return Array.from(document.getElementById('platforms-bars-0')"
            ".querySelectorAll('.ytick text')).map(t => t.textContent)")
        assert ticks and all(t.startswith("EP") for t in ticks)
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width}"
        browser.save_screenshot(str(SCREENSHOTS / f"platforms-{width}.png"))
        wait_for(browser, lambda d: d.find_elements(By.ID, "platforms-matrix"),
                 "the winner matrix")
        browser.execute_script(
            "document.getElementById('platforms-matrix').scrollIntoView()")
        browser.save_screenshot(str(SCREENSHOTS / f"platforms-{width}-matrix.png"))
    cells = browser.find_elements(By.CSS_SELECTOR, "#platforms-detail td.not-run")
    assert [c.text for c in cells] == ["not run"]
    # The winner matrix: a row per configuration; each platform heads its variants.
    configs = {(c["mode"], c["ep"], c["category"], c["F"], c["imbalance"])
               for c in _REFERENCE["cases"]}
    variants = sorted({f"{c['precision']} · {c['pipeline']}" for c in _REFERENCE["cases"]})
    heads = browser.execute_script(
        "const rows = document.querySelectorAll('#platforms-matrix thead tr');"
        "return [Array.from(rows[0].cells).map(c => [c.textContent, c.colSpan]),"
        "        Array.from(rows[1].cells).map(c => c.textContent)]")
    assert heads[0] == [["configuration", 1], [f"H200 #{h200}", len(variants)],
                        [f"GB300 NVL72 #{gb300}", len(variants)]]
    assert sorted(heads[1][:len(variants)]) == variants == sorted(heads[1][len(variants):])
    rows = browser.find_elements(By.CSS_SELECTOR, "#platforms-matrix tbody tr")
    assert len(rows) == len(configs)
    best = browser.execute_script(
        "return Array.from(document.querySelectorAll('#platforms-matrix tbody tr'))"
        ".map(r => r.querySelectorAll('td.best, td.tied').length)")
    assert all(n >= 1 for n in best)  # every configuration has a best, or tied ones
    assert printed(browser, "platforms-print") >= 2
    # A filter narrows the page and goes into the URL.
    browser.find_element(By.CSS_SELECTOR, "#platforms-precision input[value='bf16']").click()
    wait_for(browser, lambda d: "precision=bf16" in d.current_url, "the URL to follow")
    rows = browser.find_elements(By.CSS_SELECTOR, "#platforms-detail tbody tr")
    bf16 = sum(1 for c in _REFERENCE["cases"] if c["precision"] == "bf16")
    assert len(rows) == bf16
    assert f"reports={h200},{gb300}" in browser.current_url
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_compare_across_gpus_says_so_and_matches_by_configuration(
        browser: Any, server: tuple[LiveServer, list[int]]) -> None:
    live, (gb300, h200) = server
    n = len(_REFERENCE["cases"])
    browser.set_window_size(1440, 1000)
    browser.get(f"{live.url}/reports/{gb300}")
    link = wait_for(browser, lambda d: d.find_element(By.ID, "report-compare-with"),
                    "the compare-with links")
    assert link.text.split("\n") == ["compare with…", f"H200 #{h200}",
                                      "all GPUs side by side"]
    browser.find_element(By.LINK_TEXT, f"H200 #{h200}").click()
    wait_for(browser, lambda d: "compare-ratio" in drawn(d), "the ratio chart")
    assert browser.find_element(By.ID, "compare-headline").text == (
        f"GB300 NVL72 vs H200: peaks and shapes differ, matched by configuration: "
        f"{n - 1} of {n}")
    bars = browser.execute_script(
        "return document.getElementById('compare-ratio').querySelector('.js-plotly-plot')"
        "._fullData.reduce((n, t) => n + t.y.length, 0)")
    assert bars == n - 1  # not an empty chart: every configuration both ran
    browser.save_screenshot(str(SCREENSHOTS / "platforms-compare-cross-gpu.png"))
