"""Ingest throughput through the API against the direct-insert floor, and case-read latency.

    python bench/ingest_reads.py [--reports 200] [--cases 63] [--concurrency 8] [--workers 2]
                           [--url URL --token TOKEN] [--seed 1]

1. Posts N synthetic reports (the reference report with every measured number perturbed,
   fresh case ids and runIds, deterministic from --seed) to a live ``moescope serve`` on
   Postgres with C concurrent clients: cases/s and p50/p99 latency per POST.
2. Times ``GET /api/v1/reports/{id}/cases`` for the 63-case reference report.
3. Inserts the same rows (validated and derived beforehand, outside the clock) into the
   emptied tables with SQLAlchemy Core, one transaction per report like the API: the floor.

The database is MOESCOPE_BENCH_POSTGRES_URL (its tables are emptied: point it at a
scratch database), else a fresh database on the MOESCOPE_TEST_POSTGRES_URL server, created
and dropped here. Targets: API >= 40 % of the floor; GET .../cases p99 < 20 ms (ETag and gzip on).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, insert, select, text
from sqlalchemy.orm import Session

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # tests/live.py: the server process

from live import scratch_postgres_database, serve_process  # noqa: E402

from app import report_body  # noqa: E402
from app.models import Base, utcnow  # noqa: E402
from app.repository import tokens  # noqa: E402
from app.services import reports as report_service  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from ingest.provenance import provenance_key  # noqa: E402
from ingest.reference import reference_report_text  # noqa: E402
from ingest.series import series_context  # noqa: E402
from ingest.validate import validate_report  # noqa: E402

API_TARGET = 0.40
GET_P99_TARGET_MS = 20.0
# Fields a perturbation must leave alone: imbalance is a setting (>= 1), not a measurement.
KEEP = {"imbalance"}


# --- synthetic reports --------------------------------------------------------------------


def _perturb(value: Any, factor: float) -> Any:
    if isinstance(value, bool) or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value * factor
    if isinstance(value, list):
        return [_perturb(v, factor) for v in value]
    if isinstance(value, dict):
        return {k: v if k in KEEP else _perturb(v, factor) for k, v in value.items()}
    return value


def synthetic_reports(n: int, n_cases: int, seed: int) -> list[dict[str, Any]]:
    """N distinct reports derived from the reference: each case's measured floats scaled by
    its own factor, case ids and runIds unique. Deterministic for a seed."""
    reference = json.loads(reference_report_text())
    base_cases = reference["cases"]
    rng = random.Random(seed)
    out = []
    for r in range(n):
        report = {k: copy.deepcopy(v) for k, v in reference.items() if k != "cases"}
        report["meta"]["runId"] = f"bench-{seed}-{r}"
        cases = []
        for i in range(n_cases):
            case = _perturb(base_cases[i % len(base_cases)], rng.uniform(0.9, 1.1))
            case["id"] = f"{case['id']}-r{r}-{i}"
            cases.append(case)
        report["cases"] = cases
        out.append(report)
    return out


# --- database and server ------------------------------------------------------------------


@contextmanager
def bench_database() -> Iterator[str]:
    given = os.environ.get("MOESCOPE_BENCH_POSTGRES_URL")
    if given:
        yield given
        return
    server = os.environ.get(
        "MOESCOPE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    with scratch_postgres_database(server, prefix="moescope_bench") as url:
        yield url


def empty_tables(engine: Engine) -> None:
    names = ", ".join(t.name for t in Base.metadata.sorted_tables if t.name != "api_tokens")
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


def ingest_token(database_url: str) -> str:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            _, token = tokens.create_token(session, f"bench-{uuid.uuid4().hex[:6]}", "ingest")
            session.commit()
    finally:
        engine.dispose()
    return token


@contextmanager
def serve(database_url: str, workers: int) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp, serve_process(
        database_url, Path(tmp) / "server.log", "--workers", str(workers), ready_path="/readyz"
    ) as server:
        yield server.url


# --- measurements -------------------------------------------------------------------------


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass
class ApiResult:
    wall_s: float
    latencies_s: list[float]


def post_reports(url: str, token: str, bodies: list[bytes], concurrency: int) -> ApiResult:
    work: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    for body in bodies:
        work.put(body)
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    start = threading.Barrier(concurrency + 1)

    def client() -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            http.get("/healthz")
            start.wait()
            while True:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                t0 = time.perf_counter()
                response = http.post("/api/v1/reports", content=body)
                elapsed = time.perf_counter() - t0
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != 201:
                        failures.append(f"{response.status_code}: {response.text[:300]}")

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if failures:
        raise SystemExit(f"{len(failures)} POST(s) failed, first: {failures[0]}")
    return ApiResult(wall, latencies)


def get_cases_latencies(url: str, token: str, requests: int) -> list[float]:
    reference = reference_report_text().encode()
    with httpx.Client(base_url=url, timeout=30) as http:
        posted = http.post("/api/v1/reports", content=reference, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        if posted.status_code not in (200, 201):
            raise SystemExit(f"posting the reference failed: {posted.text[:300]}")
        path = f"/api/v1/reports/{posted.json()['id']}/cases"
        for _ in range(10):  # warm the connection, the pool and the caches
            http.get(path)
        samples = []
        for _ in range(requests):
            t0 = time.perf_counter()
            response = http.get(path)
            samples.append(time.perf_counter() - t0)
            if response.status_code != 200 or response.json()["total"] != 63:
                raise SystemExit(f"GET {path} failed: {response.text[:300]}")
    return samples


@dataclass
class Prepared:
    report: dict[str, Any]
    cases: list[dict[str, Any]]
    caveats: list[list[dict[str, str]]]


def prepare_rows(reports: list[dict[str, Any]]) -> list[Prepared]:
    """The rows the API would write, computed with the service's own code."""
    out = []
    for raw in reports:
        report = validate_report(raw)
        extra = {k: v for k, v in raw.items() if k not in ("meta", "cases")}
        sha, hashes = report_service.content_hashes(raw)
        rows, caveats = report_service.case_rows(0, report.meta, report.cases, hashes, 0)
        best = max((r["percent_of_peak"] for r in rows if r["percent_of_peak"] is not None),
                   default=None)
        out.append(Prepared(
            report={
                "content_sha256": sha, "current_sha256": sha,
                "run_id": report.meta.runId, "date": report.meta.date, "gpu": report.meta.gpu,
                "series": series_context(raw["meta"]),
                "provenance": provenance_key(raw["meta"]), "source": report.meta.source,
                "meta": raw["meta"], "extra": extra,
                # The one stored copy of the report as posted, as the service writes it.
                "body": report_body.encode(raw["meta"], raw["cases"], extra),
                "case_count": len(rows), "best_percent_of_peak": best,
                "created_at": utcnow(), "updated_at": utcnow(),
            },
            cases=rows,
            caveats=[[{"code": c.code, "message": c.message} for c in cs] for cs in caveats],
        ))
    return out


def direct_insert(engine: Engine, prepared: list[Prepared]) -> float:
    """Wall seconds to insert every report, one transaction each, with SQLAlchemy Core:
    the cases as one pipelined executemany, their ids in one query, then the caveats."""
    reports, cases, caveats = (Base.metadata.tables[n] for n in ("reports", "cases", "caveats"))
    t0 = time.perf_counter()
    for item in prepared:
        with engine.begin() as conn:
            report_id = conn.execute(
                insert(reports).returning(reports.c.id), item.report
            ).scalar_one()
            conn.execute(insert(cases), [{**row, "report_id": report_id} for row in item.cases])
            pk_of = dict(conn.execute(
                select(cases.c.position, cases.c.id).where(cases.c.report_id == report_id)
            ).all())
            caveat_rows = [{**c, "case_pk": pk_of[row["position"]]}
                           for row, cs in zip(item.cases, item.caveats, strict=True) for c in cs]
            if caveat_rows:
                conn.execute(insert(caveats), caveat_rows)
    return time.perf_counter() - t0


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--cases", type=int, default=63)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers we start")
    parser.add_argument("--url", help="use this running server instead of starting one")
    parser.add_argument("--token", help="ingest token for --url (or MOESCOPE_TOKEN)")
    parser.add_argument("--get-requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    reports = synthetic_reports(args.reports, args.cases, args.seed)
    bodies = [json.dumps(r).encode() for r in reports]
    prepared = prepare_rows(reports)
    total_cases = args.reports * args.cases
    print(f"{args.reports} reports x {args.cases} cases = {total_cases} cases, "
          f"{sum(map(len, bodies)) / 2**20:.1f} MiB of JSON; concurrency {args.concurrency}")

    with bench_database() as database_url:
        upgrade(database_url)
        engine = create_engine(database_url)
        try:
            empty_tables(engine)
            if args.url:
                token = args.token or os.environ.get("MOESCOPE_TOKEN")
                if not token:
                    raise SystemExit("--url needs --token (or MOESCOPE_TOKEN)")
                api, gets = post_reports(args.url, token, bodies, args.concurrency), \
                    get_cases_latencies(args.url, token, args.get_requests)
                where = args.url
            else:
                token = ingest_token(database_url)
                with serve(database_url, args.workers) as url:
                    api = post_reports(url, token, bodies, args.concurrency)
                    gets = get_cases_latencies(url, token, args.get_requests)
                where = f"moescope serve --workers {args.workers}"
            empty_tables(engine)
            direct_s = direct_insert(engine, prepared)
            with engine.connect() as conn:
                stored = conn.execute(text("SELECT count(*) FROM cases")).scalar_one()
            if stored != total_cases:
                raise SystemExit(f"direct insert stored {stored} cases, not {total_cases}")
        finally:
            engine.dispose()

    api_rate = total_cases / api.wall_s
    direct_rate = total_cases / direct_s
    ratio = api_rate / direct_rate
    get_p50 = percentile(gets, 50) * 1e3
    get_p99 = percentile(gets, 99) * 1e3
    ok_ratio = ratio >= API_TARGET
    ok_get = get_p99 < GET_P99_TARGET_MS
    print(f"\nAPI ({where}, {args.concurrency} clients):")
    print(f"  {api_rate:9.0f} cases/s  ({args.reports / api.wall_s:.1f} reports/s, "
          f"{api.wall_s:.2f} s)")
    print(f"  POST latency p50 {percentile(api.latencies_s, 50) * 1e3:.1f} ms, "
          f"p99 {percentile(api.latencies_s, 99) * 1e3:.1f} ms, "
          f"mean {statistics.fmean(api.latencies_s) * 1e3:.1f} ms")
    print("direct SQLAlchemy Core insert (one transaction per report, same rows):")
    print(f"  {direct_rate:9.0f} cases/s  ({direct_s:.2f} s)")
    print(f"GET /api/v1/reports/{{id}}/cases (63 cases), {len(gets)} requests:")
    print(f"  p50 {get_p50:.1f} ms, p99 {get_p99:.1f} ms")
    print("\nsummary")
    print(f"  API / direct = {ratio * 100:.0f} % (target >= {API_TARGET * 100:.0f} %)  "
          f"{'PASS' if ok_ratio else 'FAIL'}")
    print(f"  GET cases p99 = {get_p99:.1f} ms (target < {GET_P99_TARGET_MS:.0f} ms)  "
          f"{'PASS' if ok_get else 'FAIL'}")
    return 0 if ok_ratio and ok_get else 1


if __name__ == "__main__":
    sys.exit(main())
