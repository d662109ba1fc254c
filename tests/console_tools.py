"""Helpers for the console tests: a ``scrapy console`` subprocess and a headless
Chromium driven by Selenium (Debian's ``chromium`` and ``chromium-driver``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tests.services import unavailable
from topicspider.runner import project_env, scrapy_command

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
LISTENING = re.compile(r"topicspider console on (http://\S+/)")
T = TypeVar("T")


def replaced(exc: Exception) -> bool:
    """Whether a WebDriver error says the element belonged to a page since replaced:
    Chromium reports it as a stale element, or (seen in CI, Chromium 156) as an inspector
    error, "Node with given id does not belong to the document"."""
    from selenium.common.exceptions import StaleElementReferenceException

    return isinstance(exc, StaleElementReferenceException) or "does not belong to the document" in str(exc)


def texts_of(driver: Any, selector: str) -> list[str]:
    """The texts of the elements ``selector`` finds; empty while the page is being
    replaced (after a form is sent, the old page's elements go stale one by one)."""
    from selenium.common.exceptions import WebDriverException

    try:
        return [str(element.text) for element in driver.find_elements("css selector", selector)]
    except WebDriverException as exc:
        if replaced(exc):
            return []
        raise


@contextmanager
def running_console(workdir: Path, *options: str, timeout: float = 30) -> Iterator[str]:
    """``scrapy console --port 0 OPTIONS`` in ``workdir``; yields its base URL."""
    output = workdir / "console.out"
    with output.open("w") as log:
        process = subprocess.Popen(scrapy_command("console", "--port", "0", *options), cwd=workdir,
                                   env=project_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + timeout
        while not (found := LISTENING.search(output.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the console did not start:\n{output.read_text()[-3000:]}")
            time.sleep(0.1)
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_for(check: Callable[[], T], timeout: float = 30, every: float = 0.2, what: str = "") -> T:
    """``check()``'s first truthy result, polled; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or check}")
        time.sleep(every)


def text_of(driver: Any, element_id: str) -> str:
    """The element's text; empty while the page is being replaced (after a button)."""
    from selenium.common.exceptions import NoSuchElementException, WebDriverException

    try:
        return str(driver.find_element("id", element_id).text)
    except NoSuchElementException:
        return ""
    except WebDriverException as exc:
        if replaced(exc):
            return ""
        raise


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium under Selenium; skips (or fails in CI) without the browser."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        unavailable(f"the browser tests need Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
                    "apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="topicspider-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # Without the background-networking flags Chromium keeps trying the closed network.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1280,1500", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
