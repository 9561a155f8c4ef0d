"""An opened alert POSTed to a real HTTP receiver on a local port, signed; a receiver that
is down loses no report."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from alert_helpers import combine_step
from compare_helpers import nvfp4_mega, series
from history_helpers import ingest
from live import free_port
from sqlalchemy.orm import Session

from app.repository import reports as reports_repo
from app.services import alerts, webhooks

Body = dict[str, Any]
SECRET = "a shared secret"
REPORTS = 26  # a step at 20 is told by its fifth report


class _Receiver(BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    received: list[tuple[dict[str, str], bytes]] = []
    handler = type("Receiver", (_Receiver,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def _stepped(reference: Body) -> list[Body]:
    bodies = series(reference, REPORTS)
    combine_step(bodies, nvfp4_mega(bodies[0]), 20, 20.0)
    return bodies


def test_one_signed_post_per_opened_alert(
    session: Session, reference: Body, settings_env: Callable[..., None],
    receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, received = receiver
    settings_env(webhook_urls=url, webhook_secret=SECRET)
    for body in _stepped(reference):
        ingest(session, body)
    webhooks.wait_for_deliveries(30)

    [alert] = alerts.list_alerts(session)[0]
    [(headers, body)] = received
    expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Moescope-Signature"] == f"sha256={expected}"
    assert headers["Content-Type"] == "application/json"
    posted = json.loads(body)
    assert posted["text"] == alert.opened.why
    assert (posted["id"], posted["phase"], posted["firstBadReportId"]) == (
        alert.id, "combine", alert.opened.first_bad_report_id)
    assert len(posted["cases"]) == 9
    [delivery] = alerts.get_alert(session, alert.id).deliveries
    assert (delivery.url, delivery.attempt, delivery.status_code, delivery.error) == (
        url, 1, 204, None)


def test_a_dead_receiver_loses_no_report(
    session: Session, reference: Body, settings_env: Callable[..., None]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    settings_env(webhook_urls=dead, webhook_attempts=3, webhook_backoff_s=0.01)
    bodies = _stepped(reference)
    ids = [ingest(session, body) for body in bodies]
    webhooks.wait_for_deliveries(30)

    assert [reports_repo.case_count(session, i) for i in ids] == [63] * REPORTS
    [alert] = alerts.list_alerts(session)[0]
    deliveries = alerts.get_alert(session, alert.id).deliveries
    assert [(d.attempt, d.status_code) for d in deliveries] == [(1, None), (2, None), (3, None)]
    assert all(d.url == dead and "ConnectError" in (d.error or "") for d in deliveries)
