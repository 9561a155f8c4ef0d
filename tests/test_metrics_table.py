"""The one metric table (app.metrics): every screen's metrics read a case field that exists,
and history's names are the columns its buckets summarise."""

from __future__ import annotations

from app import case_fields
from app.matrix_metrics import METRICS as MATRIX_BY_NAME
from app.metrics import COMPARE, HISTORY, MATRIX, TABLE
from app.repository.history import BUCKET_METRICS
from app.services.comparison import METRICS as COMPARED
from app.services.history import METRICS as HISTORY_LABELS
from ingest.schema import Case, GpuState, PhaseMS


def test_every_metric_is_a_case_field() -> None:
    fields = {f.wire for f in case_fields.FIELDS}
    nested = {"phaseMS": set(PhaseMS.model_fields), "gpuState": set(GpuState.model_fields)}
    for metric in TABLE:
        head, _, tail = metric.key.partition(".")
        assert head in fields, metric.key
        assert not tail or tail in nested[head], metric.key
    assert {m.key.partition(".")[0] for m in TABLE} <= set(Case.model_fields) | {
        f.wire for f in case_fields.DERIVED}


def test_each_screen_picks_from_the_one_table() -> None:
    assert tuple(MATRIX_BY_NAME.values()) == MATRIX
    assert COMPARED == COMPARE
    assert list(HISTORY_LABELS) == [m.series for m in HISTORY] == list(BUCKET_METRICS)
    # A metric that is better one way says so; the limiter and clocks rank nothing.
    assert {m.key for m in TABLE if m.better is None} == {
        "limiter", "hotRankFactor", "gpuState.smClockMinMHz", "gpuState.smClockMaxMHz",
        "gpuState.powerMaxW"}
