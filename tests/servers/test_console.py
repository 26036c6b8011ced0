"""The console over real HTTP (uvicorn on 127.0.0.1, httpx): who may see what, sessions, CSRF, headers."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import pytest

import glovebox
from glovebox.servers import create_app
from glovebox.servers._guards import SECURITY_HEADERS
from glovebox.servers._sessions import COOKIE

from .conftest import KEYS, XSS_PRINCIPAL, Console, sha

ROW_LINK = re.compile(r'href="/ui/audit/\d+"')
PAGES = ["/ui/approvals", "/ui/approvals/mark", "/ui/audit", "/ui/audit/1", "/ui/audit/export.jsonl", "/ui/health"]


def bearer(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[who]}"}


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


@contextmanager
def signed_in(console: Console, who: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console.url, timeout=30) as client:
        form = client.get("/ui/signin")
        data = {"csrf": csrf_of(form.text), "api_key": KEYS[who], "next": "/ui/audit"}
        answer = client.post("/ui/signin", data=data)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/audit", answer.text
        yield client


def test_an_unsigned_page_redirects_to_sign_in_and_an_unsigned_post_is_401(console: Console) -> None:
    for path in [*PAGES, "/ui/tools"]:
        answer = httpx.get(console.url + path)
        assert answer.status_code == 303, path
        assert answer.headers["location"] == "/ui/signin?" + httpx.QueryParams({"next": path}).__str__()
    answer = httpx.post(f"{console.url}/ui/approvals/0011/approve", data={"csrf": "x"})
    assert answer.status_code == 401 and "sign in first" in answer.text
    assert httpx.get(console.url + "/ui/tools", headers={"Authorization": "Bearer wrong"}).status_code == 303


def test_a_principal_without_the_scope_gets_403_on_every_page(console: Console) -> None:
    console.call("agent", {"q": 1}, tool="plain")  # a row for /ui/audit/1
    for path in PAGES:
        answer = httpx.get(console.url + path, headers=bearer("nobody"))
        assert answer.status_code == 403, path
        assert "lacks the scope" in answer.text and "sensitive" not in answer.text
    answer = httpx.post(console.url + "/ui/audit/verify", headers=bearer("nobody"))
    assert answer.status_code == 403
    answer = httpx.post(console.url + "/ui/approvals/0011/approve", headers=bearer("agent"))
    assert answer.status_code == 403 and "glovebox:approve" in answer.text
    for path in PAGES:
        assert httpx.get(console.url + path, headers=bearer("agent")).status_code == 403, path
        assert httpx.get(console.url + path, headers=bearer("admin")).status_code == 200, path


def test_the_tools_page_lists_only_what_the_viewer_may_see(console: Console) -> None:
    seen = httpx.get(console.url + "/ui/tools", headers=bearer("agent")).text
    assert "sensitive@0.0.0" in seen and "plain@0.0.0" in seen
    unseen = httpx.get(console.url + "/ui/tools", headers=bearer("nobody"))
    assert unseen.status_code == 200
    assert "sensitive" not in unseen.text and "plain" not in unseen.text and "see no tool" in unseen.text


def test_the_session_cookie_is_opaque_httponly_and_strict(console: Console) -> None:
    with httpx.Client(base_url=console.url) as client:
        form = client.get("/ui/signin")
        answer = client.post("/ui/signin", data={"csrf": csrf_of(form.text), "api_key": KEYS["admin"]})
        cookie = next(v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith(COOKIE))
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        assert "Secure" not in cookie, "plain HTTP: a Secure cookie would never come back"
        assert KEYS["admin"] not in cookie
        assert client.get("/ui/health").status_code == 200


def test_sign_in_refuses_a_wrong_key_and_a_form_without_its_token(console: Console) -> None:
    with httpx.Client(base_url=console.url) as client:
        token = csrf_of(client.get("/ui/signin").text)
        wrong = client.post("/ui/signin", data={"csrf": token, "api_key": "not-a-key"})
        assert wrong.status_code == 401 and "matches no principal" in wrong.text
    with httpx.Client(base_url=console.url) as fresh:
        fresh.get("/ui/signin")
        forged = fresh.post("/ui/signin", data={"api_key": KEYS["admin"]})
        assert forged.status_code == 403 and "CSRF token is missing or wrong" in forged.text
        assert COOKIE not in forged.cookies


def test_a_post_without_the_csrf_token_or_from_another_site_is_403(console: Console) -> None:
    approval_id = console.request_approval("agent", {"q": "csrf"})
    with signed_in(console, "admin") as client:
        token = csrf_of(client.get("/ui/approvals").text)
        url = f"/ui/approvals/{approval_id}/approve"
        assert client.post(url, data={}).status_code == 403
        assert client.post(url, data={"csrf": token + "x"}).status_code == 403
        other_site = client.post(url, data={"csrf": token}, headers={"Origin": "https://evil.example"})
        assert other_site.status_code == 403 and "another site" in other_site.text
        assert [a.id for a in console.runtime.pending_approvals()] == [approval_id], "nothing was approved"
        assert client.post(url, data={"csrf": token}).status_code == 303
    assert console.runtime.pending_approvals() == []


def test_a_denial_needs_a_reason_and_a_token_and_is_told_to_the_caller(console: Console) -> None:
    approval_id = console.request_approval("agent", {"q": "deny"})
    with signed_in(console, "admin") as client:
        token = csrf_of(client.get("/ui/approvals").text)
        url = f"/ui/approvals/{approval_id}/deny"
        assert client.post(url, data={"reason": "no"}).status_code == 403  # no token
        for reason in ("", "   ", "x" * 501):
            refused = client.post(url, data={"csrf": token, "reason": reason})
            assert refused.status_code == 400 and "needs a reason" in refused.text
        assert [a.id for a in console.runtime.pending_approvals()] == [approval_id], "nothing was denied"
        assert client.post(url, data={"csrf": token, "reason": "not today"}).status_code == 303
        replayed = client.post(url, data={"csrf": token, "reason": "not today"})
        assert replayed.status_code == 409
    assert console.runtime.pending_approvals() == []
    refused_call = console.call("agent", {"q": "deny"})
    assert refused_call["error"]["code"] == "permission_denied"  # type: ignore[index]
    assert "not today" in refused_call["error"]["message"]  # type: ignore[index]


def test_signing_out_ends_the_session_and_a_key_dropped_from_the_policy_ends_it_too(console: Console) -> None:
    with signed_in(console, "admin") as client:
        token = csrf_of(client.get("/ui/health").text)
        assert client.post("/ui/signout", data={"csrf": token}).status_code == 303
        assert client.get("/ui/health").status_code == 303
    with signed_in(console, "boss") as again:
        assert again.get("/ui/health").status_code == 200
        text = console.policy.read_text()
        console.policy.write_text(text.replace(sha(KEYS["boss"]), sha("boss-new-key")))
        assert console.runtime.reload_policy()
        assert again.get("/ui/health").status_code == 303, "the key left the policy: its sessions end"


def test_every_answer_carries_a_strict_csp_and_no_caching(console: Console) -> None:
    for path in ["/ui/signin", "/ui/health"]:
        headers = httpx.get(console.url + path, headers=bearer("admin")).headers
        assert headers["content-security-policy"].startswith("default-src 'self'")
        assert headers["x-frame-options"] == "DENY" and headers["cache-control"] == "no-store"
    css = httpx.get(console.url + "/ui/static/console.css")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]


def test_audit_pages_filter_paginate_and_export(console: Console) -> None:
    for n in range(60):
        console.call("agent", {"n": n}, tool="plain")
    console.call("admin", {"n": "mine"}, tool="plain")
    first = httpx.get(console.url + "/ui/audit", headers=bearer("admin")).text
    assert len(ROW_LINK.findall(first)) == 50
    older = re.search(r'href="/ui/audit\?(before=\d+)"', first)
    assert older is not None
    second = httpx.get(f"{console.url}/ui/audit?{older.group(1)}", headers=bearer("admin")).text
    assert len(ROW_LINK.findall(second)) == 11 and '/ui/audit/1"' in second
    mine = httpx.get(console.url + "/ui/audit?principal=admin", headers=bearer("admin")).text
    assert ROW_LINK.findall(mine) == ['href="/ui/audit/61"']
    export = httpx.get(console.url + "/ui/audit/export.jsonl", headers=bearer("admin"))
    rows = [json.loads(line) for line in export.text.splitlines()]
    assert [r["seq"] for r in rows] == list(range(1, 62))
    detail = httpx.get(console.url + "/ui/audit/61", headers=bearer("admin")).text
    assert "&#34;mine&#34;" in detail or "&quot;mine&quot;" in detail
    assert httpx.get(console.url + "/ui/audit/999", headers=bearer("admin")).status_code == 404


def test_the_approvals_page_shows_fifty_a_page_with_the_count(console: Console) -> None:
    ids = [console.request_approval("agent", {"n": n}) for n in range(53)]
    first = httpx.get(console.url + "/ui/approvals", headers=bearer("admin")).text
    assert '<span class="count">53</span> waiting' in first and "1–50 of 53" in first
    assert re.findall(r'id="approval-([0-9a-f]+)"', first) == ids[:50]
    last = httpx.get(console.url + "/ui/approvals?offset=50", headers=bearer("admin")).text
    assert re.findall(r'id="approval-([0-9a-f]+)"', last) == ids[50:] and "51–53 of 53" in last


def test_the_audit_page_filters_by_time(console: Console) -> None:
    for n in range(3):
        console.call("agent", {"n": n}, tool="plain")
    page = console.url + "/ui/audit"
    recent = httpx.get(page, params={"since": "1h"}, headers=bearer("admin")).text
    assert len(ROW_LINK.findall(recent)) == 3 and 'value="1h"' in recent
    assert "No record matches" in httpx.get(page, params={"since": "2999-01-01"}, headers=bearer("admin")).text
    assert "No record matches" in httpx.get(page, params={"until": "2000-01-01"}, headers=bearer("admin")).text
    both = {"since": "2000-01-01T00:00:00Z", "until": "2999-01-01", "principal": "agent"}
    assert len(ROW_LINK.findall(httpx.get(page, params=both, headers=bearer("admin")).text)) == 3
    bad = httpx.get(page, params={"since": "yesterday"}, headers=bearer("admin"))
    assert bad.status_code == 400 and "the time &#39;yesterday&#39; is neither ISO 8601" in bad.text


def test_the_health_page_shows_admission_breakers_and_charts_of_the_last_calls(console: Console) -> None:
    from glovebox.guards import BreakerBoard
    from glovebox.policy._guards import Breaker

    for n in range(4):
        console.call("agent", {"n": n}, tool="plain")
    console.request_approval("agent", {"n": "<b>ask</b>"})
    quiet = httpx.get(console.url + "/ui/health", headers=bearer("admin")).text
    assert "Every breaker is closed" in quiet
    assert "<dt>calls in flight</dt><dd><code>0</code>" in quiet and "<dt>calls queued</dt><dd><code>0</code>" in quiet
    board = BreakerBoard(console.runtime.home)
    try:
        board.record("tool", "plain", Breaker(failures=1), True)
    finally:
        board.close()
    health = httpx.get(console.url + "/ui/health", headers=bearer("admin")).text
    assert re.search(r"<td>tool</td><td><code>plain</code></td><td class=\"outcome-fail\">open</td>", health)
    assert health.count("<svg xmlns") == 2 and "<script" not in health and "style=" not in health
    assert ": 5 calls." in health
    ok_bars = re.findall(r"<title>\d\d:\d\d ok: (\d+)</title>", health)
    asked = re.findall(r"<title>\d\d:\d\d approval_required: (\d+)</title>", health)
    assert sum(map(int, ok_bars)) == 4 and sum(map(int, asked)) == 1
    assert "ok (4)" in health and "approval_required (1)" in health
    assert re.search(r'<polyline points="[0-9., ]+" fill="none" stroke="#1f5fbf"', health), "the p50 line"


def test_the_tools_page_shows_each_tools_last_outcomes(console: Console) -> None:
    console.call("agent", {"n": 1}, tool="plain")
    console.request_approval("agent", {"n": 2})
    seen = httpx.get(console.url + "/ui/tools", headers=bearer("agent")).text
    rows = {
        m.group(1): m.group(2) for m in re.finditer(r'<code class="tool">(\w+)@0\.0\.0</code>(.*?)</tr>', seen, re.S)
    }
    assert re.findall(r'class="outcome-\w+" title="[^"]+">(\w+)</span>', rows["plain"]) == ["ok"]
    assert re.findall(r'class="outcome-\w+" title="[^"]+">(\w+)</span>', rows["sensitive"]) == ["approval_required"]


def test_a_sql_request_shows_the_approver_its_statement(console: Console) -> None:
    from glovebox.policy import ApprovalStore

    store = ApprovalStore(console.runtime.home)  # as the sql capability files it (tests/capabilities/test_sql.py)
    shown = {
        "database": "shop", "kind": "delete", "fingerprint": "DELETE FROM orders WHERE id = ?",
        "statement": "DELETE FROM orders WHERE id = ? -- <b>x</b>", "params": [7],
    }  # fmt: skip
    try:
        asked = store.request("agent", "client@0.0.0", "sql:sha256:" + "0" * 64, 600, shown)
    finally:
        store.close()
    with signed_in(console, "admin") as client:
        page = client.get("/ui/approvals").text
    row = page[page.index(f'id="approval-{asked.id}"') :]
    row = row[: row.index("</tr>")]
    assert "SQL delete on <code>shop</code>" in row
    assert "DELETE FROM orders WHERE id = ? -- &lt;b&gt;x&lt;/b&gt;" in row and "<b>x</b>" not in row
    assert "[7]" in row


# -- runs (code mode) ---------------------------------------------------------

#: A program that calls plain, then sensitive (require_approval: the run pauses), and returns markup.
PAUSING = """export default async function (input, tools) {
  const first = await tools.call("plain", { step: 1 });
  const second = await tools.call("sensitive", { q: input.q });
  return { first, second, note: "<script>alert('output')</script>" };
}"""
#: A program whose output and whose one step's output are markup.
HOSTILE = """export default async function (input, tools) {
  const echoed = await tools.call("plain", { q: "<img src=x onerror=alert('step')>" });
  return { html: "<script>alert('output')</script>", echoed };
}"""


def sensitive_runs(console: Console) -> int:
    """How many times the sensitive tool ran (the audit's ok rows for it)."""
    return sum(1 for r in console.runtime.audit.records() if r["tool"].startswith("sensitive") and r["outcome"] == "ok")


def test_the_runs_page_lists_the_viewers_own_runs_and_every_run_with_the_audit_scope(console: Console) -> None:
    mine = console.runtime.run(HOSTILE, principal="agent")
    theirs = console.runtime.run(HOSTILE, principal=XSS_PRINCIPAL)
    assert mine.status == "done" and theirs.status == "done", mine.to_dict()
    own = httpx.get(console.url + "/ui/runs", headers=bearer("agent"))
    assert own.status_code == 200
    assert f'href="/ui/runs/{mine.run_id}"' in own.text and theirs.run_id not in own.text
    every = httpx.get(console.url + "/ui/runs", headers=bearer("admin")).text
    assert every.index(theirs.run_id) < every.index(mine.run_id), "newest first"
    assert "&lt;img src=x onerror=alert(&#39;principal&#39;)&gt;" in every and "<img src=x" not in every
    assert "no run" not in httpx.get(console.url + "/ui/runs", headers=bearer("nobody")).text
    assert mine.run_id not in httpx.get(console.url + "/ui/runs", headers=bearer("nobody")).text
    assert httpx.get(console.url + "/ui/runs").status_code == 303  # unsigned: to the sign-in form


def test_the_runs_page_is_paginated(console: Console) -> None:
    from glovebox.servers._console import PAGE_ROWS

    store = console.runtime.runs.store
    ids = [store.create("agent", "js", "x", "x", None) for _ in range(PAGE_ROWS + 3)]
    first = httpx.get(console.url + "/ui/runs", headers=bearer("agent")).text
    assert first.count('href="/ui/runs/') == PAGE_ROWS and f"/ui/runs?offset={PAGE_ROWS}" in first
    second = httpx.get(console.url + f"/ui/runs?offset={PAGE_ROWS}", headers=bearer("agent")).text
    assert second.count('href="/ui/runs/') == 3 and "Older" not in second and "Newer" in second
    shown = set(re.findall(r'href="/ui/runs/([0-9a-f]+)"', first + second))
    assert shown == set(ids)


def test_a_runs_steps_and_output_are_shown_and_markup_in_them_is_inert(console: Console) -> None:
    result = console.runtime.run(HOSTILE, principal="agent")
    assert result.status == "done", result.to_dict()
    page = httpx.get(console.url + f"/ui/runs/{result.run_id}", headers=bearer("agent"))
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    html = page.text
    assert 'id="step-0"' in html and "<code>plain</code>" in html and "<code>ok</code>" in html
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#39;output&#39;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(&#39;step&#39;)&gt;" in html
    assert 'id="run-status" class="status status-done">done<' in html
    assert "Resume" not in html and "Cancel run" not in html, "a finished run has no buttons"


def test_another_principals_run_answers_as_an_unknown_one(console: Console) -> None:
    theirs = console.runtime.run(HOSTILE, principal=XSS_PRINCIPAL)
    unseen = httpx.get(console.url + f"/ui/runs/{theirs.run_id}", headers=bearer("agent"))
    unknown = httpx.get(console.url + "/ui/runs/" + "0" * 32, headers=bearer("agent"))
    assert unseen.status_code == unknown.status_code == 404
    assert unseen.text.replace(theirs.run_id, "ID") == unknown.text.replace("0" * 32, "ID")
    assert "onerror" not in unseen.text and "output" not in unseen.text
    for action in ("resume", "cancel"):
        refused = httpx.post(console.url + f"/ui/runs/{theirs.run_id}/{action}", headers=bearer("agent"))
        assert refused.status_code == 404 and "no run" in refused.text
    assert httpx.get(console.url + f"/ui/runs/{theirs.run_id}", headers=bearer("admin")).status_code == 200


def test_resume_and_cancel_refuse_a_form_without_the_csrf_token(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "csrf"}, principal="agent")
    assert paused.status == "paused", paused.to_dict()
    with signed_in(console, "agent") as client:
        page = client.get(f"/ui/runs/{paused.run_id}")
        token = csrf_of(page.text)
        assert "Resume" in page.text and "Cancel" in page.text
        for action in ("resume", "cancel"):
            url = f"/ui/runs/{paused.run_id}/{action}"
            assert client.post(url, data={}).status_code == 403
            assert client.post(url, data={"csrf": token + "x"}).status_code == 403
            other_site = client.post(url, data={"csrf": token}, headers={"Origin": "https://evil.example"})
            assert other_site.status_code == 403 and "another site" in other_site.text
    record = console.runtime.runs.store.get(paused.run_id)
    assert record is not None and record.status == "paused" and record.attempts == paused.meta["attempts"]


def test_resume_after_approval_completes_the_run_and_the_approved_call_runs_once(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "resume me"}, principal="agent")
    assert paused.status == "paused" and paused.error is not None and paused.error.code == "approval_required"
    approval_id = paused.error.details["approval_id"]
    assert sensitive_runs(console) == 0
    with signed_in(console, "agent") as client:
        page = client.get(f"/ui/runs/{paused.run_id}")
        assert approval_id in page.text and 'status-paused">paused<' in page.text
        token = csrf_of(page.text)
        again = client.post(f"/ui/runs/{paused.run_id}/resume", data={"csrf": token})  # not approved yet
        assert again.status_code == 303
        assert 'status-paused">paused<' in client.get(f"/ui/runs/{paused.run_id}").text
        assert sensitive_runs(console) == 0
        console.runtime.approve(approval_id, principal="admin")
        done = client.post(f"/ui/runs/{paused.run_id}/resume", data={"csrf": token}, follow_redirects=True)
        assert done.status_code == 200 and 'status-done">done<' in done.text, done.text
        assert "resume me" in done.text and "&lt;script&gt;alert(&#39;output&#39;)" in done.text
        assert sensitive_runs(console) == 1, "the approved call ran exactly once"
        replay = client.post(f"/ui/runs/{paused.run_id}/resume", data={"csrf": token})
        assert replay.status_code == 409 and "only a paused run resumes" in replay.text
    assert sensitive_runs(console) == 1
    assert console.runtime.runs.show(paused.run_id).output["second"] == {"q": "resume me"}


def test_only_the_runs_principal_or_an_approving_auditor_may_resume_it(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "whose"}, principal=XSS_PRINCIPAL)
    assert paused.status == "paused", paused.to_dict()
    console.runtime.approve(paused.error.details["approval_id"], principal="admin")
    url = console.url + f"/ui/runs/{paused.run_id}/resume"
    assert httpx.post(url, headers=bearer("agent")).status_code == 404  # may not see it
    assert httpx.post(url, headers=bearer("nobody")).status_code == 404
    text = console.policy.read_text()  # boss keeps glovebox:audit and loses the approver scope
    console.policy.write_text(text.replace('boss": {scopes: [run, glovebox:approve, ', 'boss": {scopes: [run, '))
    assert console.runtime.reload_policy()
    reader = httpx.post(url, headers=bearer("boss"))
    assert reader.status_code == 403 and "glovebox:approve" in reader.text
    assert console.runtime.runs.store.get(paused.run_id).status == "paused"  # type: ignore[union-attr]
    console.policy.write_text(text)
    assert console.runtime.reload_policy()
    done = httpx.post(url, headers=bearer("boss"))  # glovebox:audit and glovebox:approve
    assert done.status_code == 303
    result = console.runtime.runs.show(paused.run_id)
    assert result.status == "done" and result.meta["principal"] == XSS_PRINCIPAL, "it ran as its own principal"
    assert sensitive_runs(console) == 1
    # Who pressed Resume is kept: in the run, on its page, and in the attempt's audit row.
    record = console.runtime.runs.record(paused.run_id)
    assert record is not None and record.resumed_by == "boss" and result.meta["resumed_by"] == "boss"
    page = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("boss")).text
    assert 'id="run-resumed-by" class="principal">boss<' in page
    row = console.runtime.audit.find(result.meta["call_id"])
    assert row is not None and row["tool"] == "glovebox:run" and row["principal"] == XSS_PRINCIPAL
    assert json.loads(row["egress"])["run"]["by"] == "boss" and row["attempt"] == 2


def test_cancel_ends_an_unfinished_run_and_it_never_resumes(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "cancel"}, principal="agent")
    console.runtime.approve(paused.error.details["approval_id"], principal="admin")
    cancel = httpx.post(console.url + f"/ui/runs/{paused.run_id}/cancel", headers=bearer("agent"))
    assert cancel.status_code == 303
    resume = httpx.post(console.url + f"/ui/runs/{paused.run_id}/resume", headers=bearer("agent"))
    assert resume.status_code == 409 and "is cancelled" in resume.text
    assert sensitive_runs(console) == 0
    # Who pressed Cancel is kept: in the run, on its page, and in the cancel's audit row.
    result = console.runtime.runs.show(paused.run_id)
    assert result.status == "cancelled" and result.meta["cancelled_by"] == "agent"
    page = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("agent")).text
    assert 'id="run-cancelled-by" class="principal">agent<' in page
    row = console.runtime.audit.find(result.meta["call_id"])
    assert row is not None and row["tool"] == "glovebox:run" and row["outcome"] == "cancelled"
    assert json.loads(row["egress"])["run"]["by"] == "agent"


def test_an_approving_auditor_who_cancels_anothers_run_is_named_as_its_canceller(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "theirs"}, principal=XSS_PRINCIPAL)
    assert paused.status == "paused", paused.to_dict()
    cancel = httpx.post(console.url + f"/ui/runs/{paused.run_id}/cancel", headers=bearer("boss"))
    assert cancel.status_code == 303
    result = console.runtime.runs.show(paused.run_id)
    assert result.status == "cancelled" and result.meta["cancelled_by"] == "boss"
    page = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("boss")).text
    assert 'id="run-cancelled-by" class="principal">boss<' in page
    row = console.runtime.audit.find(result.meta["call_id"])
    assert row is not None and row["principal"] == XSS_PRINCIPAL and row["outcome"] == "cancelled"
    assert json.loads(row["egress"])["run"]["by"] == "boss"


def test_ui_and_ui_slash_are_the_same_page(console: Console) -> None:
    for path in ("/ui", "/ui/"):
        answer = httpx.get(console.url + path, headers=bearer("agent"))
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/tools", path
        assert answer.headers["content-security-policy"].startswith("default-src 'self'")
        page = httpx.get(console.url + path, headers=bearer("agent"), follow_redirects=True)
        assert page.status_code == 200 and str(page.url) == console.url + "/ui/tools", path
        assert "sensitive@0.0.0" in page.text


@pytest.mark.parametrize("who", [None, "admin"])
def test_an_unknown_or_wrong_method_console_path_is_a_page_with_the_security_headers(
    console: Console, who: str | None
) -> None:
    headers = bearer(who) if who else {}
    for method, path, status in (
        ("GET", "/ui/nope", 404),
        ("GET", "/ui/tools/x/y", 404),
        ("GET", "/ui/static/nope.css", 404),
        ("POST", "/ui/tools", 405),
    ):
        answer = httpx.request(method, console.url + path, headers=headers)
        assert answer.status_code == status, (method, path)
        assert answer.headers["content-type"].startswith("text/html"), (method, path)
        assert "<script" not in answer.text and "/v1/tools" not in answer.text, "no JSON list of API routes"
        _assert_secured(answer)
    assert sorted(httpx.post(console.url + "/ui/tools").headers["allow"].split(", ")) == ["GET", "HEAD"]


def test_every_api_answer_carries_the_security_headers_too(console: Console) -> None:
    for answer in (
        httpx.get(console.url + "/v1/tools", headers=bearer("agent")),
        httpx.get(console.url + "/v1/tools"),  # 401
        httpx.get(console.url + "/v2/nope"),  # Starlette's 404, as the envelope
        httpx.get(console.url + "/healthz"),
    ):
        _assert_secured(answer)
    assert httpx.get(console.url + "/v2/nope").json()["error"]["code"] == "invalid_input"


def _assert_secured(answer: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers.get(name) == value, (answer.request.url, name)


def test_the_documented_console_recipe_signs_the_example_admin_in(
    tmp_path: Path, serve_app: Callable[[object], str]
) -> None:
    # docs/guide/console.md: serve the example team policy, open /ui/, sign in with admin-demo-key.
    policy = Path(__file__).resolve().parents[2] / "policies" / "examples" / "team.yaml"
    assert "admin-demo-key" in (Path(__file__).resolve().parents[2] / "docs" / "guide" / "console.md").read_text()
    with glovebox.Runtime(home=tmp_path / "home", policy=policy) as rt:
        url = serve_app(create_app(rt))
        with httpx.Client(base_url=url, follow_redirects=True) as client:
            form = client.get("/ui/")
            assert str(form.url) == url + "/ui/signin?next=%2Fui%2Ftools", form.url
            data = {"csrf": csrf_of(form.text), "api_key": "admin-demo-key", "next": "/ui/tools"}
            tools = client.post("/ui/signin", data=data)
            assert tools.status_code == 200 and str(tools.url) == url + "/ui/tools"
            assert '<strong class="principal">admin</strong>' in tools.text
            for page in ("/ui/approvals", "/ui/audit", "/ui/runs", "/ui/health"):
                assert client.get(page).status_code == 200, page


def test_the_api_never_takes_the_consoles_session_cookie(console: Console) -> None:
    with signed_in(console, "admin") as client:
        assert client.get("/ui/tools").status_code == 200
        answer = client.get("/v1/tools")  # the session cookie is Path=/ui, so it is sent by hand
        assert answer.status_code == 401
        forged = httpx.get(console.url + "/v1/tools", cookies={COOKIE: client.cookies[COOKIE]})
        assert forged.status_code == 401 and forged.json()["error"]["details"]["reason"] == "missing_api_key"


# -- what a person sees (issue: the console looked at as a person would) ---------------------------

MENU = re.compile(r'<nav aria-label="Console pages">(.*?)</nav>', re.S)


def menu_of(html: str) -> list[str]:
    found = MENU.search(html)
    assert found is not None, html
    return re.findall(r'<a href="(/ui/\w+)"', found.group(1))


def test_the_menu_names_only_the_pages_the_viewers_scopes_open(console: Console) -> None:
    everything = ["/ui/approvals", "/ui/audit", "/ui/runs", "/ui/tools", "/ui/connections", "/ui/health"]
    assert menu_of(httpx.get(console.url + "/ui/tools", headers=bearer("admin")).text) == everything
    for who in ("agent", "nobody"):
        shown = menu_of(httpx.get(console.url + "/ui/tools", headers=bearer(who)).text)
        assert shown == ["/ui/runs", "/ui/tools", "/ui/connections"], who
        for path in set(everything) - set(shown):
            assert httpx.get(console.url + path, headers=bearer(who)).status_code == 403, "hidden because refused"
        for path in shown:
            assert httpx.get(console.url + path, headers=bearer(who)).status_code == 200, "shown because it opens"


def test_a_value_python_leaves_empty_shows_as_a_dash_never_as_none(console: Console) -> None:
    console.call("agent", {"q": 1}, tool="plain")  # no output stored, no attempt, not truncated
    record = httpx.get(console.url + "/ui/audit/1", headers=bearer("admin")).text
    assert "None" not in record
    assert re.search(r"<dt>output</dt>\s*<dd><code>\u2014</code>", record), record
    for path in ("/ui/health", "/ui/tools", "/ui/audit", "/ui/runs"):
        assert ">None<" not in httpx.get(console.url + path, headers=bearer("admin")).text, path


def test_the_audit_row_of_a_denied_call_keeps_the_reason_and_the_page_shows_it(console: Console) -> None:
    approval_id = console.request_approval("agent", {"q": "deny me"})
    console.runtime.deny(approval_id, principal="admin", reason="not on <b>production</b>")
    refused = console.call("agent", {"q": "deny me"})
    assert refused["error"]["code"] == "permission_denied"  # type: ignore[index]
    row = next(r for r in console.runtime.audit.records() if r["decision"] == "denied")
    assert json.loads(row["egress"])["approval"] == {
        "id": approval_id,
        "by": "admin",
        "reason": "not on <b>production</b>",
    }
    assert console.runtime.audit.verify().ok, "the reason is inside the chain"
    page = httpx.get(console.url + "/ui/audit", headers=bearer("admin")).text
    assert "reason: not on &lt;b&gt;production&lt;/b&gt;" in page
    asked = next(r for r in console.runtime.audit.records() if r["outcome"] == "approval_required")
    assert "reason" not in json.loads(asked["egress"]).get("approval", {}), "a row without a denial has no reason"


def test_the_audit_time_column_is_to_the_second_with_the_full_time_kept(console: Console) -> None:
    console.call("agent", {"q": 1}, tool="plain")
    stored = next(iter(console.runtime.audit.records()))["time"]
    page = httpx.get(console.url + "/ui/audit", headers=bearer("admin")).text
    shown = stored[:19].replace("T", " ")
    assert f'<time datetime="{stored}" title="{stored}">{shown}</time>' in page
    assert "+00:00</td>" not in page and len(shown) == 19


def test_the_runs_list_and_the_run_page_count_the_same_steps(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "x"}, principal="agent")
    assert paused.status == "paused", paused.to_dict()
    journal = console.runtime.runs.journal(paused.run_id)
    assert len(journal) == 1, "the call that paused is made again after the approval: not a step yet"
    assert console.runtime.runs.record(paused.run_id).steps == 1
    listed = httpx.get(console.url + "/ui/runs", headers=bearer("agent")).text
    row = listed[listed.index(f'id="run-{paused.run_id}"') :]
    assert re.search(r"<td>(\d+)</td>\s*</tr>", row).group(1) == "1"  # type: ignore[union-attr]
    shown = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("agent")).text
    assert len(re.findall(r'<tr id="step-\d+">', shown)) == 1
    console.runtime.approve(paused.error.details["approval_id"], principal="admin")  # type: ignore[union-attr]
    done = console.runtime.runs.resume(paused.run_id)
    assert done.status == "done" and console.runtime.runs.record(paused.run_id).steps == 2
    assert len(console.runtime.runs.journal(paused.run_id)) == 2


def test_a_paused_run_links_to_its_approval_instead_of_printing_a_command(console: Console) -> None:
    paused = console.runtime.run(PAUSING, input={"q": "x"}, principal="agent")
    approval_id = paused.error.details["approval_id"]  # type: ignore[union-attr]
    as_admin = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("admin")).text
    assert f'<a href="/ui/approvals#approval-{approval_id}">' in as_admin
    assert "glovebox" not in as_admin.split("<main>")[1].split("<h2>Steps")[0].replace("glovebox:audit", "")
    as_owner = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("agent")).text
    assert "/ui/approvals" not in as_owner, "no link to a page the viewer may not open"
    assert "<code>glovebox:approve</code> scope approves or denies it" in as_owner
    approvals = httpx.get(console.url + "/ui/approvals", headers=bearer("admin")).text
    assert f'id="approval-{approval_id}"' in approvals, "the link's target is on the approvals page"


def test_deny_and_cancel_are_destructive_and_behind_a_confirmation(console: Console) -> None:
    approval_id = console.request_approval("agent", {"q": "confirm"})
    page = httpx.get(console.url + "/ui/approvals", headers=bearer("admin")).text
    row = page[page.index(f'id="approval-{approval_id}"') :]
    assert re.search(r'<button type="submit" class="primary" aria-label="Approve request', row)
    confirm = re.search(
        r'<details class="confirm" id="deny-\w+">\s*<summary class="danger"[^>]*>Deny…</summary>(.*?)</details>',
        row,
        re.S,
    )
    assert confirm is not None and '<button type="submit" class="danger"' in confirm.group(1)
    paused = console.runtime.run(PAUSING, input={"q": "y"}, principal="agent")
    run = httpx.get(console.url + f"/ui/runs/{paused.run_id}", headers=bearer("agent")).text
    assert re.search(r'class="primary" aria-label="Resume run', run)
    cancel = re.search(
        r'<details class="confirm" id="cancel-confirm">\s*<summary class="danger"[^>]*>Cancel…</summary>(.*?)</details>',  # noqa: E501
        run,
        re.S,
    )
    assert cancel is not None and 'class="danger" aria-label="Cancel run' in cancel.group(1)


#: A program that makes one call and then fails.
FAILING = """export default async function (input, tools) {
  await tools.call("plain", { q: "made" });
  throw new Error("the third step never came");
}"""


def test_the_runs_pages_show_each_runs_language_program_digest_and_rollback(console: Console) -> None:
    result = console.runtime.run(HOSTILE, principal="agent")
    digest = console.runtime.runs.store.program_digest(result.run_id)
    assert digest is not None and digest.startswith("sha256:")
    listed = httpx.get(console.url + "/ui/runs", headers=bearer("agent")).text
    row = listed[listed.index(f'id="run-{result.run_id}"') :].split("</tr>")[0]
    assert '<td class="lang">ts</td>' in row and f'title="{digest}"' in row and digest[:19] in row
    assert '<td class="rollback">\u2014</td>' in row, "never rolled back: a dash"
    page = httpx.get(console.url + f"/ui/runs/{result.run_id}", headers=bearer("agent")).text
    assert f'<code id="run-digest">{digest}</code>' in page and 'id="run-lang">ts<' in page
    assert "never rolled back" in page and "Roll back" not in page, "a run that ran to the end is not rolled back"


def test_saving_a_run_as_a_tool_is_the_policys_word_and_refused_without_the_save_scope(console: Console) -> None:
    result = console.runtime.run(HOSTILE, principal="agent")
    assert result.status == "done", result.to_dict()
    url = f"/ui/runs/{result.run_id}/save"
    with signed_in(console, "agent") as client:
        page = client.get(f"/ui/runs/{result.run_id}").text
        assert 'id="save-form"' in page and "glovebox:save" in page
        token = csrf_of(page)
        assert client.post(url, data={"name": "hostile"}).status_code == 403, "no CSRF token"
        refused = client.post(url, data={"csrf": token, "name": "hostile"})
        assert refused.status_code == 403 and 'id="message"' in refused.text
        assert "may not save a program as a tool" in refused.text and "glovebox:save" in refused.text
        with pytest.raises(glovebox.ToolNotFound):
            console.runtime.tool("hostile")
        text = console.policy.read_text()
        console.policy.write_text(text.replace('"agent": {scopes: [run]', '"agent": {scopes: [run, glovebox:save]'))
        assert console.runtime.reload_policy()
        assert client.post(url, data={"csrf": token, "name": ""}).status_code == 400
        saved = client.post(url, data={"csrf": token, "name": "hostile", "review": "on"}, follow_redirects=True)
        assert saved.status_code == 200 and 'id="run-saved"' in saved.text and "hostile@1.0.0" in saved.text
        again = client.post(url, data={"csrf": token, "name": "hostile"})
        assert again.status_code == 409, "the name is taken"
    info = console.runtime.tool("hostile")
    assert info.manifest.kind == "program"
    # Another principal's run stays out of sight: saving it answers as an unknown run.
    theirs = console.runtime.run(HOSTILE, principal=XSS_PRINCIPAL)
    other = httpx.post(console.url + f"/ui/runs/{theirs.run_id}/save", data={"name": "x"}, headers=bearer("agent"))
    assert other.status_code == 404


def test_a_failed_run_is_rolled_back_from_its_page_by_its_principal_or_an_approving_auditor(
    console: Console,
) -> None:
    failed = console.runtime.run(FAILING, principal="agent")
    assert failed.status == "failed", failed.to_dict()
    with signed_in(console, "agent") as client:
        page = client.get(f"/ui/runs/{failed.run_id}").text
        assert 'id="rollback-confirm"' in page and 'id="save-form"' not in page, "a failed run is not saved"
        url = f"/ui/runs/{failed.run_id}/rollback"
        assert client.post(url, data={}).status_code == 403
        done = client.post(url, data={"csrf": csrf_of(page)}, follow_redirects=True)
        assert done.status_code == 200 and 'id="run-rollback" class="rollback">rolled_back<' in done.text
    assert console.runtime.runs.store.rollback_status(failed.run_id) == "rolled_back"
    theirs = console.runtime.run(FAILING, principal=XSS_PRINCIPAL)
    url = console.url + f"/ui/runs/{theirs.run_id}/rollback"
    assert httpx.post(url, headers=bearer("agent")).status_code == 404
    assert console.runtime.runs.store.rollback_status(theirs.run_id) is None
    assert httpx.post(url, headers=bearer("boss")).status_code == 303
    assert console.runtime.runs.store.rollback_status(theirs.run_id) == "rolled_back"
    # The runs list reads every row's digest and rollback in one query: the same answers.
    store = console.runtime.runs.store
    seals = store.seals([failed.run_id, theirs.run_id, "no-such-run"])
    assert seals == {r: (store.program_digest(r), "rolled_back") for r in (failed.run_id, theirs.run_id)}
    with signed_in(console, "boss") as client:
        assert client.get("/ui/runs").text.count(">rolled_back<") >= 2


def test_a_rollback_of_a_tampered_run_is_refused_with_its_code_on_the_page(console: Console) -> None:
    failed = console.runtime.run(FAILING, principal="agent")
    assert failed.status == "failed", failed.to_dict()
    with closing(sqlite3.connect(console.runtime.home / "runs.sqlite")) as db, db:
        edited = "UPDATE journal SET request = replace(request, 'made', 'edited') WHERE run_id = ? AND seq = 0"
        assert db.execute(edited, (failed.run_id,)).rowcount == 1
    refused = httpx.post(console.url + f"/ui/runs/{failed.run_id}/rollback", headers=bearer("agent"))
    assert refused.status_code == 409 and 'id="message"' in refused.text
    assert "journal_tampered" in refused.text and "it will not" in refused.text
    assert console.runtime.runs.store.rollback_status(failed.run_id) is None
