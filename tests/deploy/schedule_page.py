"""The coordinator's schedule page in Debian's headless Chromium, driven by
Selenium through Debian's chromedriver. Both paths are given to Selenium, so
it never looks for (or downloads) a browser or a driver of its own.

ZBPP_CHROMIUM and ZBPP_CHROMEDRIVER override /usr/bin/chromium and
/usr/bin/chromedriver.
"""

import os
from pathlib import Path

from deploytest import FIX, fail, need

need("selenium", "selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

CHROMIUM = os.environ.get("ZBPP_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ZBPP_CHROMEDRIVER", "/usr/bin/chromedriver")
WINDOW = (1400, 1250)
FLAGS = (
    "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-sync "
    "--disable-background-networking --disable-component-update --disable-dev-shm-usage "
    "--hide-scrollbars"
).split()

# Read in one script, so that the page's own refresh cannot come in between:
# the chart rows of the first chart of each kind (-1 when there is none),
# whether the page refreshes itself, whether it names `arguments[0]`.
FACTS = """
const rows = (kind) => {
  const chart = document.querySelector('div.chart.' + kind);
  return chart ? chart.querySelectorAll('svg rect.row').length : -1;
};
return {
  measured: rows('measured'),
  planned: rows('planned'),
  refreshes: document.querySelector('meta[http-equiv="refresh"]') !== null,
  names: document.documentElement.outerHTML.includes(arguments[0]),
};
"""


def browser(profile, log):
    """A headless Chromium with its own profile directory; chromedriver logs to `log`."""
    for tool in (CHROMIUM, CHROMEDRIVER):
        if not os.access(tool, os.X_OK):
            fail(f"{tool} not found; {FIX}")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(executable_path=CHROMEDRIVER, log_output=str(log)), options=options
    )
    # The window's size includes the browser's frame: make the page's own
    # viewport (what a screenshot holds) WINDOW.
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
    )
    return driver


def facts(driver, url, name):
    """Loads `url` and returns FACTS about it (`name`: what the page must name)."""
    driver.get(url)
    return driver.execute_script(FACTS, name)


def screenshot(driver, url, png):
    """Loads `url` and writes what the window shows to `png`; returns its size in bytes."""
    Path(png).unlink(missing_ok=True)
    driver.get(url)
    driver.save_screenshot(str(png))
    return Path(png).stat().st_size if Path(png).exists() else 0
