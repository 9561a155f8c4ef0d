"""The figure builders on the reference report: traces, values, axis titles, styles."""

from __future__ import annotations

import copy
import re
from typing import Any

import plotly.graph_objects as go
import pytest
from live import REPO
from views import view, views

from app import figures
from app.services import chart_panels
from ingest.derived import caveats, derive
from ingest.schema import Case, Meta


def view_cases(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The cases as the API gives them (wire + derived + caveats), without a database."""
    meta = Meta.model_validate(report["meta"])
    out = []
    for raw in report["cases"]:
        case = Case.model_validate(raw)
        derived = derive(meta, case)
        out.append({**raw, **derived.as_dict(), "caveats": [
            {"code": c.code, "message": c.message} for c in caveats(meta, case, derived)]})
    return out


@pytest.fixture
def cases(reference: dict[str, Any]) -> list[dict[str, Any]]:
    return view_cases(reference)


def report_figures(cases: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, go.Figure]:
    return {chart.key: chart.build(views(cases), meta) for chart in figures.CHARTS}


def case_figures(case: dict[str, Any]) -> dict[str, go.Figure]:
    return {key: figures.to_figure(spec) for key, spec in figures.case_specs(view(case)).items()}


@pytest.fixture
def built(cases: list[dict[str, Any]], reference: dict[str, Any]) -> dict[str, go.Figure]:
    return report_figures(cases, reference["meta"])


def ids(trace: Any) -> list[str]:
    """The case ids of a trace's points (the first customdata column, shown on hover)."""
    return [row[0] for row in trace.customdata]


def points(fig: go.Figure, *, axis: str = "x", field: str = "y") -> dict[str, Any]:
    """Case id -> value over the traces drawn against ``axis`` (case-per-point traces)."""
    out: dict[str, Any] = {}
    for trace in fig.data:
        if trace.type in ("scatter", "bar") and (trace.xaxis or "x") == axis:
            out.update(zip(ids(trace), getattr(trace, field), strict=True))
    return out


def by_id(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in cases}


def test_every_figure_is_valid_plotly(built: dict[str, go.Figure]) -> None:
    # The builders skip validation for speed; a full validating round trip must accept them.
    assert set(built) == {c.key for c in figures.CHARTS}
    for fig in built.values():
        go.Figure(fig.to_dict())


def test_throughput_one_point_per_case_with_its_value(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    fig = built["throughput"]
    assert points(fig) == {c["id"]: c["usefulTFPerGPU"] for c in cases}
    assert fig.layout.yaxis.title.text == "useful TFLOP/s per GPU"
    # x is the case's configuration (one tick each, labelled), its precision x pipeline
    # variant side by side within it: the reference's four variants share 0.84 of a slot,
    # 0.21 each, centred on the tick.
    offsets = {("bf16", "standard"): -0.315, ("mxfp8", "staged"): -0.105,
               ("mxfp8", "mega"): 0.105, ("nvfp4", "mega"): 0.315}
    axis = fig.layout.xaxis
    case = by_id(cases)
    for trace in fig.data:
        for case_id, x in zip(ids(trace), trace.x, strict=True):
            c = case[case_id]
            tick = round(x)
            assert axis.ticktext[tick] == f"EP{c['ep']}<br>F{c['F']}<br>i{c['imbalance']:g}"
            assert x - tick == pytest.approx(offsets[(c["precision"], c["pipeline"])])
        assert "TFLOP/s" in trace.hovertemplate and "customdata[0]" in trace.hovertemplate
    # 18 configurations, grouped by mode and category, no title says "view order".
    assert len(axis.ticktext) == 18 and "view order" not in axis.title.text
    heads = [a.text for a in fig.layout.annotations]
    assert heads == ["inference · single_layer", "inference · width", "training · single_layer",
                     "training · width"]


def test_percent_of_peak_against_the_reports_own_peak(
    built: dict[str, go.Figure], cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    peaks = reference["meta"]["theoreticalTFPerGPU"]
    got = points(built["percent-of-peak"])
    for case in cases:
        assert got[case["id"]] == pytest.approx(
            case["usefulTFPerGPU"] / peaks[case["precision"]] * 100)
    # The 100 % line first; then the dotted lines between configuration groups.
    line, *between = built["percent-of-peak"].layout.shapes
    assert [b.line.dash for b in between] == ["dot"] * 3
    assert (line.y0, line.y1) == (100.0, 100.0)
    assert "%" in built["percent-of-peak"].layout.yaxis.title.text


def test_layer_time_stacks_forward_and_backward_with_window_range(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    fig = built["layer-time"]
    assert fig.layout.barmode == "stack"
    forward: dict[str, float] = {}
    backward: dict[str, float] = {}
    for trace in fig.data:
        if trace.type == "bar":
            target = forward if trace.name.endswith("forward") else backward
            target.update(zip(ids(trace), trace.y, strict=True))
        else:
            for case_id, up, down in zip(ids(trace), trace.error_y.array,
                                         trace.error_y.arrayminus, strict=True):
                combined = by_id(cases)[case_id]["windows"]["combined"]
                layer = by_id(cases)[case_id]["layerMS"]
                assert up == pytest.approx(max(combined) - layer)
                assert down == pytest.approx(layer - min(combined))
    assert forward == {c["id"]: c["forwardMS"] for c in cases}
    training = {c["id"]: c["backwardMS"] for c in cases if c["mode"] == "training"}
    assert {k: v for k, v in backward.items() if v is not None} == training
    assert fig.layout.yaxis.title.text == "time per layer (ms)"


def test_nvlink_mean_and_max_against_the_direction_peak(
    built: dict[str, go.Figure], cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    fig = built["nvlink"]
    for trace in fig.data:
        direction = trace.name.rsplit(" ", 1)[1]
        for case_id, mean, up in zip(ids(trace), trace.y, trace.error_y.array, strict=True):
            case = by_id(cases)[case_id]
            assert mean == case[f"nvlink{direction}GBps"]
            assert mean + up == pytest.approx(case[f"nvlinkMax{direction}GBps"])
    assert sum(len(t.x) for t in fig.data) == 2 * len(cases)
    line = fig.layout.shapes[0]
    assert line.y0 == reference["meta"]["theoreticalNVLinkGBpsPerDirection"]
    assert "GB/s" in fig.layout.yaxis.title.text


def test_hbm_against_the_hbm_peak(
    built: dict[str, go.Figure], cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    assert points(built["hbm"]) == {c["id"]: c["analyticalHBMGBps"] for c in cases}
    assert built["hbm"].layout.shapes[0].y0 == reference["meta"]["theoreticalHBMGBps"]
    assert built["hbm"].layout.yaxis.title.text == "HBM GB/s"


def test_memory_panels(built: dict[str, go.Figure], cases: list[dict[str, Any]]) -> None:
    fig = built["memory"]
    allocated = {}
    for trace in fig.data:
        if trace.name.endswith("allocated"):
            allocated.update(zip(ids(trace), trace.y, strict=True))
    assert allocated == {c["id"]: c["allocatedPeakGiB"] for c in cases}
    scratch = points(fig, axis="x2")
    slot_traces = [t for t in fig.data if t.name.endswith(" slot")]
    assert sum(len(t.x) for t in slot_traces) == len(cases)
    saved = points(fig, axis="x3")
    training = [c for c in cases if c["mode"] == "training"]
    assert set(saved) == {c["id"] for c in training} and training
    for case in training:
        mean = sum(case["savedBytes"]) / len(case["savedBytes"]) / 2**30
        assert saved[case["id"]] == pytest.approx(mean)
    assert scratch  # the arena panel is drawn
    titles = {fig.layout.yaxis.title.text, fig.layout.yaxis2.title.text,
              fig.layout.yaxis3.title.text}
    assert titles == {"peak GiB", "arena GiB", "saved GiB per rank"}


def test_routing_heatmap_is_case_by_rank(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    fig = built["routing"]
    heat = next(t for t in fig.data if t.type == "heatmap")
    widest = max(c["ep"] for c in cases)
    # A row per case, named by mode, configuration and variant (two categories in view),
    # the hover naming its id.
    label = {c["id"]: f"{c['mode']} EP{c['ep']} F{c['F']} i{c['imbalance']:g} "
                      f"{c['category']} · {c['precision']} {c['pipeline']}" for c in cases}
    # Each row's label names one case (the hover shows it; no id per cell).
    by_label = {v: k for k, v in label.items()}
    assert len(by_label) == len(label) and sorted(heat.y) == sorted(by_label)
    row_ids = [by_label[y] for y in heat.y]
    assert heat.customdata is None and "%{y}" in heat.hovertemplate
    assert heat.y[0] == "inference EP8 F3072 i1 single_layer · bf16 standard"
    case = by_id(cases)
    for row, case_id in zip(heat.z, row_ids, strict=True):
        assert len(row) == widest
        assert list(row[: case[case_id]["ep"]]) == case[case_id]["receiveRows"]
        assert all(v is None for v in row[case[case_id]["ep"]:])
    imbalance = {}
    for trace in fig.data[1:]:
        imbalance.update(zip(trace.y, trace.x, strict=True))
    assert imbalance == {label[c["id"]]: pytest.approx(c["observedImbalance"]) for c in cases}
    assert fig.layout.xaxis.title.text == "rank"


def lines(trace: Any) -> list[list[tuple[Any, Any, list[Any]]]]:
    """A trace's lines, split at its gaps: (x, y, customdata) per point."""
    out: list[list[tuple[Any, Any, list[Any]]]] = [[]]
    for point in zip(trace.x, trace.y, trace.customdata, strict=True):
        if point[0] is None:
            assert point[1] is None and out[-1]
            out.append([])
        else:
            out[-1].append(point)
    return out


def test_scaling_lines_join_only_matching_configurations(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    fig = built["scaling"]
    axes = {"x": "F", "x2": "ep"}
    seen = set()
    drawn = {"F": 0, "ep": 0}
    for trace in fig.data:
        vary = axes[trace.xaxis]
        seen.add(vary)
        assert trace.connectgaps is False
        assert len({(t.xaxis, t.legendgroup) for t in fig.data}) == len(fig.data)
        for line in lines(trace):
            members = [by_id(cases)[custom[0]] for _, _, custom in line]
            assert [x for x, _, _ in line] == [c[vary] for c in members]
            assert [x for x, _, _ in line] == sorted(x for x, _, _ in line)
            assert [y for _, y, _ in line] == [c["usefulTFPerGPU"] for c in members]
            for field in ("mode", "category", "ep", "precision", "pipeline", "F", "imbalance"):
                if field != vary:
                    assert len({c[field] for c in members}) == 1, field
            fixed = {custom[1] for _, _, custom in line}
            assert len(fixed) == 1 and f"mode={members[0]['mode']}" in fixed.pop()
            drawn[vary] += 1
    assert drawn == {vary: len(figures.matching_series(views(cases), vary)) for vary in drawn}
    assert seen == {"F", "ep"}
    assert fig.layout.xaxis.title.text == "expert width F"
    assert fig.layout.xaxis2.title.text == "EP (ranks)"


def test_arithmetic_intensity(built: dict[str, go.Figure], cases: list[dict[str, Any]]) -> None:
    fig = built["intensity"]
    got = {}
    for trace in fig.data:
        got.update(zip(trace.x, trace.y, strict=True))
    expected = {c["forwardFlopsPerLogicalPayloadByteRank0"]: c["usefulTFPerGPU"]
                for c in cases if c["forwardFlopsPerLogicalPayloadByteRank0"]}
    assert got == expected
    assert fig.layout.xaxis.type == "log"
    assert "FLOP per logical payload byte" in fig.layout.xaxis.title.text


def test_one_style_per_precision_and_pipeline_on_every_chart(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    styles: dict[str, set[tuple[str, str]]] = {}
    for fig in built.values():
        for trace in fig.data:
            if not trace.legendgroup or trace.name.endswith("windows min-max"):
                continue
            precision, pipeline = trace.legendgroup.split(" · ")
            assert trace.marker.color == figures.precision_colour(precision)
            if trace.type == "bar":
                assert trace.marker.pattern.shape == figures.pipeline_pattern(pipeline)
                continue
            symbol = trace.marker.symbol.removesuffix("-open")
            styles.setdefault(trace.legendgroup, set()).add((trace.marker.color, symbol))
    assert set(styles) == {f"{c['precision']} · {c['pipeline']}" for c in cases}
    assert all(len(s) == 1 for s in styles.values())
    colours = {next(iter(s))[0] for s in styles.values()}
    symbols = {next(iter(s))[1] for s in styles.values()}
    # Precision by colour and shape, the pipeline's mark inside: four variants, four symbols.
    assert len(colours) == 3 and symbols == {"circle", "square-cross", "square-x", "diamond-x"}
    # No precision is drawn in the red or green that mean worse and better.
    assert not colours & {"#d62728", "#2ca02c"}
    assert figures.precision_colour("fp4-new") == figures.precision_colour("fp4-new")


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def test_report_strings_are_escaped(
    cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    cases[0]["id"] = "<img src=x onerror=alert(1)>"
    cases[0]["pipeline"] = "<script>alert(1)</script>"
    for key, fig in report_figures(cases, reference["meta"]).items():
        found = strings(fig.to_plotly_json())
        assert not [s for s in found if "<img" in s or "<script" in s], key
        if key != "scaling":  # the altered case matches no other configuration
            assert any("&lt;img src=x onerror=alert(1)&gt;" in s for s in found), key
            assert any("&lt;script&gt;" in s for s in found), key


def test_case_figures(cases: list[dict[str, Any]]) -> None:
    training = next(c for c in cases if c["mode"] == "training")
    built = case_figures(training)
    windows = {t.name: list(t.y) for t in built["windows"].data}
    assert windows == training["windows"] and set(windows) == {"combined", "forward", "backward"}
    assert list(built["receive-rows"].data[0].y) == training["receiveRows"]
    saved = [v * 2**30 for v in built["saved-bytes"].data[0].y]
    assert saved == pytest.approx(training["savedBytes"])
    memory = dict(zip(built["memory"].data[0].x, built["memory"].data[0].y, strict=True))
    assert memory["allocated peak"] == training["allocatedPeakGiB"]
    assert memory["arena"] == pytest.approx(training["arenaBytes"] / 2**30)
    assert built["windows"].layout.yaxis.title.text == "time (ms)"
    for fig in built.values():
        go.Figure(fig.to_dict())
    inference = next(c for c in cases if c["mode"] == "inference")
    assert {t.name for t in case_figures(inference)["windows"].data} == {"combined", "forward"}


def test_legend_can_be_left_to_the_page(
    cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    for chart in figures.CHARTS:
        alone = chart.build(views(cases), reference["meta"])
        assert alone.layout.showlegend is None  # plotly's default: shown
        bare = chart.make(views(cases), reference["meta"], legend=False)
        # The page's shared legend names styles; the phases' own legend stays on its chart.
        assert bare["layout"].get("showlegend") is (None if chart.own_legend else False)
        assert bare["data"] == chart.spec(views(cases), reference["meta"])["data"]


BUNDLE = REPO / "static" / "vendor" / "plotly-cartesian.min.js"


def test_the_dashboards_plotly_bundle_draws_every_trace_the_builders_make(
    cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    """The dashboard loads plotly.js's cartesian bundle instead of the full one: it must be
    plotly.py's plotly.js release and register every trace type the figures use."""
    from plotly.offline import get_plotlyjs_version

    text = BUNDLE.read_text("utf-8")
    header = re.search(r"plotly\.js \(cartesian - minified\) v(\d+\.\d+)\.\d+", text[:300])
    assert header, "static/vendor/plotly-cartesian.min.js is not plotly.js's cartesian bundle"
    assert header.group(1) == get_plotlyjs_version().rsplit(".", 1)[0], \
        "plotly was upgraded: run `make plotly-bundle`"
    registered = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', text))
    specs = [chart.spec(views(cases), reference["meta"]) for chart in figures.CHARTS]
    specs += [spec for case in cases for spec in figures.case_specs(view(case)).values()]
    used = {trace["type"] for spec in specs for trace in spec["data"]}
    assert used and used <= registered, used - registered


def test_memory_panels_of_a_small_inference_view(
    cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    """Few cases: their configurations label the bottom panel only; no training case:
    the saved-bytes panel is left out and the title says why."""
    inference = [c for c in cases if c["mode"] == "inference"][:6]
    layout = figures.memory_spec(views(inference), reference["meta"])["layout"]
    # EP8 i1 in four variants, then EP8 i4 in two: two configurations, on the arena panel,
    # now the bottom one.
    assert layout["xaxis2"]["ticktext"] == ["EP8<br>F3072<br>i1", "EP8<br>F3072<br>i4"]
    assert layout["xaxis"]["showticklabels"] is False
    assert "xaxis3" not in layout and "yaxis3" not in layout
    assert layout["title"]["text"] == (
        "Memory (saved activations left out: no training case in view)")
    mixed = figures.memory_spec(views(cases), reference["meta"])["layout"]
    assert mixed["title"]["text"] == "Memory" and mixed["xaxis2"]["showticklabels"] is False
    assert len(mixed["xaxis3"]["ticktext"]) == 18


def test_an_empty_scaling_panel_says_why(
    cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    one_f = [c for c in cases if c["category"] == "single_layer" and c["ep"] == 8]
    assert {c["F"] for c in one_f} == {3072}  # nothing varies F alone here; EP is fixed too
    spec = figures.scaling_spec(views(one_f), reference["meta"])
    notes = {a["text"] for a in spec["layout"]["annotations"]}
    assert notes == {"no cases in view differ only in F", "no cases in view differ only in EP"}
    assert {t["xaxis"] for t in spec["data"]} == {"x", "x2"}  # both panels keep their axes
    full = figures.scaling_spec(views(cases), reference["meta"])
    assert full["layout"]["annotations"] == []


OPTIONAL_MEASURES = ("nvlinkTXGBps", "nvlinkRXGBps", "nvlinkMaxTXGBps", "nvlinkMaxRXGBps",
                     "analyticalHBMGBps", "slotBytes", "scratchBytes", "arenaBytes",
                     "allocatedPeakGiB", "reservedPeakGiB",
                     "forwardFlopsPerLogicalPayloadByteRank0")


def chart_notes(cases: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, set[str]]:
    return {chart.key: {a["text"] for a in chart.spec(views(cases), meta)["layout"]
                        .get("annotations", [])} for chart in figures.CHARTS}


def test_an_empty_chart_says_why(reference: dict[str, Any]) -> None:
    """No case in view, or none with the chart's optional measure: the chart says so
    instead of showing bare axes (or zero-height arena bars for sizes never measured)."""
    none = chart_notes([], reference["meta"])
    for key in ("throughput", "percent-of-peak", "layer-time", "nvlink", "hbm", "routing",
                "intensity", "phases"):
        assert "no case in view" in none[key], key
    assert "no case in view" in none["memory"]
    # No training case: the saved-bytes panel is left out, its title says why.
    assert "no training case in view" in figures.memory_spec([], reference["meta"])[
        "layout"]["title"]["text"]

    bare = copy.deepcopy(reference)
    for raw in bare["cases"]:
        for name in OPTIONAL_MEASURES:
            raw.pop(name, None)
        raw["receiveRows"] = []
    bare["meta"]["theoreticalTFPerGPU"] = {}
    cases = view_cases(bare)
    notes = chart_notes(cases, bare["meta"])
    assert "no case in view has NVLink counters" in notes["nvlink"]
    assert "no case in view has an analytical HBM bandwidth" in notes["hbm"]
    assert "no case in view has received rows per rank" in notes["routing"]
    assert "no case in view has forward FLOP per logical payload byte" in notes["intensity"]
    assert "no case in view has a theoretical peak for its precision" in \
        notes["percent-of-peak"]
    assert {"no case in view has PyTorch peaks", "no case in view has arena sizes"} <= \
        notes["memory"]
    arena = [t for t in figures.memory_spec(views(cases), bare["meta"])["data"]
             if t.get("yaxis") == "y2"]
    assert arena and all(y is None for t in arena for y in t["y"])
    # The reference's runner predates phaseMS: its phase chart says so.
    assert "no case in view has per-phase times (phaseMS)" in \
        chart_notes(view_cases(reference), reference["meta"])["phases"]
    # Drawn charts say nothing of the kind.
    phased = [{**c, "phaseMS": {"dispatch": 0.2, "experts": 0.9, "combine": 0.3}}
              for c in view_cases(reference)]
    full = chart_notes(phased, reference["meta"])
    assert not any(n.startswith("no case in view") for ns in full.values() for n in ns)


def test_phase_chart_stacks_each_cases_phases(cases: list[dict[str, Any]],
                                              reference: dict[str, Any]) -> None:
    view = [dict(c) for c in cases[:3]]
    view[0].update(phaseMS={"dispatch": 0.25, "experts": 1.5, "combine": 0.5},
                   dispatchGBps=410.0, combineGBps=380.5)
    view[2].update(phaseMS={"dispatch": 0.125, "experts": 0.75, "combine": 0.0625})
    spec = figures.phases_spec(views(view), reference["meta"])
    assert spec["layout"]["barmode"] == "stack"
    bars = {t["name"]: t["y"] for t in spec["data"]}
    # Above in ms; below as % of each case's forward time, by hand.
    f0, f2 = view[0]["forwardMS"], view[2]["forwardMS"]
    assert bars == {"dispatch": [0.25, None, 0.125], "experts": [1.5, None, 0.75],
                    "combine": [0.5, None, 0.0625],  # case 1 has none: no bar, not 0
                    "dispatch, % of forward": [pytest.approx(25 / f0), None,
                                               pytest.approx(12.5 / f2)],
                    "experts, % of forward": [pytest.approx(150 / f0), None,
                                              pytest.approx(75 / f2)],
                    "combine, % of forward": [pytest.approx(50 / f0), None,
                                              pytest.approx(6.25 / f2)]}
    assert "showlegend" not in spec["layout"]  # plotly's default: shown
    assert spec["layout"]["yaxis2"]["title"]["text"] == "% of the forward time"
    dispatch = next(t for t in spec["data"] if t["name"] == "dispatch")
    # A quantized dispatch's quantize phase stacks first, only when a case has one.
    view[1].update(phaseMS={"quantize": 0.5, "dispatch": 0.25, "experts": 1.0,
                            "combine": 0.25})
    quantized = figures.phases_spec(views(view), reference["meta"])
    assert [t["name"] for t in quantized["data"] if t.get("yaxis") != "y2"] == [
        "quantize", "dispatch", "experts", "combine"]
    assert quantized["data"][0]["y"] == [None, 0.5, None]
    assert dispatch["customdata"][0][2] == "410.0 GB/s (busiest rank's remote bytes)"
    assert dispatch["customdata"][1][2] == ""


def test_roofline_points_roofs_and_ridges(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    fig = built["roofline"]
    # Each case at its busiest rank: the mean rank's useful TFLOP/s x max/mean received rows;
    # left, per HBM byte of that rank (its rate over hbmUtilPercent of 8000 GB/s); right, per
    # NVLink payload byte of rank 0 (the wire's forwardFlopsPerLogicalPayloadByteRank0).
    left, right = {}, {}
    for trace in fig.data:
        if trace.customdata is not None:
            side = right if trace.xaxis == "x2" else left
            side.update(zip(ids(trace), zip(trace.x, trace.y, strict=True), strict=True))

    def hot(c: dict[str, Any]) -> float:
        rows = c["receiveRows"]
        return max(rows) / (sum(rows) / len(rows))

    assert left == {c["id"]: (
        pytest.approx(c["usefulTFPerGPU"] * hot(c) * 1000 / (c["hbmUtilPercent"] / 100 * 8000)),
        pytest.approx(c["usefulTFPerGPU"] * hot(c))) for c in cases}
    assert right == {c["id"]: (pytest.approx(c["forwardFlopsPerLogicalPayloadByteRank0"]),
                               pytest.approx(c["usefulTFPerGPU"] * hot(c)))
                     for c in cases if c["forwardFlopsPerLogicalPayloadByteRank0"]}
    # Balanced, the busiest rank is the mean rank: 1139.98 x 1000 / 4703.43 = 242.4 FLOP/B.
    first = cases[0]
    assert hot(first) == 1.0
    assert left[first["id"]][0] == pytest.approx(1139.9839390712232 * 1000 / 4703.434270325753)
    # Ridge points: peak TFLOP/s x 1000 / 8000 GB/s (HBM): bf16 312.5, mxfp8 625, nvfp4 1875
    # FLOP/B; / 900 GB/s (NVLink): 2777.8, 5555.6, 16666.7.
    roofs = {t.name: t for t in fig.data if t.name and "compute roof" in t.name}
    for precision, peak, at in (("bf16", 2500, 312.5), ("mxfp8", 5000, 625.0),
                                ("nvfp4", 15000, 1875.0)):
        roof = roofs[f"{precision} compute roof"]
        assert roof.x[0] == pytest.approx(at) and list(roof.y) == [peak, peak]
        assert f"ridge {at:,.0f} FLOP/B" in roof.text[0]
        nvlink_roof = roofs[f"{precision} compute roof (NVLink)"]
        assert nvlink_roof.x[0] == pytest.approx(peak * 1000 / 900)
        assert nvlink_roof.xaxis == "x2"
    (hbm,) = [t for t in fig.data if t.name and t.name.startswith("HBM roof")]
    # The HBM roof: attained = intensity x 8000 GB/s / 1000, up to the highest ridge.
    assert hbm.y[1] == pytest.approx(hbm.x[1] * 8000 / 1000) and hbm.x[1] == pytest.approx(1875)
    (nvlink,) = [t for t in fig.data if t.name and t.name.startswith("NVLink roof")]
    assert nvlink.y[1] == pytest.approx(nvlink.x[1] * 900 / 1000)
    assert nvlink.x[1] == pytest.approx(15000 * 1000 / 900)
    assert fig.layout.xaxis.type == "log" and "HBM byte" in fig.layout.xaxis.title.text
    assert "NVLink payload byte" in fig.layout.xaxis2.title.text


def test_roof_distances_are_the_busiest_ranks_share_of_each_roof(
    cases: list[dict[str, Any]], reference: dict[str, Any]
) -> None:
    from app.figures.roofline import roof_distances
    case = next(c for c in cases
                if c["id"] == "training-ep32-bf16-standard-single_layer-F3072-i4")
    got = roof_distances(view(case), reference["meta"])
    rows = case["receiveRows"]
    rate = case["usefulTFPerGPU"] * max(rows) / (sum(rows) / len(rows))
    # compute: of the 2500 bf16 peak; HBM: the busiest rank's bytes over 8000 GB/s (its
    # hbmUtilPercent); NVLink: the rate over payload intensity x 900 GB/s.
    assert got["compute"] == pytest.approx(rate / 2500 * 100)
    assert got["hbm"] == pytest.approx(case["hbmUtilPercent"])
    assert got["nvlink"] == pytest.approx(
        rate / (case["forwardFlopsPerLogicalPayloadByteRank0"] * 900 / 1000) * 100)


def test_case_phase_chart_shows_quantize_and_the_backward_phases() -> None:
    from app.figures.case_charts import case_phases_spec

    case = {"id": "t", "precision": "bf16", "forwardMS": 3.0, "backwardMS": 5.0,
            "phaseMS": {"dispatch": 0.5, "experts": 1.5, "combine": 0.25, "quantize": 0.125},
            "backwardPhaseMS": {"combine": 0.75, "experts": 3.0, "dispatch": 0.5}}
    (bar,) = case_phases_spec(view(case))["data"]
    assert list(bar["x"]) == ["quantize", "dispatch", "experts", "combine", "layer (forward)",
                              "bwd combine", "bwd experts", "bwd dispatch", "layer (bwd)"]
    assert list(bar["y"]) == [0.125, 0.5, 1.5, 0.25, 3.0, 0.75, 3.0, 0.5, 5.0]


def test_case_phase_chart_puts_the_in_layer_view_beside_each_phase_alone() -> None:
    from app.figures.case_charts import case_phases_spec

    case = {"id": "t", "precision": "mxfp8", "forwardMS": 2.0,
            "phaseMS": {"dispatch": 0.5, "experts": 1.5, "combine": 0.75},
            "inLayerPhaseMS": {"combine": 0.25, "dispatch": 0.375, "experts": 1.25}}
    spec = case_phases_spec(view(case))
    inside, alone = spec["data"]
    assert (inside["name"], alone["name"]) == ("inside the layer", "each phase alone")
    assert list(inside["x"]) == ["dispatch", "experts", "combine"]
    assert list(inside["y"]) == [0.375, 1.25, 0.25]
    assert list(alone["y"]) == [0.5, 1.5, 0.75, 2.0]
    assert spec["layout"]["barmode"] == "group"
    assert inside["marker"]["pattern"]["shape"] == "/"


def test_case_charts_draw_no_phase_bar_without_phases_and_fit_the_windows() -> None:
    case = {"id": "c", "mode": "inference", "precision": "bf16", "receiveRows": [4, 4],
            "windows": {"combined": [2.00, 2.13, 2.06]}}
    specs = figures.case_specs(view(case))
    assert "phases" not in specs
    # 6.5 % between the windows must show: the axis is not forced to start at 0.
    assert specs["windows"]["layout"]["yaxis"]["rangemode"] == "normal"
    layout = figures.to_figure(specs["windows"]).layout
    assert layout.yaxis.rangemode == "normal"
    phased = {**case, "phaseMS": {"dispatch": 0.1, "experts": 0.5, "combine": 0.1},
              "forwardMS": 0.8}
    assert "phases" in figures.case_specs(view(phased))


def test_scatter_points_carry_the_number_of_their_case_in_view(
    built: dict[str, go.Figure], cases: list[dict[str, Any]]
) -> None:
    # Printed, nothing hovers: each point of the roofline, intensity and scaling charts
    # carries its case's place in the view (1-based), the key the page and export print.
    place = {c["id"]: str(i + 1) for i, c in enumerate(cases)}
    for key in ("roofline", "intensity", "scaling"):
        labelled = 0
        for trace in built[key].data:
            if trace.customdata is None or trace.type != "scatter":
                continue
            assert "text" in trace.mode
            for custom, number in zip(trace.customdata, trace.text, strict=True):
                if custom[0] is None:  # a gap between two scaling lines
                    assert number == ""
                    continue
                assert number == place[custom[0].split(" · ")[0]]
                labelled += 1
        assert labelled >= len(cases) // 2, key
    panels = chart_panels.chart_panels({}, views(cases), {})
    keys = {p.key: p.point_key for p in panels}
    assert keys["roofline"] == keys["scaling"] == tuple(
        (i + 1, c["id"]) for i, c in enumerate(cases))
    assert keys["throughput"] == ()


def test_every_precision_and_pipeline_has_a_valid_distinct_marker_open_or_filled() -> None:
    from app.figures.style import marker

    precisions = ("bf16", "mxfp8", "nvfp4", "fp8", "int4-made-up")
    pipelines = ("standard", "staged", "mega", "pipeline-made-up")
    for precision in precisions:
        for open_ in (False, True):
            symbols = {}
            for pipeline in pipelines:
                style = marker((precision, pipeline), open_=open_)
                # plotly raises on a symbol name it does not know.
                built = go.Scatter(x=[1], y=[1], mode="markers", marker=style)
                assert built.marker.symbol == style["symbol"]
                assert style["symbol"].endswith(("-open", "-open-dot")) == open_
                symbols[pipeline] = style["symbol"]
            known = [symbols[p] for p in pipelines[:3]]
            assert len(set(known)) == 3, (precision, open_, symbols)
            assert symbols["pipeline-made-up"] not in known
    # No known precision's symbol is another's: a pipeline's mark never turns one shape
    # into another precision's.
    every = [{marker((p, q))["symbol"] for q in pipelines} for p in precisions[:4]]
    assert all(not a & b for i, a in enumerate(every) for b in every[i + 1:])
    with pytest.raises(ValueError):  # the check above can fail: plotly refuses a bad name
        go.Scatter(marker={"symbol": "circle-dot-open"})


def test_case_phase_chart_puts_the_in_layer_backward_beside_the_backward_alone() -> None:
    from app.figures.case_charts import case_phases_spec

    case = {"id": "t", "precision": "bf16", "forwardMS": 2.0, "backwardMS": 4.0,
            "phaseMS": {"dispatch": 0.5, "experts": 1.5, "combine": 0.75},
            "backwardPhaseMS": {"combine": 0.75, "experts": 2.5, "dispatch": 0.5},
            "inLayerPhaseMS": {"combine": 0.25, "dispatch": 0.375, "experts": 1.25},
            "inLayerBackwardPhaseMS": {"dispatch": 0.25, "combine": 0.5, "experts": 3.0}}
    inside, alone = case_phases_spec(view(case))["data"]
    assert list(inside["x"]) == ["dispatch", "experts", "combine",
                                 "bwd combine", "bwd experts", "bwd dispatch"]
    assert list(inside["y"]) == [0.375, 1.25, 0.25, 0.5, 3.0, 0.25]
    # Each in-layer bar shares its x with the bar of the same phase timed alone.
    assert set(inside["x"]) <= set(alone["x"])
