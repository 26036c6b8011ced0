"""A hostile tool tries every URL, address and header trick in one call.

The grant is GET on ``/public/**`` of the local server; the tool then makes one
honest request. Every trick must be refused without a packet leaving 127.0.0.1, the host must survive, the
honest request must work, and the refused requests must be recorded, bounded,
in ``meta`` and the audit log.
"""

from __future__ import annotations

from pathlib import Path

import glovebox

from .test_http import BuildGuest, Server, local_rule, server  # noqa: F401  (fixture)

#: What the host answers each trick of tests/guests/http_tricks.c, in order.
EXPECTED = [
    "denied",  # a path outside the grant
    "denied",  # a method outside the grant
    "denied",  # another port
    "denied",  # another scheme
    "denied",  # userinfo
    "denied",  # another name for the same address
    "denied",  # an octal IPv4 literal
    "denied",  # a decimal IPv4 literal
    "denied",  # IPv4-mapped IPv6
    "denied",  # IPv4-compatible IPv6
    "denied",  # the cloud metadata address
    "denied",  # the metadata address embedded by NAT64
    "denied",  # a dot-dot segment
    "denied",  # `..;`, a dot-dot segment to Tomcat and Spring
    "denied",  # percent-encoded dots
    "denied",  # double-encoded dots
    "denied",  # an encoded slash
    "denied",  # backslashes
    "denied",  # file://
    "denied",  # gopher://
    "denied",  # CR/LF in a header value
    "denied",  # CR/LF in a header name
    "denied",  # a non-ASCII header value
    "denied",  # Host: the host's header
    "denied",  # Transfer-Encoding: the host's header
    "ok",  # the honest request
]


def test_every_trick_in_one_call_is_refused(_isolated_env: Path, build_guest: BuildGuest, server: Server) -> None:  # noqa: F811
    rule = local_rule(server, paths=["/public/**"])
    with glovebox.Runtime(grants={"http": [rule]}) as rt:
        rt.register(build_guest("http_tricks"), manifest={"name": "tricks", "capabilities": {"http": [rule]}})
        result = rt.call("tricks", {"port": server.port})
        assert result.ok, result.to_dict()
        assert result.output["results"] == EXPECTED
        assert len(result.meta["denials"]) == EXPECTED.count("denied")
        reasons = [denial["reason"] for denial in result.meta["denials"]]
        assert "header Host is set by the host, not the tool" in reasons
        assert "path /public/..;/admin has dot segments" in reasons
        # Only the honest request reached the server, with the host's own headers.
        [seen] = server.seen
        assert seen["path"] == "/public/ok"
        headers = {name.lower(): value for name, value in seen["headers"].items()}
        assert headers["host"] == f"127.0.0.1:{server.port}"
        assert "x-injected" not in headers and "x-a" not in headers
        [row] = rt.audit.tail(1)
        assert row["outcome"] == "ok" and row["call_id"] == result.meta["call_id"]
        assert rt.audit.verify().ok
        # The host goes on serving.
        assert rt.call("tricks", {"port": server.port}).ok
