"""`python -m travel.report RUN --html` on the smoke run: one page per run with, for each anchor row, the request,
its constraints and scaffold, the itinerary at the first and last evaluation with each cell marked, the checks and
the reward's terms; read by the HTML parser and loaded in a real headless Chromium (Debian's `chromium` and
`chromium-driver`), which must find every table, no script error and no network fetch."""

from __future__ import annotations

import json
import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from travel.report.__main__ import main
from travel.report.html import CELL_CLASSES, CHECKS, FIELD_LABELS

REQUIRE_BROWSER_ENV = "TRAVEL_REQUIRE_BROWSER"  # CI sets it: a browser that should be there must not skip


class Tables(HTMLParser):
    """Counts each table class, the itinerary cells by class, and every outside reference."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, int] = {}
        self.cells: dict[str, int] = {}
        self.sections = 0
        self.external: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables[attrs.get("class", "")] = self.tables.get(attrs.get("class", ""), 0) + 1
        if tag == "td" and attrs.get("class") in CELL_CLASSES:
            self.cells[attrs["class"]] = self.cells.get(attrs["class"], 0) + 1
        if tag == "section":
            self.sections += 1
        if tag == "script":
            self.scripts += 1
        for name in ("src", "href"):
            if attrs.get(name, "").startswith(("http:", "https:", "//")):
                self.external.append(attrs[name])


@pytest.fixture(scope="module")
def pages(smoke_run, tmp_path_factory):
    run_dir, _ = smoke_run
    out = tmp_path_factory.mktemp("html_report")
    assert main([str(run_dir), "--out", str(out), "--html"]) == 0
    evaluations = json.loads((run_dir / "evaluations.json").read_text())["evaluations"]
    return out / "html", run_dir, evaluations


def test_a_page_per_run_shows_each_anchor_row_with_both_plans_checks_and_terms(pages):
    html_dir, run_dir, evaluations = pages
    page = (html_dir / f"{run_dir.name}.html").read_text()
    parsed = Tables()
    parsed.feed(page)
    anchor = [s for s in evaluations[0]["samples"] if s["panel"] == 1]
    rows = len(anchor)
    assert rows >= 1 and parsed.sections == rows
    assert parsed.tables == {"curve": 1, "constraints": rows, "scaffold": rows, "itinerary": 2 * rows, "checks": rows, "terms": rows}
    days = sum(s["days"] for s in anchor)
    assert sum(parsed.cells.values()) == 2 * days * len(FIELD_LABELS)  # every slot of both plans is marked
    commonsense = [name for name, kind, _ in CHECKS if kind == "commonsense"]
    for name in (*commonsense, "budget"):  # the budget applies to every request
        assert f"<tr><td>{name}</td>" in page
    final = evaluations[-1]["samples"][0]
    assert f'{final["reward"]:.4f}</td></tr>' in page  # the reward row of the terms table
    assert f"env step {evaluations[-1]['env_step']}" in page
    assert parsed.scripts == 0 and parsed.external == []  # readable offline
    index = (html_dir / "index.html").read_text()
    assert f'href="{run_dir.name}.html"' in index


def _browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", driver)) if path is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        reason = f"no headless browser: {', '.join(missing)} missing (apt-get install chromium chromium-driver)"
        if os.environ.get(REQUIRE_BROWSER_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1600,1400"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def test_the_page_loads_in_headless_chromium_without_errors_or_fetches(pages, tmp_path):
    from selenium.webdriver.common.by import By

    html_dir, run_dir, evaluations = pages
    browser = _browser()
    try:
        browser.get((html_dir / f"{run_dir.name}.html").as_uri())
        assert browser.execute_script("return document.readyState") == "complete"
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
        # nothing fetched beyond the page itself
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        sections = browser.find_elements(By.CSS_SELECTOR, "section.row")
        assert len(sections) == len([s for s in evaluations[0]["samples"] if s["panel"] == 1])
        for section in sections:
            itineraries = section.find_elements(By.CSS_SELECTOR, "table.itinerary")
            assert len(itineraries) == 2 and all(table.is_displayed() for table in itineraries)
            checks = section.find_elements(By.CSS_SELECTOR, "table.checks tr")
            assert len(checks) >= 1 + 9  # the header, eight commonsense checks and the budget
            assert section.find_element(By.CSS_SELECTOR, "table.terms").is_displayed()
        # the marked cells are coloured: a grounded, ungrounded, empty or conflict cell is not white
        cell = browser.find_element(By.CSS_SELECTOR, "table.itinerary td")
        assert cell.value_of_css_property("background-color") not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
        shot = tmp_path / "page.png"
        assert browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        browser.get((html_dir / "index.html").as_uri())
        link = browser.find_element(By.LINK_TEXT, run_dir.name)
        link.click()
        assert browser.find_elements(By.CSS_SELECTOR, "section.row")
    finally:
        browser.quit()
