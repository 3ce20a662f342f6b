"""The web viewer in a real headless Chromium (Debian's chromium + chromedriver, driven by
Selenium; nothing is downloaded): the demo's database, sessions -> session -> an event -> time
travel at that event, the slider moved, screenshots saved, and no console errors."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from turnlog.web.app import LOOPBACK_HOSTS, create_app

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT_S = 60  # generous: two cores shared by many test runs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("demo") / "demo.db")
    done = subprocess.run([sys.executable, "-m", "turnlog", "--db", path, "demo"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def server(demo_db):
    port = free_port()
    config = uvicorn.Config(create_app(demo_db, allowed_hosts=LOOPBACK_HOSTS), host="127.0.0.1", port=port,
                            log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=WAIT_S)


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


def wait_for(driver, condition, what: str):
    # While a page is replaced, an element of the old one goes stale: look again. Chromedriver
    # says so of an element found just before the swap as an "unknown error" instead.
    def holds(d) -> bool:
        try:
            return condition(d)
        except WebDriverException as e:
            if "does not belong to the document" in str(e):
                return False
            raise
    return WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,
                                                             NoSuchElementException)).until(holds, message=what)


def test_sessions_session_event_time_travel_and_slider(server, browser, tmp_path):
    console: list[dict] = []
    b = browser

    def collect() -> None:
        console.extend(b.get_log("browser"))

    b.get(server + "/sessions")
    rows = b.find_elements(By.CSS_SELECTOR, "#sessions tbody tr")
    assert len(rows) == 11  # the demo's sessions
    collect()

    # Filter by text through the form, as a person would, then open the session found.
    box = b.find_element(By.ID, "filter-q")
    box.send_keys("turnlog")
    box.submit()
    wait_for(b, lambda d: "q=turnlog" in d.current_url
             and len(d.find_elements(By.CSS_SELECTOR, "a.session-link")) == 1, "the search found not one session")
    links = b.find_elements(By.CSS_SELECTOR, "a.session-link")
    session_id = links[0].text
    links[0].click()
    wait_for(b, lambda d: d.find_elements(By.ID, "transcript"), "the session page did not load")
    assert session_id in b.find_element(By.TAG_NAME, "h1").text
    transcript = b.find_element(By.ID, "transcript").text
    assert "what is turnlog?" in transcript and "hello" in transcript
    b.save_screenshot(str(tmp_path / "session.png"))
    collect()

    # Click the event where the first turn took the lease.
    row = next(r for r in b.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
               if r.find_elements(By.TAG_NAME, "td")[2].text == "LeaseAcquired")
    position = int(row.find_element(By.CSS_SELECTOR, "a.event-link").text.lstrip("#"))
    row.find_element(By.CSS_SELECTOR, "a.event-link").click()
    wait_for(b, lambda d: d.find_elements(By.ID, "travel-here"), "the event page did not load")
    shown = b.find_element(By.CSS_SELECTOR, "p.position")
    assert shown.get_attribute("data-position") == str(position)
    assert f"as of #{position}" in shown.text
    lease_table = b.find_elements(By.TAG_NAME, "table")[1].text
    assert "epoch" in lease_table and "1" in lease_table
    collect()

    # Time travel at that event.
    b.find_element(By.ID, "travel-here").click()
    wait_for(b, lambda d: d.find_elements(By.ID, "slider"), "the time-travel page did not load")
    assert b.find_element(By.ID, "as-of").get_attribute("data-position") == str(position)
    slider = b.find_element(By.ID, "slider")
    assert slider.get_attribute("value") == str(position)
    assert b.find_element(By.ID, "position").get_attribute("value") == f"#{position}"
    assert session_id in b.find_element(By.ID, "asof-sessions").text
    routes = b.find_element(By.ID, "routes").text
    assert "agent:main:discord:dm:77" in routes
    collect()

    # Move the slider back one step: the box follows and the page loads that position.
    slider.send_keys(Keys.ARROW_LEFT)
    wait_for(b, lambda d: d.find_element(By.ID, "as-of").get_attribute("data-position") == str(position - 1),
             "moving the slider did not load the earlier position")
    assert b.find_element(By.ID, "position").get_attribute("value") == f"#{position - 1}"
    assert b.find_element(By.ID, "slider").get_attribute("value") == str(position - 1)
    assert "#" + str(position - 1) in b.find_element(By.TAG_NAME, "h1").text
    shot = tmp_path / "time-travel.png"
    b.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000 and (tmp_path / "session.png").stat().st_size > 10_000
    collect()

    errors = [entry for entry in console if entry["level"] == "SEVERE"]
    assert errors == []


def test_integrity_check_runs_from_the_button(server, browser):
    b = browser
    b.get(server + "/integrity")
    b.find_element(By.CSS_SELECTOR, 'button[data-check="chain"]').click()
    wait_for(b, lambda d: "chain: done" in d.find_element(By.ID, "check-output").text, "the chain check did not end")
    assert '"breaks": []' in b.find_element(By.ID, "check-output").text
    assert [e for e in b.get_log("browser") if e["level"] == "SEVERE"] == []
