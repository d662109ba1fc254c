#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver, for the web console's browser tests
# (tests/test_console.py). Without apt-get it says so and leaves it to you: those tests
# then skip, saying why (in CI, TOPICSPIDER_REQUIRE_SERVICES=1 makes that a failure).
set -euo pipefail
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && exit 0
if ! command -v apt-get >/dev/null; then
    echo "install-browser: no apt-get here; install Chromium and ChromeDriver as /usr/bin/chromium and /usr/bin/chromedriver for the browser tests" >&2
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-browser: apt-get install chromium chromium-driver" >&2
$sudo apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q chromium chromium-driver >/dev/null; }
