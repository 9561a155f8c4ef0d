"""SQLAlchemy 2 models. Rows never leave through the API: ``app.api.schemas`` does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware on every database: SQLite drops the offset, so it is put back."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given; use an aware one (UTC)")
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ReportRow(Base):
    __tablename__ = "reports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # sha256 of the canonical JSON of the report as first posted: the dedup key.
    content_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    # The same hash of report.json as it stands now (appends change it): a whole file
    # posted again after its cases were streamed is found by this index, not by decoding
    # every stored report of its day.
    current_sha256: Mapped[str] = mapped_column(String(64), index=True)
    run_id: Mapped[str | None] = mapped_column(String(200), unique=True)
    date: Mapped[str] = mapped_column(String(200), index=True)
    gpu: Mapped[str] = mapped_column(String(200), index=True)
    # ``ingest.series.series_context`` of the meta: the series its cases continue.
    series: Mapped[str] = mapped_column(String(16))
    # ``ingest.provenance.provenance_key`` of the meta: history marks where it changes
    # without decoding every report's meta.
    provenance: Mapped[str] = mapped_column(String(16))
    source: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Top-level keys other than meta and cases, kept so report.json is exact.
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # report.json's exact bytes, zlib-compressed (``app.report_body``): the one copy of
    # every case as posted. The columns hold what is queried; a per-case JSON copy beside
    # them doubled a report's bytes.
    # Deferred: read where report.json or its cases are served, never with a list of rows.
    body: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    case_count: Mapped[int] = mapped_column(Integer, default=0)
    best_percent_of_peak: Mapped[float | None] = mapped_column(Float)
    # Cases caveated above_peak, numerical_not_accepted or failed (ingest.ties.NEVER_BEST).
    data_error_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    cases: Mapped[list[CaseRow]] = relationship(
        back_populates="report", cascade="all, delete-orphan", passive_deletes=True,
        order_by="CaseRow.position",
    )

    __table_args__ = (
        Index("ix_reports_created_at_id", "created_at", "id"),
        # A series' reports in history order, found without reading other series; on
        # Postgres with their provenance, so history finds its changes from the index alone.
        Index("ix_reports_series_date", "series", "date", "created_at", "id",
              postgresql_include=["provenance"]),
        # The series of a GPU and their latest date, read from the index alone.
        Index("ix_reports_gpu_series_date", "gpu", "series", "date"),
        CheckConstraint("case_count >= 0", name="case_count_non_negative"),
        # Without AUTOINCREMENT SQLite hands a deleted newest report's id to the next
        # one: a runner still appending to /reports/{id}/cases would write into an
        # unrelated report, and old links would show it. (Postgres never reuses ids.)
        {"sqlite_autoincrement": True},
    )


# The columns history summarises per bucket (app.repository.history.BUCKET_METRICS).
HISTORY_METRIC_COLUMNS = ("layer_ms", "useful_tf_per_gpu", "percent_of_peak", "nvlink_tx_gbps",
                          "nvlink_rx_gbps", "phase_dispatch_ms", "phase_experts_ms",
                          "phase_combine_ms")


class CaseRow(Base):
    __tablename__ = "cases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    report_id: Mapped[int] = mapped_column(ForeignKey("reports.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    case_id: Mapped[str] = mapped_column(String(300))
    content_sha256: Mapped[str] = mapped_column(String(64))

    mode: Mapped[str] = mapped_column(String(20))
    ep: Mapped[int] = mapped_column(Integer)
    category: Mapped[str] = mapped_column(String(200))
    f: Mapped[int] = mapped_column(BigInteger)
    imbalance: Mapped[float] = mapped_column(Float)
    precision: Mapped[str] = mapped_column(String(200))
    pipeline: Mapped[str] = mapped_column(String(200))
    emulated: Mapped[bool] = mapped_column(Boolean, default=False)

    forward_ms: Mapped[float] = mapped_column(Float)
    backward_ms: Mapped[float | None] = mapped_column(Float)
    layer_ms: Mapped[float] = mapped_column(Float)
    useful_tf_per_gpu: Mapped[float] = mapped_column(Float)
    nvlink_tx_gbps: Mapped[float | None] = mapped_column(Float)
    nvlink_rx_gbps: Mapped[float | None] = mapped_column(Float)
    nvlink_max_tx_gbps: Mapped[float | None] = mapped_column(Float)
    nvlink_max_rx_gbps: Mapped[float | None] = mapped_column(Float)
    analytical_hbm_gbps: Mapped[float | None] = mapped_column(Float)
    slot_bytes: Mapped[int | None] = mapped_column(BigInteger)
    scratch_bytes: Mapped[int | None] = mapped_column(BigInteger)
    arena_bytes: Mapped[int | None] = mapped_column(BigInteger)
    input_bytes: Mapped[int | None] = mapped_column(BigInteger)
    host_scratch_bytes: Mapped[int | None] = mapped_column(BigInteger)
    allocated_peak_gib: Mapped[float | None] = mapped_column(Float)
    reserved_peak_gib: Mapped[float | None] = mapped_column(Float)
    numerical_accepted: Mapped[bool | None] = mapped_column(Boolean)
    graph_accepted: Mapped[bool | None] = mapped_column(Boolean)
    allocation_retries: Mapped[int] = mapped_column(BigInteger, default=0)
    ooms: Mapped[int] = mapped_column(BigInteger, default=0)
    logical_forward_payload_bytes_rank0: Mapped[int | None] = mapped_column(BigInteger)
    forward_flops_per_logical_payload_byte_rank0: Mapped[float | None] = mapped_column(Float)
    capacity_rows: Mapped[int | None] = mapped_column(BigInteger)

    # Derived (docs/metrics.md), stored so they can be filtered and sorted on.
    percent_of_peak: Mapped[float | None] = mapped_column(Float)
    percent_of_measured_ceiling: Mapped[float | None] = mapped_column(Float)
    hbm_percent_of_peak: Mapped[float | None] = mapped_column(Float)
    nvlink_tx_percent_of_peak: Mapped[float | None] = mapped_column(Float)
    nvlink_rx_percent_of_peak: Mapped[float | None] = mapped_column(Float)
    window_spread_percent: Mapped[float | None] = mapped_column(Float)
    observed_imbalance: Mapped[float | None] = mapped_column(Float)
    hot_rank_factor: Mapped[float | None] = mapped_column(Float)
    compute_util_percent: Mapped[float | None] = mapped_column(Float)
    hbm_util_percent: Mapped[float | None] = mapped_column(Float)
    nvlink_util_percent: Mapped[float | None] = mapped_column(Float)
    limiter: Mapped[str | None] = mapped_column(String(20))
    imbalance_loss_percent: Mapped[float | None] = mapped_column(Float)
    communication_share_percent: Mapped[float | None] = mapped_column(Float)

    # The combined windows' range, for history's band (the arrays are in the report's body).
    window_min_ms: Mapped[float | None] = mapped_column(Float)
    window_max_ms: Mapped[float | None] = mapped_column(Float)
    # phaseMS, for history's phase metrics (null where the runner timed no phases).
    phase_dispatch_ms: Mapped[float | None] = mapped_column(Float)
    phase_experts_ms: Mapped[float | None] = mapped_column(Float)
    phase_combine_ms: Mapped[float | None] = mapped_column(Float)

    report: Mapped[ReportRow] = relationship(back_populates="cases")
    caveats: Mapped[list[CaveatRow]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="CaveatRow.id",
        lazy="selectin",
    )

    __table_args__ = (
        Index("ix_cases_report_id_position", "report_id", "position"),
        # One case across reports (history, series lookups) without reading every report;
        # on Postgres the metrics history sums up ride along, so a year of one case is
        # summarised from the index alone (each case row sits on its own page). Unique: it
        # is also what keeps a case id once per report (a second index on the same pair
        # cost 5 KB a report).
        Index("ix_cases_case_id_report_id", "case_id", "report_id", unique=True,
              postgresql_include=list(HISTORY_METRIC_COLUMNS)),
        CheckConstraint("ep > 0", name="ep_positive"),
        CheckConstraint("forward_ms > 0", name="forward_ms_positive"),
        CheckConstraint("layer_ms > 0", name="layer_ms_positive"),
        CheckConstraint("backward_ms IS NULL OR backward_ms > 0", name="backward_ms_positive"),
        CheckConstraint("imbalance >= 1", name="imbalance_at_least_one"),
    )


class CaveatRow(Base):
    __tablename__ = "caveats"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_pk: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"), index=True)
    code: Mapped[str] = mapped_column(String(50), index=True)
    message: Mapped[str] = mapped_column(Text)


class MarkRow(Base):
    """An admin's note on a report for its series' baselines: ``step`` (a known change of
    level: baselines restart after it) or ``outlier`` (left out of every baseline)."""

    __tablename__ = "report_marks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    report_id: Mapped[int] = mapped_column(ForeignKey("reports.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(200))  # the token's name
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("report_id", "kind", name="uq_report_marks_report_id_kind"),
        CheckConstraint("kind IN ('step', 'outlier')", name="kind_known"),
    )


class TokenRow(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    scope: Mapped[str] = mapped_column(String(20))
    # sha256 of the token: tokens are 256 random bits, so a slow hash buys nothing.
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint("scope IN ('read', 'ingest', 'admin')", name="scope_known"),
    )


ALERT_STATES = ("new", "acknowledged", "invalid", "fixed")


class AlertRow(Base):
    """One change in one report across every case it moved (DESIGN.md "Alerts"): opened
    when the report is ingested, triaged by an admin (``state``, its log AlertEventRow)."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The report whose ingest opened it (deleting the report deletes its alerts).
    report_id: Mapped[int] = mapped_column(ForeignKey("reports.id", ondelete="CASCADE"))
    gpu: Mapped[str] = mapped_column(String(200))
    series: Mapped[str] = mapped_column(String(16))
    metric: Mapped[str] = mapped_column(String(50))
    direction: Mapped[str] = mapped_column(String(20))  # regression, improvement
    # The phase that moved most (in ms) in every case of the alert; null: none timed.
    phase: Mapped[str | None] = mapped_column(String(20))
    change_min_percent: Mapped[float] = mapped_column(Float)
    change_max_percent: Mapped[float] = mapped_column(Float)
    phase_min_percent: Mapped[float | None] = mapped_column(Float)
    phase_max_percent: Mapped[float | None] = mapped_column(Float)
    gpu_state_changes: Mapped[list[str]] = mapped_column(JSON, default=list)
    provenance_changes: Mapped[list[str]] = mapped_column(JSON, default=list)
    last_good_report_id: Mapped[int | None] = mapped_column(
        ForeignKey("reports.id", ondelete="SET NULL"))
    first_bad_report_id: Mapped[int] = mapped_column(
        ForeignKey("reports.id", ondelete="CASCADE"))
    why: Mapped[str] = mapped_column(Text)  # ingest.why.why_sentence, built once
    state: Mapped[str] = mapped_column(String(20), default="new")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        Index("ix_alerts_created_at_id", "created_at", "id"),
        Index("ix_alerts_report_id", "report_id"),
        Index("ix_alerts_first_bad_report_id", "first_bad_report_id"),
        Index("ix_alerts_last_good_report_id", "last_good_report_id"),
        Index("ix_alerts_series", "series"),
        CheckConstraint("state IN ('new', 'acknowledged', 'invalid', 'fixed')",
                        name="state_known"),
        CheckConstraint("direction IN ('regression', 'improvement')", name="direction_known"),
        {"sqlite_autoincrement": True},
    )


class AlertCaseRow(Base):
    """A case an alert moved, with its change (percent of its baseline)."""

    __tablename__ = "alert_cases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    case_id: Mapped[str] = mapped_column(String(300))
    change_percent: Mapped[float] = mapped_column(Float)
    phase_change_percent: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        Index("ix_alert_cases_alert_id", "alert_id"),
        Index("ix_alert_cases_case_id", "case_id"),
    )


class AlertEventRow(Base):
    """An alert's state change: who (the token's name), when, from, to and why."""

    __tablename__ = "alert_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"),
                                          index=True)
    from_state: Mapped[str] = mapped_column(String(20))
    to_state: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class WebhookDeliveryRow(Base):
    """One attempt to POST an opened alert to a webhook: the answer's status or the error."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"),
                                          index=True)
    url: Mapped[str] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
