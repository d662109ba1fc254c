"""Makes the README's console screenshot (``topicspider/console/screenshot.png``): a
crawl of a generated local site started from the console's form, caught mid-crawl.

    .venv/bin/python -m tests.console_screenshot

Chinese text needs a CJK font in the browser's reach (Debian: fonts-noto-cjk).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tests.console_tools import chromium, running_console, text_of, wait_for
from topicspider.localsite import generate_site, spawn

OUTPUT = Path(__file__).resolve().parent.parent / "topicspider" / "console" / "screenshot.png"
WORDS = ["电子表格", "公式", "函数", "新闻", "spreadsheet", "教程", "图表", "数据"]


def body(index: int) -> str:
    # Pages on the topic to a varying degree, so that the histogram has a shape.
    on_topic = " ".join(WORDS[: 1 + index % len(WORDS)])
    return f"{on_topic}。这是第{index}页，介绍表格的用法。\nContact: sheets{index % 5}@example.com"


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root, work = Path(scratch) / "site", Path(scratch) / "work"
        work.mkdir()
        generate_site(root, pages=300, links_per_page=3, body_text=body)
        server, port = spawn(root)
        try:
            settings = ["-s", "DOWNLOAD_DELAY=0.1", "-s", "STATUS_INTERVAL=0.5", "-s", "CONSOLE_REFRESH=0.5",
                        "-s", "TOPIC_THRESHOLD=0.3"]
            with running_console(work, *settings) as base, chromium() as driver:
                driver.set_window_size(1280, 1320)
                driver.get(base)
                for field, value in (("seeds", f"http://127.0.0.1:{port}/"), ("depth", "4"),
                                     ("topic", "电子表格, 公式, 函数, spreadsheet")):
                    driver.find_element("id", field).clear()
                    driver.find_element("id", field).send_keys(value)
                driver.find_element("id", "start").click()
                wait_for(lambda: int(text_of(driver, "count-pages_fetched") or 0) >= 60, timeout=60)
                time.sleep(1)
                driver.save_screenshot(str(OUTPUT))
                driver.find_element("id", "stop").click()
                wait_for(lambda: text_of(driver, "process") == "stopped", timeout=60)
        finally:
            server.terminate()
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
