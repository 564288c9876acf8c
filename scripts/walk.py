"""Walk a running portal as each demo login, in English and Chinese, and screenshot every page.

A developer's tool for the walk after each capability (README, "Walking the portal"): start a
fresh clone with ``make run``, then

    .venv/bin/python scripts/walk.py http://127.0.0.1:8000 /tmp/walk [admin committee ...]

It signs in as each demo login, follows every same-site link breadth first (at most two URLs of
each shape, so 64 node pages cost two visits), takes a full-page screenshot of each, and prints
what a user would trip over: a status other than 200, a JavaScript error, a page wider than a
390 px phone, a "Download CSV" link that does not download a CSV. Nothing is changed: forms are
not submitted and links that act (``/logout/``, ``/admin/``'s delete pages) are not followed.
Needs Debian's Chromium (``/usr/bin/chromium``) and the dev requirements (Playwright).
"""

import re
import sys
from collections import deque
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

PASSWORD = "portal-demo"
ROLES = ["admin", "committee", "head-vision", "head-radar"]
LANGUAGES = ["en", "zh-hans"]
SKIP = re.compile(r"/logout|/delete/|/i18n/|/static/|/api/v1/schema|\.(png|svg|js|css)$")
MAX_PER_SHAPE = 2
PHONE_WIDTH = 390


def shape(path: str) -> str:
    """``/nodes/17/`` and ``/nodes/23/`` have one shape: digits and long ids become ``#``."""
    return re.sub(r"/[0-9a-f-]{6,}(?=/|$)|/\d+(?=/|$)", "/#", path)


def walk(base: str, out: Path, roles: list[str]) -> int:
    problems = 0
    host = urlsplit(base).netloc
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        for role in roles:
            for language in LANGUAGES:
                context = browser.new_context(base_url=base, viewport={"width": 1400, "height": 1000})
                context.add_cookies([{"name": "django_language", "value": language, "url": base}])
                page = context.new_page()
                page.set_default_timeout(30_000)
                errors: list[str] = []
                page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
                page.goto("/login/")
                page.fill("input[name=username]", role)
                page.fill("input[name=password]", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_load_state("networkidle")
                seen_shapes: dict[str, int] = {}
                visited: set[str] = set()
                queue = deque(["/"])
                folder = out / f"{role}-{language}"
                folder.mkdir(parents=True, exist_ok=True)
                while queue:
                    path = queue.popleft()
                    if path in visited:
                        continue
                    visited.add(path)
                    key = shape(urlsplit(path).path) + ("?" if "?" in path else "")
                    if seen_shapes.get(key, 0) >= MAX_PER_SHAPE:
                        continue
                    seen_shapes[key] = seen_shapes.get(key, 0) + 1
                    if "export=csv" in path:
                        response = context.request.get(path)
                        kind = response.headers.get("content-type", "")
                        if response.status != 200 or "text/csv" not in kind:
                            print(f"[{role}/{language}] CSV link {path}: {response.status} {kind}")
                            problems += 1
                        continue
                    errors.clear()
                    try:
                        response = page.goto(path)
                    except PlaywrightError as exc:
                        # A download (a report, an export) is not a page: fetch it instead.
                        download = context.request.get(path)
                        if "Download is starting" not in str(exc) or download.status != 200:
                            print(f"[{role}/{language}] {download.status} {path}: {exc}")
                            problems += 1
                        continue
                    page.wait_for_load_state("networkidle")
                    status = response.status if response else 0
                    if status != 200:
                        print(f"[{role}/{language}] {status} {path}")
                        problems += 1
                    if errors:
                        print(f"[{role}/{language}] JS error on {path}: {errors[:2]}")
                        problems += 1
                    name = re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_") or "home"
                    page.screenshot(path=str(folder / f"{name[:120]}.png"), full_page=True)
                    if not path.startswith("/admin"):
                        page.set_viewport_size({"width": PHONE_WIDTH, "height": 900})
                        page.wait_for_timeout(1500)  # the charts redraw at the new width
                        overflow = page.evaluate("document.documentElement.scrollWidth")
                        if overflow > PHONE_WIDTH + 2:
                            print(f"[{role}/{language}] {path} is {overflow} px wide on a phone")
                            problems += 1
                        page.set_viewport_size({"width": 1400, "height": 1000})
                    for href in page.eval_on_selector_all(
                        "a[href]", "els => els.map(e => e.getAttribute('href'))"
                    ):
                        url = urljoin(base + path, href)
                        parts = urlsplit(url)
                        if parts.netloc != host or SKIP.search(parts.path):
                            continue
                        link = parts.path + (f"?{parts.query}" if parts.query else "")
                        if "??" in link or "&&" in link:
                            print(f"[{role}/{language}] malformed link {href} on {path}")
                            problems += 1
                        if link not in visited:
                            queue.append(link)
                print(f"[{role}/{language}] {len(visited)} links seen, {sum(seen_shapes.values())} visited")
                context.close()
        browser.close()
    return problems


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    found = walk(sys.argv[1].rstrip("/"), Path(sys.argv[2]), sys.argv[3:] or ROLES)
    print(f"{found} problems")
    sys.exit(1 if found else 0)
