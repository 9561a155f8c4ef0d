"""Opened alerts POSTed to the webhooks in ``MOESCOPE_WEBHOOK_URLS``: after the ingest's
commit, in a thread of their own, so a slow or dead receiver never holds or fails an
ingest (the report is stored before anything is sent; an ingest rolled back sends
nothing). Each attempt is logged per alert (app.repository.alerts.log_delivery).

The body is JSON: ``text`` (the why sentence: what Slack's incoming webhooks show) beside
the alert's fields (``app.services.alerts.alert_document``). With
``MOESCOPE_WEBHOOK_SECRET`` set, ``X-Moescope-Signature: sha256=<hex>`` is the HMAC-SHA256
of the body's exact bytes under that secret, for the receiver to check."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from app.core.config import Settings, get_settings
from app.repository import alerts as alerts_repo

log = logging.getLogger("moescope")

SIGNATURE_HEADER = "X-Moescope-Signature"
_PENDING = "moescope_webhooks"
# Worth another attempt: the receiver may answer differently later.
_RETRY_STATUS = {408, 425, 429}

_threads: list[threading.Thread] = []


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def configured() -> bool:
    return bool(get_settings().webhook_url_list())


def after_commit(session: Session, documents: Sequence[dict[str, Any]]) -> None:
    """Send these alerts once the session's transaction commits (never, if it rolls back)."""
    if not documents or not configured():
        return
    # Listening stays on for the session's life: a listener cannot be removed while its
    # event runs, and with nothing pending it does nothing.
    if not event.contains(session, "after_commit", _send_pending):
        event.listen(session, "after_commit", _send_pending)
        event.listen(session, "after_rollback", _drop_pending)
    session.info.setdefault(_PENDING, []).extend(documents)


def _drop_pending(session: Session) -> None:
    session.info.pop(_PENDING, None)


def _send_pending(session: Session) -> None:
    documents = session.info.pop(_PENDING, [])
    if not documents:
        return
    engine = session.get_bind()
    assert isinstance(engine, Engine)
    # Not a daemon: a command that ingests and exits still delivers what it opened.
    thread = threading.Thread(target=deliver, args=(engine, documents, get_settings()),
                              name="moescope-webhooks")
    _threads[:] = [t for t in _threads if t.is_alive()] + [thread]
    thread.start()


def wait_for_deliveries(timeout_s: float) -> None:
    """Wait for the deliveries under way (the tests, a benchmark)."""
    for thread in list(_threads):
        thread.join(timeout_s)


def deliver(engine: Engine, documents: Sequence[dict[str, Any]], settings: Settings) -> None:
    """Each alert to each URL, until one attempt succeeds or the attempts run out."""
    with httpx.Client(timeout=settings.webhook_timeout_s) as client:
        for document in documents:
            body = json.dumps({"text": document["why"], **document},
                              ensure_ascii=False).encode("utf-8")
            headers = {"Content-Type": "application/json"}
            if settings.webhook_secret:
                headers[SIGNATURE_HEADER] = signature(settings.webhook_secret, body)
            for url in settings.webhook_url_list():
                _deliver_one(engine, client, int(document["id"]), url, body, headers, settings)


def _deliver_one(engine: Engine, client: httpx.Client, alert_id: int, url: str, body: bytes,
                 headers: dict[str, str], settings: Settings) -> None:
    wait = settings.webhook_backoff_s
    for attempt in range(1, settings.webhook_attempts + 1):
        status: int | None = None
        error: str | None = None
        try:
            status = client.post(url, content=body, headers=headers).status_code
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        _log(engine, alert_id, url, attempt, status, error)
        if status is not None and (status < 500 and status not in _RETRY_STATUS):
            return
        if attempt < settings.webhook_attempts:
            time.sleep(wait)
            wait *= 2
    log.warning("alert %s: webhook %s gave up after %s attempts", alert_id, url,
                settings.webhook_attempts)


def _log(engine: Engine, alert_id: int, url: str, attempt: int, status: int | None,
         error: str | None) -> None:
    try:
        with Session(engine) as session:
            alerts_repo.log_delivery(session, alert_id, url, attempt, status, error)
            session.commit()
    except Exception:  # the log is a courtesy: a deleted alert must not stop the others
        log.exception("alert %s: delivery to %s not logged", alert_id, url)
