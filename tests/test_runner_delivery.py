"""Delivery to a live ``moescope serve``: through the spool, retried, never lost, sent once."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LiveServer, free_port, live_server
from live import REPO

from runner.client import DeliveryError, Sender, flush_spool, post_api, resend_earlier
from runner.http import Poster
from runner.spool import Spool, SpoolError, SpoolFull, run_folder

pytestmark = pytest.mark.live


def meta_and_cases(reference: dict[str, Any], run_id: str, n: int
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta = {**reference["meta"], "runId": run_id}
    cases = []
    for i in range(n):
        case = copy.deepcopy(reference["cases"][i])
        case["id"] = f"{case['id']}-n{i}"
        cases.append(case)
    return meta, cases


def stored_cases(url: str, report_id: int) -> list[str]:
    document = httpx.get(f"{url}/api/v1/reports/{report_id}/report.json", timeout=10).json()
    return [c["id"] for c in document["cases"]]


def report_id_of(url: str, run_id: str) -> int:
    page = httpx.get(f"{url}/api/v1/reports", params={"q": run_id}, timeout=10).json()
    ids = [item["id"] for item in page["items"]]
    assert len(ids) == 1, page
    return int(ids[0])


def test_a_run_creates_then_appends(
        runner_server: tuple[LiveServer, str], tmp_path: Path, reference: dict[str, Any]
) -> None:
    live, token = runner_server
    meta, cases = meta_and_cases(reference, "run-append", 3)
    spool = Spool(tmp_path / "spool")
    sender = Sender(spool, live.url, token, meta, deadline_s=10)
    sender.start()
    assert sender.report_id is not None
    assert stored_cases(live.url, sender.report_id) == []
    for case in cases:
        sender.send(case)
        assert stored_cases(live.url, sender.report_id)[-1] == case["id"]
    result = sender.close()
    assert (result.delivered, result.pending, result.rejected) == (3, 0, 0)
    assert stored_cases(live.url, sender.report_id) == [c["id"] for c in cases]
    assert list(spool.root.iterdir()) == []


def test_service_stopped_mid_run_then_restarted_delivers_once(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    database = f"sqlite:///{tmp_path / 'moescope.db'}"
    port = free_port()
    meta, cases = meta_and_cases(reference, "run-restart", 5)
    spool = Spool(tmp_path / "spool")
    messages: list[str] = []
    with live_server(database, tmp_path, port=port) as first:
        token = first.token("ingest")
        sender = Sender(spool, first.url, token, meta, deadline_s=2, log=messages.append)
        sender.start()
        sender.send(cases[0])
        sender.send(cases[1])
    # The service is down: the cases wait in the spool, the run goes on.
    sender.send(cases[2])
    sender.send(cases[3])
    assert not sender.online and any("did not take the report" in m for m in messages)
    folder = spool.root / run_folder("run-restart")
    held = spool.pending_run(folder)
    assert [c["id"] for c in held.cases()] == [cases[2]["id"], cases[3]["id"]]
    with live_server(database, tmp_path, port=port) as second:
        sender.send(cases[4])  # one try: the service is back, everything left goes
        result = sender.close()
        assert result.pending == 0 and not spool.root.joinpath(folder.name).exists()
        report_id = report_id_of(second.url, "run-restart")
        assert stored_cases(second.url, report_id) == [c["id"] for c in cases]
        # Resending what the service already holds changes nothing.
        spool.put_case("run-restart", second.url, meta, cases[1])
        again = flush_spool(spool, None, token, deadline_s=5)
        assert (again.delivered, again.rejected) == (1, 0)
        assert stored_cases(second.url, report_id) == [c["id"] for c in cases]


def test_flush_command_resends_the_spool(
        runner_server: tuple[LiveServer, str], tmp_path: Path, reference: dict[str, Any]
) -> None:
    live, token = runner_server
    meta, cases = meta_and_cases(reference, "run-flush", 2)
    spool = Spool(tmp_path / "spool")
    for case in cases:  # as a runner that could not reach the service leaves them
        spool.put_case("run-flush", None, meta, case)
    command = [sys.executable, "-m", "cli", "runner", "flush", "--spool", str(spool.root),
               "--token", token]
    out = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 1 and "no server URL" in out.stderr
    out = subprocess.run([*command, "--url", live.url], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "2 case(s) delivered" in out.stdout
    assert stored_cases(live.url, report_id_of(live.url, "run-flush")) == [
        c["id"] for c in cases]
    assert list(spool.root.iterdir()) == []


def test_refused_cases_are_set_aside_not_lost(
        runner_server: tuple[LiveServer, str], tmp_path: Path, reference: dict[str, Any]
) -> None:
    live, token = runner_server
    meta, cases = meta_and_cases(reference, "run-refused", 3)
    cases[1]["layerMS"] = -1.0
    spool = Spool(tmp_path / "spool")
    for case in cases:
        spool.put_case("run-refused", live.url, meta, case)
    logged: list[str] = []
    result = flush_spool(spool, None, token, deadline_s=5, log=logged.append)
    assert (result.delivered, result.rejected, result.pending) == (2, 1, 0)
    assert stored_cases(live.url, report_id_of(live.url, "run-refused")) == [
        cases[0]["id"], cases[2]["id"]]
    kept = spool.root / "rejected" / run_folder("run-refused")
    assert json.loads((kept / "case-000001.json").read_text())["id"] == cases[1]["id"]
    assert "layerMS" in (kept / "reason.txt").read_text()
    assert "refused" in logged[0]


def test_a_full_spool_is_an_error(tmp_path: Path, reference: dict[str, Any]) -> None:
    meta, cases = meta_and_cases(reference, "run-full", 3)
    spool = Spool(tmp_path / "spool")
    spool.put_case("run-full", None, meta, cases[0])
    # Room for one more case, not two.
    spool.max_bytes = spool.used_bytes() + int(1.5 * len(json.dumps(cases[1])))
    spool.put_case("run-full", None, meta, cases[1])
    with pytest.raises(SpoolFull, match="is full"):
        spool.put_case("run-full", None, meta, cases[2])
    held = sorted(p.name for p in (spool.root / run_folder("run-full")).iterdir())
    assert held == ["case-000000.json", "case-000001.json", "meta.json"]
    assert spool.used_bytes() <= spool.max_bytes


def test_a_full_spool_does_not_stop_posts_the_service_takes(
    runner_server: tuple[LiveServer, str], tmp_path: Path, reference: dict[str, Any]
) -> None:
    live, token = runner_server
    meta, cases = meta_and_cases(reference, "run-past-the-spool", 2)
    spool = Spool(tmp_path / "spool", max_bytes=16)  # earlier runs' posts fill it
    messages: list[str] = []
    sender = Sender(spool, live.url, token, meta, deadline_s=10, log=messages.append)
    sender.start()
    assert sender.report_id is not None
    for case in cases:
        sender.send(case)
    assert stored_cases(live.url, sender.report_id) == [c["id"] for c in cases]
    assert sender.close().delivered == 2 and spool.used_bytes() == 0
    assert all("is full" in m and "posted to" in m for m in messages) and messages
    # No spool and no service: the error says both, and nothing claims delivery.
    dead = Sender(Spool(tmp_path / "spool2", max_bytes=16), f"http://127.0.0.1:{free_port()}",
                  token, {**meta, "runId": "run-nowhere"}, deadline_s=0, log=messages.append)
    with pytest.raises(SpoolError, match="is full.*did not take it either"):
        dead.start()


def test_earlier_runs_get_one_attempt_at_the_start_of_a_run(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    meta, cases = meta_and_cases(reference, "run-old", 2)
    spool = Spool(tmp_path / "spool")
    gone = f"http://127.0.0.1:{free_port()}"  # the server of an earlier run, gone for good
    for case in cases:
        spool.put_case("run-old", gone, meta, case)
    messages: list[str] = []
    result = resend_earlier(spool, None, log=messages.append)
    assert result.pending == 2 and "after 1 attempt(s)" in result.problems[0]
    assert "`moescope runner flush` resends them" in messages[-1]
    assert len(list(spool.pending())) == 1  # still held for the flush


def test_retries_back_off_until_the_deadline() -> None:
    now = [0.0]  # a fake clock that only sleeping moves: the test does not depend on speed
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    poster = Poster(f"http://127.0.0.1:{free_port()}", None, sleep=sleep,
                    clock=lambda: now[0], base_delay_s=0.05, max_delay_s=0.2,
                    jitter=lambda delay: delay)
    with pytest.raises(DeliveryError, match=r"gave up after 6 attempt\(s\)"):
        post_api(poster, "/reports", {}, deadline_s=0.6)
    # doubling, capped at 0.2, and the last wait cut to what the deadline leaves
    assert waits == pytest.approx([0.05, 0.1, 0.2, 0.2, 0.05], abs=1e-12)
    waits.clear()
    with pytest.raises(DeliveryError, match=r"after 1 attempt\(s\)"):
        post_api(poster, "/reports", {}, deadline_s=0)
    assert waits == []


def test_a_service_down_at_the_start_costs_one_deadline(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    # The meta post failing must mark the service down: the first case used to retry up
    # to the full deadline again (a dead service cost two deadlines before the matrix ran).
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    meta, cases = meta_and_cases(reference, "run-down-at-start", 1)
    messages: list[str] = []
    sender = Sender(Spool(tmp_path / "spool"), f"http://127.0.0.1:{free_port()}", None, meta,
                    deadline_s=5, log=messages.append)
    sender.poster = Poster(sender.url, None, sleep=sleep, clock=lambda: now[0])
    sender.start()
    assert waits and len(messages) == 1 and "did not take the report" in messages[0]
    waits.clear()
    sender.send(cases[0])
    assert waits == []  # one attempt, no retries
    assert len(messages) == 1


def test_a_run_with_the_service_down_keeps_every_case_for_flush(
    runner_server: tuple[LiveServer, str], tmp_path: Path
) -> None:
    live, token = runner_server
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        "[shape]\nT = 8\nD = 32\nE = 2\nK = 1\n[timing]\nwindows = 1\niterations = 1\n"
        "warmup = 0\nwarmup_ms = 0\n[matrix]\nmode = ['inference', 'training']\nep = 1\n"
        "precision = 'bf16'\npipeline = 'standard'\nF = [32, 64]\nimbalance = 1\n"
        "category = 'down'\n")
    spool, out = tmp_path / "spool", tmp_path / "r.json"
    dead = f"http://127.0.0.1:{free_port()}"
    ran = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--matrix", str(matrix), "--nproc", "1",
         "--url", dead, "--token", token, "--deadline", "0.5", "--spool", str(spool),
         "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=240)
    assert ran.returncode == 1, ran.stderr  # not delivered: the exit status says so
    assert "4 case(s) still spooled" in ran.stderr
    written = json.loads(out.read_text())
    [held] = list(Spool(spool).pending())
    assert held.meta == written["meta"] and held.url == dead
    assert held.cases() == written["cases"] and len(written["cases"]) == 4
    flushed = subprocess.run(
        [sys.executable, "-m", "cli", "runner", "flush", "--spool", str(spool),
         "--url", live.url, "--token", token], capture_output=True, text=True, cwd=REPO)
    assert flushed.returncode == 0, flushed.stderr
    report_id = report_id_of(live.url, written["meta"]["runId"])
    assert stored_cases(live.url, report_id) == [c["id"] for c in written["cases"]]
    document = httpx.get(f"{live.url}/api/v1/reports/{report_id}/report.json", timeout=10)
    assert document.json() == written


def test_a_report_deleted_mid_run_is_created_again(
    runner_server: tuple[LiveServer, str], tmp_path: Path, reference: dict[str, Any]
) -> None:
    live, token = runner_server
    meta, cases = meta_and_cases(reference, "run-deleted", 2)
    sender = Sender(Spool(tmp_path / "spool"), live.url, token, meta, deadline_s=5)
    sender.start()
    sender.send(cases[0])
    first = sender.report_id
    deleted = httpx.delete(f"{live.url}/api/v1/reports/{first}", timeout=10,
                           headers={"Authorization": f"Bearer {live.token('admin')}"})
    assert deleted.status_code in (200, 204), deleted.text
    sender.send(cases[1])  # the append gets 404: the report is posted again, with the case
    assert sender.report_id != first
    assert stored_cases(live.url, report_id_of(live.url, "run-deleted")) == [cases[1]["id"]]
    assert sender.close().pending == 0
