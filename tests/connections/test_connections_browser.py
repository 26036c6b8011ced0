"""The OAuth browser flow in a real headless Chromium (Debian's, driven by Playwright).

``glovebox connect`` (the library's two halves) begins an authorization; Chromium opens its URL, the
user approves at the Authlib authorization server, and the server's redirect brings Chromium to the
console's callback, which completes the connection. Then the user signs in to the console and sees
the connection on its page, and revokes it there.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from glovebox.connections import access_token

from .conftest import Served

playwright_api = pytest.importorskip("playwright.sync_api", reason="the ui-test extra (playwright) is not installed")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (`make test` installs it)"),
]

ADMIN_KEY = "admin-key-oauth"


@pytest.fixture
def page(served: Served) -> Iterator[playwright_api.Page]:
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        context = browser.new_context()
        dialogs: list[str] = []
        opened = context.new_page()
        opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        yield opened
        context.close()
        browser.close()
        assert dialogs == []


def test_chromium_connects_through_the_console_and_revokes_there(served: Served, page: playwright_api.Page) -> None:
    page.goto(served.begin(account="admin"))
    page.locator("#user").fill("admin")
    page.locator("#approve").click()
    page.wait_for_url(f"{served.redirect}?**")
    assert page.locator("#connected code.connection").inner_text() == "notes/admin"
    assert page.locator("#connected strong").inner_text() == "valid"
    token, _ = access_token(served.store(), "notes", "admin")
    assert token not in page.content(), "the page never shows the token"
    # The console's page lists it for its account's principal, who may revoke it.
    page.goto(f"{served.console}/ui/connections")
    page.get_by_label("API key").fill(ADMIN_KEY)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/connections")
    row = page.locator("#connections tbody tr")
    assert row.count() == 1 and row.locator("td.status").inner_text() == "valid"
    row.get_by_role("button", name="Revoke").click()
    page.wait_for_url("**/ui/connections")
    assert page.locator("#connections td.status").inner_text() == "revoked"
    assert served.store().get("notes", "admin").status() == "revoked"
    assert all(t.revoked for t in served.auth.tokens), "the server was told (RFC 7009)"
