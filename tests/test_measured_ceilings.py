"""Measured ceilings: ``runner.ceilings.merge`` (the slowest GPU's figure), the shapes a
matrix needs, ``ingest.derived``'s % of measured ceiling (stored, served by the API), and
the datasheet's Hopper peaks (no MX formats), each against arithmetic written here."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from api_helpers import REPORTS
from fastapi.testclient import TestClient

from ingest.derived import caveats, derive
from ingest.schema import Case, Meta
from runner.ceilings import a2a_sizes, merge, message_bytes
from runner.gemm_ceilings import GroupedShape, bf16_gemm_set, grouped_shapes, with_backward
from runner.matrix import parse_matrix
from runner.platform import datasheet_peaks
from runner.routing import build_plan

Auth = Callable[[str], dict[str, str]]
Body = dict[str, Any]


def _gpu(bf16: float, grouped: float) -> dict[str, Any]:
    return {"dense": {"bf16": bf16}, "denseN": 256, "unmeasured": {"mxfp8": "emulated"},
            "grouped": [{"precision": "bf16", "experts": 2, "rowsPerExpert": 24, "D": 64,
                         "F": 64, "pipeline": "staged", "gemmExperts": 2,
                         "gemmRowsPerExpert": 128, "stages": 4, "tf": grouped,
                         # 47 useful rows in 4 GEMMs of 2 x 128
                         "gemmTF": grouped * 2 * 128 * 4 / 47,
                         "kernel": "torch.matmul per expert", "emulated": False}]}


def test_merge_takes_the_slowest_gpu_and_keeps_each() -> None:
    a2a = [{"ep": 2, "sizes": [{"bytes": 1024, "ms": 0.5, "algbwGBps": 0.002048,
                                "busbwGBps": 0.001024}], "busbwGBps": 0.001024}]
    merged = merge([_gpu(10.0, 4.0), _gpu(8.0, 5.0)], a2a)
    assert merged["denseTF"] == {"bf16": 8.0}
    assert merged["denseTFPerGPU"] == {"bf16": [10.0, 8.0]}
    assert merged["grouped"][0]["tf"] == 4.0 and merged["grouped"][0]["tfPerGPU"] == [4.0, 5.0]
    # The padded rate of the slowest GPU: 4 GEMMs of 2 x 128 rows for 47 useful ones.
    assert merged["grouped"][0]["gemmTF"] == pytest.approx(4.0 * 2 * 128 * 4 / 47)
    assert merged["allToAll"] == a2a and merged["unmeasured"] == {"mxfp8": "emulated"}


def test_a_gpu_that_could_not_measure_a_shape_is_left_out_of_its_ceiling() -> None:
    failed = {**_gpu(9.0, 0.0), "grouped": [],
              "unmeasured": {"mxfp8": "emulated", "grouped bf16 E2 rows 24 F64": "OOM"}}
    merged = merge([_gpu(10.0, 4.0), failed], [])
    assert merged["grouped"][0]["tf"] == 4.0 and merged["grouped"][0]["tfPerGPU"] == [4.0]
    assert merged["denseTFPerGPU"] == {"bf16": [10.0, 9.0]}
    assert merged["unmeasured"] == {"mxfp8": "emulated",
                                    "grouped bf16 E2 rows 24 F64": "rank 1: OOM"}


def test_grouped_shapes_use_the_rows_each_pipeline_runs() -> None:
    """The busiest rank's rows, as the pipeline runs its GEMMs: standard over its 2 local
    experts as they are, mega padded to 128-row groups, staged split over its 4 token
    stages (T = 32) with each stage's share padded; and a decode-like shape where a stage
    has fewer rows than experts: the experts without rows are empty groups, not padded."""
    matrix = parse_matrix({
        "seed": 1, "shape": {"T": 32, "D": 64, "E": 4, "K": 2},
        "case": [{"mode": m, "ep": 2, "precision": p, "pipeline": pipe,
                  "F": 64, "imbalance": i, "category": "c"}
                 for m, p, i, pipe in (("inference", "bf16", 1.0, "standard"),
                                       ("inference", "bf16", 1.5, "standard"),
                                       ("inference", "mxfp8", 1.0, "standard"),
                                       ("inference", "bf16", 1.0, "staged"),
                                       ("inference", "mxfp8", 1.5, "mega"),
                                       ("training", "bf16", 1.0, "standard"))]})
    shapes = grouped_shapes(matrix, list(matrix.cases))
    want = []
    for spec in matrix.cases:
        busiest = max(build_plan(matrix.shape, spec, 1).receive)
        assert busiest >= 4 * 2  # every stage has rows for both experts
        experts, gemm, stages = {
            "standard": (2, math.ceil(busiest / 2), 1),
            "mega": (2, 128 * math.ceil(busiest / 2 / 128), 1),
            "staged": (2, 128 * math.ceil(math.ceil(busiest / 4) / 2 / 128), 4)}[
                spec.pipeline]
        shape = GroupedShape(spec.precision, 2, math.ceil(busiest / 2), 64, 64, spec.pipeline,
                             busiest, experts, gemm, stages, spec.training)
        if shape not in want:
            want.append(shape)
    # training's GEMM set is its own: forward and backward, 3x the forward's FLOPs
    assert shapes == want and len(shapes) == 6
    training = shapes[5]
    assert training.training and training.flops == 3 * 6 * training.busiest * 64 * 64
    staged = shapes[3]
    assert (staged.gemm_rows, staged.stages) == (128, 4) and staged.busiest < 128
    assert staged.flops == 6 * staged.busiest * 64 * 64
    assert staged.gemm_flops == 6 * 2 * 128 * 4 * 64 * 64

    # 16 tokens x top-1 over 32 experts on one rank: 4 rows a stage, so 4 experts of one
    # row each (padded to 128) in each of 4 GEMMs; standard: 16 experts of one row.
    decode = parse_matrix({
        "seed": 1, "shape": {"T": 16, "D": 32, "E": 32, "K": 1},
        "case": [{"mode": "inference", "ep": 1, "precision": "bf16", "pipeline": pipe,
                  "F": 32, "imbalance": 1, "category": "c"} for pipe in ("standard", "staged")]})
    standard, staged = grouped_shapes(decode, list(decode.cases))
    assert (standard.gemm_experts, standard.gemm_rows, standard.stages) == (16, 1, 1)
    assert (staged.gemm_experts, staged.gemm_rows, staged.stages) == (4, 128, 4)
    assert standard.rows == staged.rows == 1 and standard.busiest == 16


def _with_ceiling(reference: Body, tf: float) -> tuple[Body, Body]:
    body = copy.deepcopy(reference)
    meta, case = body["meta"], body["cases"][0]
    experts = meta["shape"]["E"] // case["ep"]
    rows = -(-max(case["receiveRows"]) // experts)
    meta["measuredCeilings"] = {
        "denseTF": {"bf16": 2 * tf}, "grouped": [
            # another pipeline's GEMMs (padded): not this case's
            {"precision": case["precision"], "experts": experts, "rowsPerExpert": rows,
             "D": meta["shape"]["D"], "F": case["F"], "tf": tf / 3, "kernel": "k",
             "pipeline": "other"},
            {"precision": case["precision"], "experts": experts, "rowsPerExpert": rows,
             "D": meta["shape"]["D"], "F": case["F"], "tf": tf, "kernel": "k",
             "pipeline": case["pipeline"]},
            # another shape: not this case's
            {"precision": case["precision"], "experts": experts, "rowsPerExpert": rows + 1,
             "D": meta["shape"]["D"], "F": case["F"], "tf": tf / 2, "kernel": "k"}]}
    return body, case


def test_percent_of_measured_ceiling_is_derived_from_the_case_shape(reference: Body) -> None:
    body, case = _with_ceiling(reference, 1234.5)
    meta = Meta.model_validate(body["meta"])
    got = derive(meta, Case.model_validate(case)).percentOfMeasuredCeiling
    assert got == pytest.approx(case["usefulTFPerGPU"] / 1234.5 * 100, rel=1e-12)
    # Another F: no ceiling measured at its shape.
    other = Case.model_validate({**case, "F": case["F"] * 2})
    assert derive(meta, other).percentOfMeasuredCeiling is None
    # A report without ceilings: none.
    assert derive(Meta.model_validate(reference["meta"]),
                  Case.model_validate(case)).percentOfMeasuredCeiling is None


def test_percent_of_measured_ceiling_is_stored_and_served(
        client: TestClient, auth: Auth, reference: Body) -> None:
    body, case = _with_ceiling(reference, 1234.5)
    posted = client.post(REPORTS, json=body, headers=auth("ingest"))
    assert posted.status_code == 201, posted.text
    items = client.get(f"{REPORTS}/{posted.json()['id']}/cases").json()["items"]
    assert items[0]["percentOfMeasuredCeiling"] == pytest.approx(
        case["usefulTFPerGPU"] / 1234.5 * 100, rel=1e-12)
    # Sortable: the one case with a ceiling comes first, the unmeasured after it.
    ordered = client.get(f"{REPORTS}/{posted.json()['id']}/cases",
                         params={"sort": "percentOfMeasuredCeiling", "order": "desc"})
    assert ordered.status_code == 200, ordered.text
    assert ordered.json()["items"][0]["id"] == case["id"]


def test_a_ceiling_must_be_positive(reference: Body) -> None:
    body, _ = _with_ceiling(reference, 0.0)
    with pytest.raises(ValueError, match="tf"):
        Meta.model_validate(body["meta"])


@pytest.mark.parametrize("name", ["NVIDIA H100 80GB HBM3", "NVIDIA H200"])
def test_hopper_has_no_mx_peaks_and_says_why(name: str) -> None:
    peaks = datasheet_peaks(name)
    assert peaks is not None and peaks.tf == {"bf16": 989, "fp8": 1979}  # dense FP8
    assert "no MX formats" in peaks.absent["mxfp8"] and "emulated" in peaks.absent["nvfp4"]
    blackwell = datasheet_peaks("NVIDIA B200")
    assert blackwell is not None and {"mxfp8", "nvfp4"} <= set(blackwell.tf)


def test_percent_of_measured_ceiling_is_the_busiest_ranks(reference: Body) -> None:
    """Under imbalance the ceiling is measured at the busiest rank's rows, so the rate set
    against it is that rank's: the mean rank's useful rate x max/mean received rows."""
    body = copy.deepcopy(reference)
    body["cases"] = [c for c in body["cases"] if c["imbalance"] == 4 and c["ep"] == 8][:1]
    body, case = _with_ceiling(body, 100.0)
    rows = case["receiveRows"]
    hot = max(rows) / (sum(rows) / len(rows))
    assert hot > 2  # the routing plan's i = 4 at EP 8
    meta = Meta.model_validate(body["meta"])
    derived = derive(meta, Case.model_validate(case))
    assert derived.percentOfMeasuredCeiling == pytest.approx(
        case["usefulTFPerGPU"] * hot / 100.0 * 100, rel=1e-12)
    codes = [c.code for c in caveats(meta, Case.model_validate(case))]
    assert ("above_ceiling" in codes) == (case["usefulTFPerGPU"] * hot > 100.0)
    # An emulated precision is measured against no ceiling.
    emulated = Case.model_validate({**case, "emulated": True})
    assert derive(meta, emulated).percentOfMeasuredCeiling is None
    assert "above_ceiling" not in [c.code for c in caveats(meta, emulated)]


def test_the_grouped_set_has_distinct_gate_and_up_weights() -> None:
    """gate, up and down of 2 experts (5 and 3 rows) against a matmul per expert: gate's
    and up's outputs are their own weights' (a set timing gate twice would keep one
    weight in L2)."""
    torch.manual_seed(0)
    x, h = torch.randn(8, 16), torch.randn(8, 32)
    gate, up, down = torch.randn(2, 16, 32), torch.randn(2, 16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([5, 8], dtype=torch.int32)
    for kernel in ("torch._grouped_mm", "torch.matmul per expert"):
        if kernel == "torch.matmul per expert":
            offs = torch.tensor([4, 8], dtype=torch.int32)  # the loop's even groups
        got = bf16_gemm_set(kernel, x.bfloat16(), h.bfloat16(),
                            (gate.bfloat16(), up.bfloat16(), down.bfloat16()), offs)
        ends = [0, *offs.tolist()]
        want = [torch.cat([a[ends[e]:ends[e + 1]] @ w[e] for e in range(2)])
                for a, w in ((x, gate), (x, up), (h, down))]
        if kernel == "torch.matmul per expert":  # one output per expert and GEMM
            got = [torch.cat(got[i::3]) for i in range(3)]
        for g, w in zip(got, want, strict=True):
            assert torch.allclose(g.float(), w, rtol=3e-2, atol=3e-1)


def test_all_to_all_is_measured_at_each_cases_message_size() -> None:
    """Each rank's send buffer in one collective, by hand (T = 32, K = 2, D = 128): standard
    64 bf16 rows of 256 B; staged fp8 4 stages of 16 rows, wire rows D + 4 D / 128 = 132 B
    and bf16 rows back; EP 1 sends nothing away (no all-to-all is measured for it)."""
    matrix = parse_matrix({
        "seed": 1, "shape": {"T": 32, "D": 128, "E": 4, "K": 2},
        "case": [{"mode": "inference", "ep": ep, "precision": p, "pipeline": pipe, "F": 128,
                  "imbalance": 1, "category": "c"}
                 for ep, p, pipe in ((2, "bf16", "standard"), (2, "fp8", "staged"),
                                     (4, "fp8", "standard"), (1, "bf16", "standard"))]})
    cases = list(matrix.cases)
    assert message_bytes(matrix.shape, cases[0]) == [64 * 256]
    assert message_bytes(matrix.shape, cases[1]) == [16 * 132, 16 * 256]
    assert a2a_sizes(matrix.shape, cases, 2) == [2112, 4096, 16384]
    assert a2a_sizes(matrix.shape, cases, 4) == [16384]  # standard: bf16 dispatch


def test_a_ceiling_is_taken_only_for_its_mode(reference: Body) -> None:
    """A training ceiling times forward and backward GEMMs: not an inference case's; an
    older runner's entry without a mode is taken for either."""
    body, case = _with_ceiling(reference, 1234.5)
    grouped = body["meta"]["measuredCeilings"]["grouped"]
    other = "training" if case["mode"] == "inference" else "inference"
    for entry in grouped:
        entry["mode"] = other
    meta = Meta.model_validate(body["meta"])
    assert derive(meta, Case.model_validate(case)).percentOfMeasuredCeiling is None
    grouped[1]["mode"] = case["mode"]
    meta = Meta.model_validate(body["meta"])
    assert derive(meta, Case.model_validate(case)).percentOfMeasuredCeiling == pytest.approx(
        case["usefulTFPerGPU"] / 1234.5 * 100, rel=1e-12)


def test_a_training_set_times_the_backward_gemms_too() -> None:
    """The training ceiling's set returns each input's and weight's gradient: against the
    transposed products written out here (output gradients of ones)."""
    torch.manual_seed(1)
    x, h = torch.randn(8, 16), torch.randn(8, 32)
    gate, up, down = torch.randn(2, 16, 32), torch.randn(2, 16, 32), torch.randn(2, 32, 16)
    offs = torch.tensor([5, 8], dtype=torch.int32)
    inputs = [t.bfloat16() for t in (x, h, gate, up, down)]

    def gemm_set(*t: torch.Tensor) -> list[torch.Tensor]:
        return bf16_gemm_set("torch._grouped_mm", t[0], t[1], (t[2], t[3], t[4]), offs)

    dx, dh, dgate, dup, ddown = with_backward(gemm_set, inputs)()
    parts = [(0, 5), (5, 8)]
    want_dx = torch.cat([torch.ones(b - a, 32) @ (gate[e] + up[e]).t()
                         for e, (a, b) in enumerate(parts)])
    want_dh = torch.cat([torch.ones(b - a, 16) @ down[e].t() for e, (a, b) in enumerate(parts)])
    want_dw = torch.stack([x[a:b].t() @ torch.ones(b - a, 32) for a, b in parts])
    want_ddown = torch.stack([h[a:b].t() @ torch.ones(b - a, 16) for a, b in parts])
    for got, want in ((dx, want_dx), (dh, want_dh), (dgate, want_dw), (dup, want_dw),
                      (ddown, want_ddown)):
        assert torch.allclose(got.float(), want, rtol=3e-2, atol=2e-1)
