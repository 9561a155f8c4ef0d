"""The one poster (runner/http.py) against a real HTTP server that is down or busy:
which answers are retried, how long it waits, when it gives up; and ``moescope ingest
--url`` riding on it."""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path

import httpx
import pytest
from scripted_http import Answer, scripted_server

from cli.main import main
from runner.http import Poster, equal_jitter, retry_after

CREATED = Answer(201, {"id": 7, "caseCount": 3, "created": True})


class FakeTime:
    """A clock that only sleeping moves, so the waits are exact and the test fast."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def poster(url: str, fake: FakeTime) -> Poster:
    return Poster(url, "tok", base_delay_s=0.5, max_delay_s=10, sleep=fake.sleep,
                  clock=fake.clock)


def test_busy_answers_are_retried_with_backoff_jitter_and_retry_after() -> None:
    fake = FakeTime()
    script = [Answer(503), Answer(429, headers={"Retry-After": "3"}), Answer(502), CREATED]
    with scripted_server(script) as server:
        posted = poster(server.url, fake).post("/api/v1/reports", b'{"a": 1}', 60)
    assert posted.response.status_code == 201 and posted.attempts == 4
    assert [r.body for r in server.requests] == [b'{"a": 1}'] * 4
    assert {r.headers["Authorization"] for r in server.requests} == {"Bearer tok"}
    first, second, third = fake.waits
    assert 0.25 <= first <= 0.5  # half of the 0.5 s base fixed, half jittered
    assert second == 3.0  # Retry-After outweighs the jittered 1 s
    assert 1.0 <= third <= 2.0  # the delay doubled twice: 2 s, jittered


def test_an_answer_retrying_cannot_change_comes_back_at_once() -> None:
    fake = FakeTime()
    with scripted_server([Answer(422, {"detail": "bad"}), CREATED]) as server:
        posted = poster(server.url, fake).post("/api/v1/reports", b"{}", 60)
    assert posted.response.status_code == 422 and posted.attempts == 1
    assert not posted.gave_up and fake.waits == [] and len(server.requests) == 1


def test_a_retry_after_past_the_deadline_gives_up_at_once() -> None:
    fake = FakeTime()
    with scripted_server([Answer(503, headers={"Retry-After": "120"}), CREATED]) as server:
        posted = poster(server.url, fake).post("/api/v1/reports", b"{}", 10)
    assert posted.response.status_code == 503 and posted.gave_up and posted.attempts == 1
    assert fake.waits == []


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    waited = retry_after(httpx.Response(503, headers={"Retry-After": when}))
    assert 28 <= waited <= 30  # the date has whole seconds
    assert retry_after(httpx.Response(503, headers={"Retry-After": "soon"})) == 0
    assert retry_after(httpx.Response(503)) == 0


def test_jitter_spreads_the_waits_within_half_the_delay() -> None:
    draws = [equal_jitter(2.0) for _ in range(200)]
    assert all(1.0 <= d <= 2.0 for d in draws)
    assert max(draws) - min(draws) > 0.5  # 200 uniform draws over 1 s: not bunched


def test_ingest_url_retries_until_the_service_takes_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"meta": {}, "cases": []}))
    with scripted_server([Answer(503), CREATED]) as server:
        assert main(["ingest", str(report), "--url", server.url, "--token", "t",
                     "--deadline", "5"]) == 0
    out, err = capsys.readouterr()
    assert f"{report}: stored as report 7 (3 cases)" in out and "1 of 1 file(s)" in err
    assert [r.path for r in server.requests] == ["/api/v1/reports"] * 2
    assert server.requests[1].body == report.read_bytes()


def test_ingest_url_says_when_it_gave_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    report.write_text("{}")
    with scripted_server([Answer(503, {"error": "db", "detail": "database down"})]) as server:
        assert main(["ingest", str(report), "--url", server.url, "--deadline", "0.6"]) == 1
    err = capsys.readouterr().err
    attempts = len(server.requests)
    assert attempts >= 2  # it retried within the 0.6 s
    assert f"{report}: HTTP 503: database down (gave up after {attempts} attempt(s))" in err
