"""Delivery to the results service through the on-disk spool (runner/spool.py), so
nothing is lost; each post retries up to a deadline (runner/http.py).

Protocol: a run creates its report (``POST /reports`` with the meta and no cases), then
appends each case as it finishes (``POST /reports/{id}/cases``). A spooled run whose
report id is not known here (a later process, another server) is resent whole as
``POST /reports`` with its meta and pending cases: the service merges it into the report
of the same runId, and an identical case already stored is a no-op, so resending is
idempotent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.http import Poster, Unreachable
from runner.spool import PendingRun, Spool, SpoolError, SpoolFull, run_folder

# Refused for good: the payload itself is wrong (or conflicts with what is stored).
REJECT_STATUS = {400, 409, 413, 422}

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


class DeliveryError(RuntimeError):
    """The service could not be reached, or answered with an error, before the deadline."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Rejected(DeliveryError):
    """The service refused the payload; sending it again cannot help."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}", status)


def post_api(poster: Poster, path: str, body: dict[str, Any], deadline_s: float
             ) -> dict[str, Any]:
    """POST to the service's API until it succeeds or ``deadline_s`` has passed (0: a
    single attempt); the answer's JSON, else DeliveryError (Rejected: the payload)."""
    try:
        posted = poster.post_json("/api/v1" + path, body, deadline_s)
    except Unreachable as exc:
        raise DeliveryError(str(exc)) from exc
    response = posted.response
    if response.status_code < 300:
        result: dict[str, Any] = response.json()
        return result
    if response.status_code in REJECT_STATUS:
        raise Rejected(response.status_code, response.text[:2000])
    problem = f"HTTP {response.status_code}: {response.text[:500]}"
    if posted.gave_up:
        problem += f" (gave up after {posted.attempts} attempt(s))"
    # 401/403/404: not the payload's fault, and not going to change soon.
    raise DeliveryError(problem, response.status_code)


@dataclass
class FlushResult:
    delivered: int = 0
    rejected: int = 0
    pending: int = 0
    problems: list[str] = field(default_factory=list)


def flush_run(spool: Spool, run: PendingRun, poster: Poster, deadline_s: float,
              report_id: int | None = None, log: Log = _stderr) -> tuple[int | None, FlushResult]:
    """Send one spooled run's pending cases; returns the report id when it is known."""
    result = FlushResult()
    files = run.case_files
    cases = run.cases()
    try:
        report_id = _send(poster, run, cases, deadline_s, report_id)
    except Rejected as exc:
        if len(files) > 1:
            # Find the culprit instead of setting good cases aside with it.
            for path in files:
                one = PendingRun(run.folder, run.url, run.meta, [path])
                report_id, part = flush_run(spool, one, poster, deadline_s, report_id, log)
                _merge(result, part)
            return report_id, result
        where = spool.reject(run, files, f"{exc}\n")
        log(f"error: the service refused {run.run_id} {files[0].name if files else 'meta'}"
            f" ({exc}); kept in {where}")
        result.rejected += len(files)
        result.problems.append(str(exc))
        return report_id, result
    except DeliveryError as exc:
        result.pending += len(files)
        result.problems.append(str(exc))
        return report_id, result
    spool.delivered(run, files)
    result.delivered += len(files)
    return report_id, result


def _send(poster: Poster, run: PendingRun, cases: list[dict[str, Any]], deadline_s: float,
          report_id: int | None) -> int:
    if report_id is not None:
        if not cases:
            return report_id
        try:
            post_api(poster, f"/reports/{report_id}/cases", {"cases": cases}, deadline_s)
            return report_id
        except Rejected:
            raise
        except DeliveryError as exc:
            if exc.status != 404:
                raise
            # The report went away (deleted, another server): create it again.
    answer = post_api(poster, "/reports", {"meta": run.meta, "cases": cases}, deadline_s)
    return int(answer["id"])


def _merge(total: FlushResult, part: FlushResult) -> None:
    total.delivered += part.delivered
    total.rejected += part.rejected
    total.pending += part.pending
    total.problems += part.problems


def resend_earlier(spool: Spool, token: str | None, log: Log = _stderr) -> FlushResult:
    """At the start of a run: one attempt each for the runs spooled before, so that a
    server gone for good does not hold up this run; ``moescope runner flush`` retries."""
    result = flush_spool(spool, None, token, 0, log)
    if result.delivered:
        log(f"resent {result.delivered} case(s) spooled by earlier runs")
    if result.pending:
        log(f"note: {result.pending} case(s) of earlier runs are still spooled in "
            f"{spool.root} (their server did not answer); `moescope runner flush` resends them")
    return result


def flush_spool(spool: Spool, url: str | None, token: str | None, deadline_s: float,
                log: Log = _stderr) -> FlushResult:
    """Resend every spooled run, to ``url`` or else the server each run was meant for."""
    total = FlushResult()
    for run in spool.pending():
        target = url or run.url
        if target is None:
            total.pending += len(run.case_files)
            total.problems.append(f"{run.folder.name}: no server URL (give --url)")
            continue
        _, part = flush_run(spool, run, Poster(target, token), deadline_s, log=log)
        _merge(total, part)
    return total


class Sender:
    """Delivers one run's report: spool first, then post; nothing is lost in between.

    While the service answers, each post may retry up to ``deadline_s``; after a failure
    the following cases try once (a dead service must not stall the matrix), and
    ``close`` tries everything left once more with the full deadline.
    """

    def __init__(self, spool: Spool, url: str, token: str | None, meta: dict[str, Any],
                 deadline_s: float = 60.0, log: Log = _stderr) -> None:
        run_id = meta.get("runId")
        if not run_id:
            raise ValueError("meta.runId is required to deliver a run idempotently")
        self.spool, self.url, self.meta, self.log = spool, url, meta, log
        self.run_id = str(run_id)
        self.poster = Poster(url, token)
        self.deadline_s = deadline_s
        self.report_id: int | None = None
        self.online = True
        self.result = FlushResult()

    def start(self) -> None:
        try:
            self.spool.put_meta(self.run_id, self.url, self.meta)
        except SpoolFull as full:
            self._post_past_the_spool("/reports", {"meta": self.meta, "cases": []}, full)
            return
        self._flush(self.deadline_s)

    def send(self, case: dict[str, Any]) -> None:
        try:
            self.spool.put_case(self.run_id, self.url, self.meta, case)
        except SpoolFull as full:
            if self.report_id is None:
                raise
            self._post_past_the_spool(f"/reports/{self.report_id}/cases",
                                      {"cases": [case]}, full)
            return
        self._flush(self.deadline_s if self.online else 0)

    def _post_past_the_spool(self, path: str, body: dict[str, Any], full: SpoolFull) -> None:
        """The spool has no room (earlier runs' posts fill it), but what the service takes
        now is not lost: post it directly. Only when that fails too is it an error."""
        try:
            answer = post_api(self.poster, path, body, self.deadline_s)
        except DeliveryError as exc:
            raise SpoolError(f"{full}; and {self.url} did not take it either ({exc})") from exc
        if "id" in answer:
            self.report_id = int(answer["id"])
        self.result.delivered += len(body["cases"])
        self.log(f"warning: {full}; posted to {self.url} directly")

    def close(self) -> FlushResult:
        self._flush(self.deadline_s)
        return self.result

    def _flush(self, deadline_s: float) -> None:
        folder = self.spool.root / run_folder(self.run_id)
        if not folder.exists():
            return
        run = self.spool.pending_run(folder)
        self.report_id, part = flush_run(self.spool, run, self.poster, deadline_s,
                                         self.report_id, self.log)
        self.result.delivered += part.delivered
        self.result.rejected += part.rejected
        self.result.problems += part.problems
        self.result.pending = part.pending
        # Until the report exists the service is down too: the meta alone, with no case
        # spooled yet, counts no pending case but must not let the next post wait again.
        online = not part.pending and self.report_id is not None
        if not online and self.online:
            self.log(f"warning: {self.url} did not take the report ({part.problems[-1]}); "
                     f"cases are spooled in {folder} and will be resent")
        self.online = online

