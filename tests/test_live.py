"""Against a real ``moescope serve`` process over HTTP: concurrent identical posts, the
database going away and coming back, the ingest CLI, ``--demo``, and the body limit."""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from conftest import (
    LiveServer,
    free_port,
    fresh_postgres_database,
    libpq_url,
    live_server,
)
from live import REPO

pytestmark = pytest.mark.live

PG_BIN = Path(os.environ.get("MOESCOPE_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(database_url), connect_timeout=5) as conn:
        return conn.execute(sql, params).fetchall()


def with_run_id(report: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["meta"]["runId"] = run_id or f"live-{uuid.uuid4().hex}"
    return out


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One live server on a fresh Postgres database, with a 1 MiB body limit."""
    tmp = tmp_path_factory.mktemp("live-pg")
    with fresh_postgres_database() as url, live_server(
        url, tmp, env={"MOESCOPE_MAX_BODY_MB": "1"}
    ) as server:
        yield server


@pytest.fixture(scope="module")
def ingest_headers(pg_server: LiveServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {pg_server.token('ingest')}"}


def post_all_at_once(
    url: str, bodies: list[bytes], headers: dict[str, str]
) -> list[httpx.Response]:
    """POST every body from its own thread and connection, released by one barrier."""
    barrier = threading.Barrier(len(bodies))

    def post(body: bytes) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            # Connect before the barrier so the requests themselves start together.
            client.get(url.replace("/api/v1/reports", "/healthz"))
            barrier.wait(timeout=30)
            return client.post(url, content=body,
                               headers={**headers, "Content-Type": "application/json"})

    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        return list(pool.map(post, bodies))


def test_concurrent_identical_posts_store_one_report(
    pg_server: LiveServer, ingest_headers: dict[str, str], reference: dict[str, Any]
) -> None:
    body = json.dumps(with_run_id(reference)).encode()
    responses = post_all_at_once(pg_server.url + "/api/v1/reports", [body] * 16, ingest_headers)

    assert sorted(r.status_code for r in responses) == [200] * 15 + [201], \
        [r.text for r in responses]
    answers = [r.json() for r in responses]
    assert [a["created"] for a in answers].count(True) == 1
    assert {a["id"] for a in answers} == {answers[0]["id"]}
    assert {a["caseCount"] for a in answers} == {63}
    report_id = answers[0]["id"]
    assert query(pg_server.database_url,
                 "SELECT count(*) FROM reports WHERE content_sha256 = "
                 "(SELECT content_sha256 FROM reports WHERE id = %s)", report_id) == [(1,)]
    assert query(pg_server.database_url,
                 "SELECT count(*), count(DISTINCT case_id) FROM cases WHERE report_id = %s",
                 report_id) == [(63, 63)]


def test_concurrent_posts_of_one_run_id_make_one_report(
    pg_server: LiveServer, ingest_headers: dict[str, str], reference: dict[str, Any]
) -> None:
    """Same new runId, different content: a runner resending with more cases each time.
    One report; every distinct case lands once, at a distinct position."""
    run_id = f"live-run-{uuid.uuid4().hex}"
    bodies = []
    for i in range(16):
        report = with_run_id(reference, run_id)
        report["meta"]["attempt"] = i
        extra = copy.deepcopy(reference["cases"][0])
        extra["id"] = f"resent-{i}"
        report["cases"].append(extra)
        bodies.append(json.dumps(report).encode())
    responses = post_all_at_once(pg_server.url + "/api/v1/reports", bodies, ingest_headers)

    assert sorted(r.status_code for r in responses) == [200] * 15 + [201], \
        [r.text for r in responses]
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 1
    report_id = ids.pop()
    assert query(pg_server.database_url,
                 "SELECT count(*) FROM reports WHERE run_id = %s", run_id) == [(1,)]
    assert query(pg_server.database_url,
                 "SELECT count(*), count(DISTINCT case_id), count(DISTINCT position), "
                 "min(position), max(position) FROM cases WHERE report_id = %s",
                 report_id) == [(63 + 16, 63 + 16, 63 + 16, 0, 63 + 15)]
    listed = httpx.get(f"{pg_server.url}/api/v1/reports/{report_id}").json()
    assert listed["caseCount"] == 63 + 16


def test_concurrent_posts_of_a_streamed_report_whole_find_it(
    pg_server: LiveServer, ingest_headers: dict[str, str], reference: dict[str, Any]
) -> None:
    """60 cases posted, 3 appended, then the complete file (no runId) posted 16 times at
    once: every answer is the streamed report, and nothing is written."""
    report = copy.deepcopy(reference)
    report["meta"]["source"] = f"streamed-{uuid.uuid4().hex}"
    assert "runId" not in report["meta"]
    url = pg_server.url + "/api/v1/reports"
    first = httpx.post(url, json={"meta": report["meta"], "cases": report["cases"][:60]},
                       headers=ingest_headers)
    assert first.status_code == 201, first.text
    report_id = first.json()["id"]
    appended = httpx.post(f"{url}/{report_id}/cases", json={"cases": report["cases"][60:]},
                          headers=ingest_headers)
    assert appended.json()["caseCount"] == 63, appended.text
    reports_before = query(pg_server.database_url, "SELECT count(*) FROM reports")

    responses = post_all_at_once(url, [json.dumps(report).encode()] * 16, ingest_headers)

    assert [r.status_code for r in responses] == [200] * 16, [r.text for r in responses]
    assert [r.json() for r in responses] == [
        {"id": report_id, "caseCount": 63, "created": False}] * 16
    assert query(pg_server.database_url, "SELECT count(*) FROM reports") == reports_before
    assert query(pg_server.database_url,
                 "SELECT count(*) FROM cases WHERE report_id = %s", report_id) == [(63,)]


def test_ingest_cli_against_live_server(
    pg_server: LiveServer, ingest_headers: dict[str, str], reference: dict[str, Any],
    tmp_path: Path,
) -> None:
    good_a, good_b = with_run_id(reference), with_run_id(reference)
    bad = with_run_id(reference)
    bad["cases"][3]["layerMS"] = -1
    del bad["cases"][7]["id"]
    files = []
    for name, doc in (("a.json", good_a), ("bad.json", bad), ("b.json", good_b)):
        (tmp_path / name).write_text(json.dumps(doc))
        files.append(str(tmp_path / name))
    (tmp_path / "broken.json").write_text('{"meta": ')
    files.append(str(tmp_path / "broken.json"))
    token = ingest_headers["Authorization"].removeprefix("Bearer ")

    done = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", *files, "--url", pg_server.url,
         "--token", token],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )

    assert done.returncode == 1, done.stderr
    assert "bad.json: rejected, 2 problem(s)" in done.stderr
    assert "cases[3].layerMS: must be > 0" in done.stderr
    assert "cases[7].id: field required" in done.stderr
    assert "broken.json: rejected" in done.stderr and "malformed JSON" in done.stderr
    assert "2 of 4 file(s) loaded" in done.stderr
    stored = [line for line in done.stdout.splitlines() if ": stored as report" in line]
    assert [Path(line.split(":")[0]).name for line in stored] == ["a.json", "b.json"]
    for doc in (good_a, good_b):
        assert query(pg_server.database_url,
                     "SELECT case_count FROM reports WHERE run_id = %s",
                     doc["meta"]["runId"]) == [(63,)]
    assert query(pg_server.database_url, "SELECT count(*) FROM reports WHERE run_id = %s",
                 bad["meta"]["runId"]) == [(0,)]

    again = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", files[0], "--url", pg_server.url,
         "--token", token],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert ": already stored as report" in again.stdout


def _chunks(total: int, chunk: int, sent: list[int]) -> Iterator[bytes]:
    block = b"[" + b"0," * (chunk // 2 - 1) + b"0"
    while sent[0] < total:
        sent[0] += len(block)
        yield block


def test_streamed_body_over_the_limit_is_413_before_it_is_all_sent(
    pg_server: LiveServer, ingest_headers: dict[str, str]
) -> None:
    total = 512 * 2**20  # far more than the 1 MiB limit, and than any socket buffer
    sent = [0]
    response = httpx.post(
        pg_server.url + "/api/v1/reports", content=_chunks(total, 64 * 2**10, sent),
        headers={**ingest_headers, "Content-Type": "application/json"}, timeout=60,
    )
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "payload_too_large"
    assert set(response.json()) == {"error", "detail"}
    # The server answered and hung up long before the client ran out of body.
    assert sent[0] < total // 4


def test_huge_content_length_is_413_without_a_body(
    pg_server: LiveServer, ingest_headers: dict[str, str]
) -> None:
    host, port = pg_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(
            b"POST /api/v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: {ingest_headers['Authorization']}\r\n".encode()
            + f"Content-Length: {64 * 2**30}\r\n\r\n".encode()
        )
        # Not one byte of the 64 GiB body is sent: the answer must come anyway.
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            data = sock.recv(65536)
            if not data:
                break
            reply += data
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), reply
    assert json.loads(body)["error"] == "payload_too_large"


def test_demo_loads_the_reference_once(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'demo.db'}"
    for _ in range(2):
        with live_server(database_url, tmp_path, "--demo") as server:
            page = httpx.get(server.url + "/api/v1/reports", timeout=30).json()
            assert page["total"] == 1
            assert page["items"][0]["caseCount"] == 63
            assert page["items"][0]["gpu"]
            report_id = page["items"][0]["id"]
            cases = httpx.get(f"{server.url}/api/v1/reports/{report_id}/cases", timeout=30)
            assert cases.json()["total"] == 63
    log = "".join(p.read_text() for p in tmp_path.glob("server-*.log"))
    assert log.count("demo: loaded the reference report") == 1
    assert "demo: database already holds reports; nothing loaded" in log


# --- the database going away under a live server --------------------------------------


@dataclass
class PrivatePostgres:
    """A throwaway Postgres 15 instance of our own, which this test may stop at will."""

    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> None:
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data / "data"), *args])

    def start(self) -> None:
        self.pg_ctl(
            "start", "-w", "-t", "30", "-l", str(self.data / "log"),
            "-o", f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off",
        )

    def stop(self, mode: str = "immediate") -> None:
        self.pg_ctl("stop", "-w", "-t", "30", "-m", mode)


def _as_postgres(cmd: list[str]) -> None:
    # initdb refuses to run as root; the cluster's files belong to the postgres user.
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    if not (PG_BIN / "initdb").exists():
        reason = f"no Postgres binaries in {PG_BIN} (set MOESCOPE_TEST_PG_BIN)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="moescope-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    pg = PrivatePostgres(root, free_port())
    try:
        _as_postgres([str(PG_BIN / "initdb"), "-D", str(root / "data"), "-U", "postgres",
                      "--auth=trust", "-E", "UTF8", "--no-sync"])
        pg.start()
        yield pg
    finally:
        try:
            pg.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(root, ignore_errors=True)


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) > 0
    assert set(response.json()) == {"error", "detail"}
    assert response.json()["error"] == "database_unavailable"


def test_database_down_is_503_and_the_service_recovers(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    env = {"MOESCOPE_DB_CONNECT_TIMEOUT_S": "2", "MOESCOPE_RETRY_AFTER_S": "3"}
    with private_postgres() as pg, live_server(pg.url, tmp_path, env=env) as server, \
            httpx.Client(base_url=server.url, timeout=20) as client:
        headers = {"Authorization": f"Bearer {server.token('ingest')}"}
        first = client.post("/api/v1/reports", json=reference, headers=headers)
        assert first.status_code == 201, first.text
        report_id = first.json()["id"]
        assert client.get("/readyz").status_code == 200

        pg.stop("immediate")
        late = with_run_id(reference)
        for response in (
            client.get("/api/v1/reports"),
            client.get(f"/api/v1/reports/{report_id}"),
            client.get(f"/api/v1/reports/{report_id}/cases"),
            client.get(f"/api/v1/reports/{report_id}/report.json"),
            client.post("/api/v1/reports", json=late, headers=headers),
            client.post(f"/api/v1/reports/{report_id}/cases",
                        json={"cases": [late["cases"][0] | {"id": "late-0"}]}, headers=headers),
            client.get("/readyz"),
        ):
            assert_unavailable(response)
        assert client.get("/healthz").status_code == 200

        pg.start()
        # No restart of the service: it must find the database again by itself.
        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "service did not recover within 30 s"
            time.sleep(0.2)
        stored = client.post("/api/v1/reports", json=late, headers=headers)
        assert stored.status_code == 201, stored.text
        again = client.post("/api/v1/reports", json=late, headers=headers)
        assert (again.status_code, again.json()["id"]) == (200, stored.json()["id"])
        assert client.get("/api/v1/reports").json()["total"] == 2
        assert query(pg.url, "SELECT count(*) FROM reports WHERE run_id = %s",
                     late["meta"]["runId"]) == [(1,)]
        assert query(pg.url, "SELECT count(*) FROM cases WHERE case_id = 'late-0'") == [(0,)]
        assert server.process.poll() is None
