"""The console in a real headless Chromium (Debian's, driven by Playwright): sign in, approve, attack, look.

Every test records JavaScript dialogs and fails on any: markup in a principal,
a tool description or an input must render as text, never run. Each page is
photographed into ``$GLOVEBOX_SCREENSHOTS`` (default ``build/test-artifacts/console/``
of the checkout; kept after the run, for a person to look at; the docs'
screenshots are taken from there), every page at a desktop's 1280x800 and a
phone's 390x844, and what a person would see wrong is asserted from the DOM:
no sideways scrolling on the phone, no label cut by its box.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from glovebox.guards import BreakerBoard
from glovebox.policy._guards import Breaker

from .conftest import KEYS, XSS_DESCRIPTION, XSS_PRINCIPAL, Console

playwright_api = pytest.importorskip("playwright.sync_api", reason="the ui-test extra (playwright) is not installed")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (`make test` installs it with apt-get)"
)
#: Where the screenshots are kept after the run.
ARTIFACTS = Path(
    os.environ.get("GLOVEBOX_SCREENSHOTS")
    or Path(__file__).resolve().parents[2] / "build" / "test-artifacts" / "console"
)
UI_STATIC = Path(__file__).resolve().parents[2] / "runtime" / "glovebox" / "servers" / "ui" / "static"
XSS_INPUT = {"q": "<script>alert('input')</script>", "note": "</pre><img src=x onerror=alert('pre')>"}


@pytest.fixture
def browser() -> Iterator[playwright_api.Browser]:
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


class Watched:
    """A browser context whose pages all report dialogs into one list."""

    def __init__(self, browser: playwright_api.Browser, console: Console, screens: Path) -> None:
        self.context = browser.new_context(base_url=console.url)
        self.dialogs: list[str] = []
        self.screens = screens
        screens.mkdir(parents=True, exist_ok=True)

    def page(self) -> playwright_api.Page:
        page = self.context.new_page()
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        return page

    def sign_in(self, who: str, target: str = "/ui/approvals") -> playwright_api.Page:
        page = self.page()
        page.goto(target)
        assert "/ui/signin?next=" in page.url, "an unsigned page sends the browser to sign in"
        page.get_by_label("API key").fill(KEYS[who])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"**{target}")
        return page

    def shoot(self, page: playwright_api.Page, name: str) -> Path:
        path = self.screens / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def watched(browser: playwright_api.Browser, console: Console, tmp_path: Path) -> Iterator[Watched]:
    watched = Watched(browser, console, ARTIFACTS)
    yield watched
    watched.context.close()
    assert watched.dialogs == [], "markup ran as script"


def test_approve_in_the_browser_lets_the_waiting_call_run_exactly_once(console: Console, watched: Watched) -> None:
    approval_id = console.request_approval(XSS_PRINCIPAL, XSS_INPUT)
    page = watched.sign_in("admin")
    row = page.locator(f"#approval-{approval_id}")
    assert row.locator(".principal").inner_text().startswith(XSS_PRINCIPAL), "the principal is shown literally"
    shown = row.locator("pre.input").inner_text()
    assert XSS_INPUT["q"] in shown and XSS_INPUT["note"] in shown, "the input is shown literally"
    assert row.locator("time").inner_text().endswith("Z")
    assert page.locator("img").count() == 0, "no markup from the input became an element"
    watched.shoot(page, "approvals")
    replay = watched.page()
    replay.goto("/ui/approvals")
    token = replay.locator(f"#approval-{approval_id} input[name=csrf]").first.get_attribute("value")
    row.get_by_role("button", name=f"Approve request {approval_id}").click()
    assert approval_id in page.locator("#notice").inner_text()
    assert page.locator("#empty").is_visible()
    assert console.call(XSS_PRINCIPAL, XSS_INPUT)["ok"] is True, "the approved call runs"
    again = console.call(XSS_PRINCIPAL, XSS_INPUT)
    assert again["error"]["code"] == "approval_required", "the approval ran exactly one call"  # type: ignore[index]
    # The second tab's live update has dropped the form by now: replay it as it was, with that tab's cookie.
    replayed = replay.request.post(f"/ui/approvals/{approval_id}/approve", form={"csrf": token})
    assert replayed.status == 409 and f"approval request {approval_id} is used, not pending" in replayed.text()
    # The live page drops the used request at its next poll (every 2 s): wait for it, do not race it.
    replay.locator(f"#approval-{approval_id}").wait_for(state="detached", timeout=30_000)
    watched.shoot(replay, "approve-replayed")


def test_a_request_arriving_appears_on_the_open_page_without_a_reload(console: Console, watched: Watched) -> None:
    first = console.request_approval("agent", {"q": "first"})
    page = watched.sign_in("admin")
    assert page.locator("script[src='/ui/static/console.js']").count() == 1
    page.evaluate("window.stayed = true")  # a reload would forget it
    page.locator(f"#deny-{first} summary").click()
    reason = page.locator(f"#reason-{first}")
    reason.fill("half-typed")
    reason.focus()
    second = console.request_approval(XSS_PRINCIPAL, {"q": "<script>alert('live')</script>"})
    arrived = page.locator(f"#approval-{second}")
    arrived.wait_for(timeout=30_000)
    assert page.evaluate("window.stayed") is True, "the row came without reloading the page"
    assert arrived.locator(".principal").inner_text().startswith(XSS_PRINCIPAL)
    assert "<script>alert('live')</script>" in arrived.locator("pre.input").inner_text()
    assert page.locator("#live-status").inner_text() == "2 waiting"
    assert page.locator(f"#reason-{first}").input_value() == "half-typed", "what the viewer typed is kept"
    assert page.evaluate("document.activeElement.id") == f"reason-{first}", "and where the focus was"
    watched.shoot(page, "approvals-live")
    arrived.get_by_role("button", name=f"Approve request {second}").click()
    assert second in page.locator("#notice").inner_text()
    assert console.call(XSS_PRINCIPAL, {"q": "<script>alert('live')</script>"})["ok"] is True


def test_deny_in_the_browser_answers_the_waiting_caller_with_the_reason(console: Console, watched: Watched) -> None:
    approval_id = console.request_approval("agent", {"q": "drop it"})
    page = watched.sign_in("admin")
    row = page.locator(f"#approval-{approval_id}")
    deny = row.get_by_role("button", name=f"Deny request {approval_id}", exact=True)
    assert not deny.is_visible(), "the first press only opens the confirmation"
    row.locator("summary.danger").click()
    deny.click()  # no reason: the browser asks for one
    assert [a.id for a in console.runtime.pending_approvals()] == [approval_id]
    row.get_by_label("Reason (the caller is told it)").fill("<b>not</b> on production")
    deny.click()
    assert approval_id in page.locator("#notice").inner_text()
    assert page.locator("#empty").is_visible()
    refused = console.call("agent", {"q": "drop it"})
    assert refused["error"]["code"] == "permission_denied"  # type: ignore[index]
    assert "<b>not</b> on production" in refused["error"]["message"]  # type: ignore[index]
    blank = page.request.post(f"/ui/approvals/{approval_id}/deny", form={"csrf": "x", "reason": " "})
    assert blank.status == 403  # a wrong token is refused before anything else
    watched.shoot(page, "denied")


def test_the_browser_shows_the_runtime_refusing_self_approval(console: Console, watched: Watched) -> None:
    approval_id = console.request_approval("admin", {"q": "mine"})
    page = watched.sign_in("admin")
    page.get_by_role("button", name=f"Approve request {approval_id}").click()
    assert "cannot approve its own request" in page.locator("#message").inner_text()
    assert [a.id for a in console.runtime.pending_approvals()] == [approval_id]


def test_a_post_without_the_csrf_token_from_the_signed_in_browser_is_403(console: Console, watched: Watched) -> None:
    approval_id = console.request_approval("agent", {"q": "csrf"})
    page = watched.sign_in("admin")
    answer = page.request.post(f"/ui/approvals/{approval_id}/approve", form={"other": "1"})
    assert answer.status == 403 and "CSRF token is missing or wrong" in answer.text()
    assert [a.id for a in console.runtime.pending_approvals()] == [approval_id]


def test_audit_tools_and_health_pages_render_markup_as_text(console: Console, watched: Watched) -> None:
    console.call(XSS_PRINCIPAL, {"q": "<b>bold</b>"}, tool="plain")
    page = watched.sign_in("admin", "/ui/audit")
    assert XSS_PRINCIPAL in page.locator("td.principal").first.inner_text()
    watched.shoot(page, "audit")
    page.get_by_role("button", name="Verify the chain").click()
    assert "The chain verifies: 1 rows" in page.locator("#verdict").inner_text()
    watched.shoot(page, "verify")
    page.goto("/ui/audit/1")
    assert "<b>bold</b>" in page.locator("dl.record").inner_text() and page.locator("b").count() == 0
    watched.shoot(page, "record")
    for n in range(5):
        console.call("agent", {"n": n}, tool="plain")
    console.request_approval("agent", {"n": "asked"})
    page.goto("/ui/tools")
    assert page.locator("td.description", has_text="once approved").inner_text() == XSS_DESCRIPTION
    recent = page.get_by_role("list", name="Last calls of plain@0.0.0").get_by_role("listitem")
    assert recent.all_inner_texts() == ["ok"] * 6
    watched.shoot(page, "tools")
    board = BreakerBoard(console.runtime.home)
    try:
        board.record("tool", "plain", Breaker(failures=1), True)
    finally:
        board.close()
    page.goto("/ui/health")
    assert "policy digest" in page.locator("dl.record").inner_text()
    assert page.locator("#breakers td", has_text="open").count() == 1
    assert page.get_by_role("img", name="Calls per minute by outcome, last 30 minutes").is_visible()
    assert page.get_by_role("img", name="Call duration p50 and p99 per minute, last 30 minutes").is_visible()
    assert "approval_required (1)" in page.locator("#chart-outcomes figcaption").inner_text()
    watched.shoot(page, "health")


def test_a_principal_without_the_scopes_gets_403_on_every_page_in_the_browser(
    console: Console, watched: Watched
) -> None:
    page = watched.sign_in("nobody", "/ui/tools")
    assert "sensitive" not in page.content() and page.locator("#empty").is_visible()
    for path in ["/ui/approvals", "/ui/audit", "/ui/health", "/ui/audit/export.jsonl"]:
        answer = page.goto(path)
        assert answer is not None and answer.status == 403, path
        assert "lacks the scope" in page.locator("#message").inner_text()
    watched.shoot(page, "forbidden")


def test_resume_a_paused_run_in_the_browser_and_see_it_done(console: Console, watched: Watched) -> None:
    program = """export default async function (input, tools) {
      const asked = await tools.call("sensitive", { q: input.q });
      return { asked, note: "<img src=x onerror=alert('run')>" };
    }"""
    paused = console.runtime.run(program, input={"q": "<script>alert('run input')</script>"}, principal="agent")
    assert paused.status == "paused" and paused.error is not None, paused.to_dict()
    page = watched.sign_in("agent", "/ui/runs")
    row = page.locator(f"#run-{paused.run_id}")
    assert row.locator(".status").inner_text() == "paused"
    watched.shoot(page, "runs")
    row.get_by_role("link").click()
    page.wait_for_url(f"**/ui/runs/{paused.run_id}")
    assert page.locator("#run-status").inner_text() == "paused"
    assert paused.error.details["approval_id"] in page.content()
    console.runtime.approve(paused.error.details["approval_id"], principal="admin")
    page.get_by_role("button", name=f"Resume run {paused.run_id}").click()
    page.wait_for_url(f"**/ui/runs/{paused.run_id}")
    assert page.locator("#run-status").inner_text() == "done"
    shown = page.locator("#run-output").inner_text()
    assert "<img src=x onerror=alert('run')>" in shown and "<script>alert('run input')</script>" in shown
    assert page.locator("img").count() == 0, "no markup from the output became an element"
    assert page.get_by_role("button", name=f"Resume run {paused.run_id}").count() == 0
    watched.shoot(page, "run")
    ok = [r for r in console.runtime.audit.records() if r["tool"].startswith("sensitive") and r["outcome"] == "ok"]
    assert len(ok) == 1, "the approved call ran exactly once"


# -- every page at a desktop's and a phone's size ------------------------------------------------

#: (name, width, height) of the sizes every page is looked at.
SIZES = [("desktop", 1280, 800), ("phone", 390, 844)]
#: What a person would see wrong, found from the DOM: each a sentence naming the element.
LOOK = """() => {
  const problems = [];
  const say = (what, el) => problems.push(what + ": " + (el.textContent || el.outerHTML).trim().slice(0, 60));
  const inside = (el, box) => {
    const r = el.getBoundingClientRect();
    return r.left >= box.left - 0.5 && r.right <= box.right + 0.5
      && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5;
  };
  if (document.scrollingElement.scrollWidth > window.innerWidth) problems.push("the page scrolls sideways");
  document.querySelectorAll("svg.chart").forEach((svg) => {
    const box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach((t) => { if (!inside(t, box)) say("a chart label is cut", t); });
  });
  const page = { left: 0, right: window.innerWidth, top: -1e9, bottom: 1e9 };
  const shown = "header a, header button, header span, h1, h2, label, button, summary, input, p, dl";
  document.querySelectorAll(shown).forEach((el) => {
    if (el.closest(".scroll") || !el.getClientRects().length) return;  // a table scrolls in its own box
    if (!inside(el, page)) say("off the page", el);
  });
  const ruler = document.createElement("canvas").getContext("2d");
  document.querySelectorAll("input[placeholder]").forEach((input) => {
    const style = getComputedStyle(input);
    ruler.font = style.font;
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (ruler.measureText(input.placeholder).width > room) say("a placeholder is cut", input);
  });
  return problems;
}"""
PAUSING = """export default async function (input, tools) {
  const first = await tools.call("plain", { step: 1 });
  return { first, second: await tools.call("sensitive", { q: input.q }) };
}"""


def _busy_home(console: Console) -> dict[str, str]:
    """A home with something on every page: calls of each outcome, a denial, a request, runs, a breaker."""
    for n in range(4):
        console.call("agent", {"n": n}, tool="plain")
    denied = console.request_approval("agent", {"q": "drop the table"})
    console.runtime.deny(denied, principal="admin", reason="not on production, ask again on Monday")
    console.call("agent", {"q": "drop the table"})
    console.request_approval(XSS_PRINCIPAL, XSS_INPUT)
    paused = console.runtime.run(PAUSING, input={"q": "a long enough question to wrap"}, principal="agent")
    done = console.runtime.run('export default async () => ({ "ok": true })', principal="agent")
    failed = console.runtime.run('export default async () => { throw new Error("no") }', principal="agent")
    board = BreakerBoard(console.runtime.home)
    try:
        board.record("tool", "plain", Breaker(failures=1), True)
    finally:
        board.close()
    seq = next(r["seq"] for r in console.runtime.audit.records() if r["decision"] == "denied")
    return {
        "approvals": "/ui/approvals", "audit": "/ui/audit", "audit-filtered": "/ui/audit?since=1h&outcome=ok",
        "record-denied": f"/ui/audit/{seq}", "runs": "/ui/runs", "run-paused": f"/ui/runs/{paused.run_id}",
        "run-done": f"/ui/runs/{done.run_id}", "run-failed": f"/ui/runs/{failed.run_id}",
        "tools": "/ui/tools", "health": "/ui/health",
        "not-found": "/ui/no-such-page",
    }  # fmt: skip


@pytest.mark.parametrize(("size", "width", "height"), SIZES, ids=[s[0] for s in SIZES])
def test_every_page_reads_at_a_desktops_and_a_phones_size(
    console: Console, browser: playwright_api.Browser, size: str, width: int, height: int
) -> None:
    pages = _busy_home(console)
    context = browser.new_context(base_url=console.url, viewport={"width": width, "height": height})
    dialogs: list[str] = []
    context.on("page", lambda p: p.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss())))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    seen: dict[str, list[str]] = {}
    try:
        page = context.new_page()
        page.goto("/ui/signin")
        seen["signin"] = page.evaluate(LOOK)
        page.screenshot(path=str(ARTIFACTS / f"signin-{size}.png"), full_page=True)
        page.get_by_label("API key").fill(KEYS["admin"])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/ui/tools")
        for name, path in pages.items():
            page.goto(path)
            seen[name] = page.evaluate(LOOK)
            page.screenshot(path=str(ARTIFACTS / f"{name}-{size}.png"), full_page=True)
        page.goto(pages["approvals"])
        reach = page.locator("button.primary, summary.danger").evaluate_all(
            "(els) => els.map((el) => el.getBoundingClientRect().right)"
        )
        assert len(reach) == 4 and max(reach) <= width, "Approve and Deny are in reach without scrolling sideways"
        page.goto(pages["approvals"])
        page.locator("summary.danger").first.click()
        seen["approvals-deny-open"] = page.evaluate(LOOK)
        page.screenshot(path=str(ARTIFACTS / f"approvals-deny-open-{size}.png"), full_page=True)
        agent = browser.new_context(base_url=console.url, viewport={"width": width, "height": height})
        try:
            mine = agent.new_page()
            mine.goto("/ui/signin?next=/ui/runs")
            mine.get_by_label("API key").fill(KEYS["agent"])
            mine.get_by_role("button", name="Sign in").click()
            mine.wait_for_url("**/ui/runs")
            seen["runs-agent"] = mine.evaluate(LOOK)
            mine.screenshot(path=str(ARTIFACTS / f"runs-agent-{size}.png"), full_page=True)
        finally:
            agent.close()
    finally:
        context.close()
    assert {name: found for name, found in seen.items() if found} == {}
    assert dialogs == [], "markup ran as script"


def test_destructive_buttons_look_destructive_and_ask_first(console: Console, watched: Watched) -> None:
    approval_id = console.request_approval("agent", {"q": "careful"})
    page = watched.sign_in("admin")
    row = page.locator(f"#approval-{approval_id}")
    approve = row.get_by_role("button", name=f"Approve request {approval_id}")
    deny = row.locator("form.deny button")  # inside the closed confirmation: not yet in the accessibility tree
    opener = row.locator("summary.danger")
    assert "danger" in (deny.get_attribute("class") or "") and "danger" not in (approve.get_attribute("class") or "")
    colour = "(el) => getComputedStyle(el).backgroundColor"
    assert opener.evaluate("(el) => getComputedStyle(el).color") == "rgb(164, 38, 44)", "Deny… is red"
    assert not deny.is_visible(), "nothing is denied by one press"
    opener.click()
    assert deny.is_visible() and deny.evaluate(colour) != approve.evaluate(colour)
    watched.shoot(page, "deny-confirm")
    opener.click()  # changing one's mind closes it again
    assert not deny.is_visible() and [a.id for a in console.runtime.pending_approvals()] == [approval_id]
    paused = console.runtime.run(PAUSING, input={"q": "x"}, principal="admin")
    page.goto(f"/ui/runs/{paused.run_id}")
    cancel = page.locator("#cancel-confirm button")
    resume = page.get_by_role("button", name=f"Resume run {paused.run_id}")
    assert "danger" in (cancel.get_attribute("class") or "") and "primary" in (resume.get_attribute("class") or "")
    assert not cancel.is_visible()
    page.locator("summary.danger").click()
    assert "never resumes" in page.locator("#cancel-confirm").inner_text()
    watched.shoot(page, "cancel-confirm")
    cancel.click()
    page.wait_for_url(f"**/ui/runs/{paused.run_id}")
    assert page.locator("#run-status").inner_text() == "cancelled"


def test_a_paused_runs_page_takes_the_approver_to_its_request(console: Console, watched: Watched) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "x"}, principal="agent")
    approval_id = paused.error.details["approval_id"]  # type: ignore[union-attr]
    page = watched.sign_in("admin", f"/ui/runs/{paused.run_id}")
    assert "glovebox approve" not in page.locator("main").inner_text()
    page.get_by_role("link", name=f"Approve or deny request {approval_id}").click()
    page.wait_for_url(f"**/ui/approvals#approval-{approval_id}")
    page.get_by_role("button", name=f"Approve request {approval_id}").click()
    assert approval_id in page.locator("#notice").inner_text()
    page.goto(f"/ui/runs/{paused.run_id}")
    page.get_by_role("button", name=f"Resume run {paused.run_id}").click()
    page.wait_for_url(f"**/ui/runs/{paused.run_id}")
    assert page.locator("#run-status").inner_text() == "done"


def test_the_live_page_keeps_an_open_confirmation_open(console: Console, watched: Watched) -> None:
    first = console.request_approval("agent", {"q": "first"})
    page = watched.sign_in("admin")
    page.locator(f"#deny-{first} summary").click()
    second = console.request_approval("agent", {"q": "second"})
    page.locator(f"#approval-{second}").wait_for(timeout=30_000)
    assert page.locator(f"#deny-{first}").get_attribute("open") is not None
    assert page.locator(f"#deny-{second}").get_attribute("open") is None


@pytest.mark.parametrize("top_ms", [0.74, 7.4, 74.0, 7400.0, 740000.0])
def test_the_duration_charts_scale_label_is_never_cut(browser: playwright_api.Browser, top_ms: float) -> None:
    from datetime import UTC, datetime

    from glovebox.servers._charts import latency_svg, minutes

    now = datetime.now(UTC)
    data = minutes([(now.isoformat(), "t@1", "ok", top_ms / 2), (now.isoformat(), "t@1", "ok", top_ms)], now)
    svg = str(latency_svg(data))
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        css = (UI_STATIC / "console.css").read_text()
        page.set_content(f"<!doctype html><style>{css}</style><figure>{svg}</figure>")
        label = page.locator("svg.chart text.top")
        text = label.text_content() or ""
        assert text.endswith(" ms") and text[0].isdigit(), text
        assert page.evaluate(LOOK) == []
    finally:
        context.close()
