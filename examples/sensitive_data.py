"""Embedding glovebox where data is sensitive: deny by default, approvals, secrets, audit.

A records API on 127.0.0.1 wants a bearer token. The `lookup` tool (C, built from
examples/sensitive_data/lookup.c) may reach that one API, only through the host:

- the policy blocks everything by default; the agent may call `lookup` only after
  an officer approves that exact call (same tool, same input);
- the host adds the token to the request (from RECORDS_TOKEN); the tool never sees
  it, and the API's echo of it comes back as [REDACTED];
- a request outside the grant (another path) is refused: capability_denied;
- every call, refused ones included, is one row of a hash chain, verified at the end.

Run it from a checkout: .venv/bin/python examples/sensitive_data.py
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import glovebox

SOURCE = Path(__file__).resolve().parent / "sensitive_data" / "lookup.c"
TOKEN = "s3cr3t-records-token"

POLICY = """
version: 1
description: "Patient records: the agent reads one only after an officer approves it."
principals:
  agent: {{scopes: [records:read]}}
  officer: {{scopes: [records:read, glovebox:approve]}}
defaults: {{action: block}}
rules:
  - tool: lookup
    principals: [agent]
    action: require_approval
    reason: every record read needs a person's sign-off
  - tool: lookup
    principals: [officer]
    action: allow
grants:
  - tool: lookup
    http:
      - {{host: 127.0.0.1, schemes: [http], ports: [{port}], paths: ["/records/*"], allow_private: true}}
    secrets:
      - {{name: records-api, provider: env, source: RECORDS_TOKEN, host: 127.0.0.1, schemes: [http]}}
audit: {{store_inputs: true, store_outputs: false}}
"""


class RecordsAPI(BaseHTTPRequestHandler):
    """Answers /records/<id> to a caller holding the token, and echoes the token (carelessly)."""

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        code, body = (200, {"id": self.path.rsplit("/", 1)[-1], "diagnosis": "J45.909", "seen_with": TOKEN})
        if not authorized:
            code, body = 401, {"error": "no token"}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the http.server name)
        pass


def manifest(port: int) -> dict[str, object]:
    return {
        "name": "lookup",
        "version": "1.0.0",
        "description": "Fetch one record from the records API.",
        "input_schema": {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}},
        "required_scopes": ["records:read"],
        "capabilities": {
            "http": [
                {"host": "127.0.0.1", "schemes": ["http"], "ports": [port], "paths": ["/**"], "allow_private": True}
            ]
        },
    }


def main() -> None:
    api = ThreadingHTTPServer(("127.0.0.1", 0), RecordsAPI)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = api.server_address[1]
    home = Path(tempfile.mkdtemp(prefix="glovebox-sensitive-"))
    policy = home / "policy.yaml"
    policy.write_text(POLICY.format(port=port))
    os.environ["RECORDS_TOKEN"] = TOKEN  # read by the host when a call starts

    with glovebox.Runtime(home=home, policy=policy) as rt:
        rt.register(glovebox.build(SOURCE, home / "lookup.wasm"), manifest=manifest(port))
        record = {"url": f"http://127.0.0.1:{port}/records/17"}

        first = rt.call("lookup", record, principal="agent")
        assert first.error is not None
        approval_id = first.error.details["approval_id"]
        print(f"1. agent asks:      {first.code} (approval {approval_id})")

        rt.approve(approval_id, principal="officer")
        second = rt.call("lookup", record, principal="agent")
        body = json.loads(second.output["body"])
        outcome = second.code or "ok"
        print(f"2. after approval:  {outcome}; status {second.output['status']}, seen_with={body['seen_with']}")

        again = rt.call("lookup", record, principal="agent")
        print(f"3. the same again:  {again.code} (an approval is spent once)")

        outside = rt.call("lookup", {"url": f"http://127.0.0.1:{port}/admin"}, principal="officer")
        print(f"4. outside grant:   {outside.code}")

        stranger = rt.call("lookup", record, principal="stranger")
        print(f"5. unknown caller:  {stranger.code}")

        rows = rt.audit.tail(10)
        leaked = any(TOKEN in json.dumps(row) for row in rows)
        print(f"audit: {len(rows)} rows, outcomes {[row['outcome'] for row in rows]}, token in any row: {leaked}")
        verification = rt.audit.verify()
        print(f"audit verify: ok={verification.ok} rows={verification.rows} head={verification.head_hash[:16]}…")
    api.shutdown()


if __name__ == "__main__":
    main()
