"""``moescope run`` end to end: two gloo ranks on the CPU, a tiny matrix, a live server.

One run (spawning ranks costs seconds) covers both modes, the three precisions (emulated),
the three pipelines and imbalance 1 and 1.5; the tests below read what it produced.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from live import REPO, ServerProcess
from runner_helpers import run_posted

from ingest.derived import derive
from ingest.schema import Case
from ingest.validate import validate_report
from runner.execute import ERROR_BOUNDS
from runner.routing import build_plan
from runner.spec import CaseSpec, Shape

pytestmark = pytest.mark.live

SHAPE = Shape(T=32, D=64, E=4, K=2)
# (mode, precision, pipeline, imbalance): every value of each axis, in both modes.
CASES = [
    ("inference", "bf16", "standard", 1.5),
    ("inference", "mxfp8", "staged", 1.0),
    ("inference", "nvfp4", "mega", 1.5),
    ("inference", "mxfp8", "standard", 1.0),
    ("training", "bf16", "staged", 1.0),
    ("training", "mxfp8", "mega", 1.5),
    ("training", "nvfp4", "standard", 1.5),
    ("training", "bf16", "mega", 1.0),
]
SKIPPED = "inference-ep4-bf16-standard-tiny-F64-i1"


def matrix_text() -> str:
    lines = ["seed = 3", "[shape]", f"T = {SHAPE.T}", f"D = {SHAPE.D}", f"E = {SHAPE.E}",
             f"K = {SHAPE.K}", "[timing]", "windows = 3", "iterations = 1", "warmup = 1",
             "warmup_ms = 0"]
    cases = [*[(m, p, pipe, i, 2) for m, p, pipe, i in CASES],
             ("inference", "bf16", "standard", 1.0, 4)]
    for mode, precision, pipeline, imbalance, ep in cases:
        lines += ["[[case]]", f'mode = "{mode}"', f"ep = {ep}", f'precision = "{precision}"',
                  f'pipeline = "{pipeline}"', "F = 64", f"imbalance = {imbalance}",
                  'category = "tiny"']
    return "\n".join(lines) + "\n"


@dataclass
class Run:
    result: subprocess.CompletedProcess[str]
    report: dict[str, Any]
    served: dict[str, Any]
    spool: Path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory,
        runner_server: tuple[ServerProcess, str]) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("run")
    posted = run_posted(runner_server, tmp, matrix_text(), timeout=240)
    yield Run(posted.result, posted.out, posted.served, tmp / "spool")


def test_every_case_ran_and_validates(run: Run) -> None:
    validate_report(run.report)
    ids = [c["id"] for c in run.report["cases"]]
    assert ids == [CaseSpec(m, 2, p, pipe, "tiny", 64, i).id for m, p, pipe, i in CASES]
    for line_id in ids:
        assert line_id in run.result.stdout  # a progress line per case


def test_the_server_holds_exactly_what_was_written(run: Run) -> None:
    assert run.served == run.report
    assert not run.spool.exists() or list(run.spool.iterdir()) == []


def test_numerics_within_bounds(run: Run) -> None:
    for case in run.report["cases"]:
        bound = ERROR_BOUNDS[case["precision"]]
        assert case["numericalAccepted"] is True, case["id"]
        assert 0 <= case["numericalRelativeError"] <= bound
        assert case["numericalBound"] == bound
        if case["precision"] == "bf16":
            assert case["numericalRelativeError"] < 2e-2
        else:  # a quantized layer cannot match float32 as closely as bf16 does
            assert case["numericalRelativeError"] > 1e-2
            assert case["emulated"] is True


# Bytes per weight element (docs/metrics.md): bf16 2, mxfp8 1 + an e8m0 scale per 32, nvfp4 half
# + an e4m3 scale per 16.
WEIGHT_BYTES = {"bf16": Fraction(2), "mxfp8": Fraction(33, 32), "nvfp4": Fraction(9, 16)}


def test_routing_follows_the_imbalance(run: Run) -> None:
    # Rank 0 receives imbalance x TK of the EP*TK = 128 routed rows; the rest go to rank 1.
    tk = SHAPE.T * SHAPE.K
    for case in run.report["cases"]:
        rank0 = int(case["imbalance"] * tk)
        assert case["receiveRows"] == [rank0, 2 * tk - rank0], case["id"]
        rows_off_rank0 = case["logicalForwardPayloadBytesRank0"] / (2 * SHAPE.D * 2)
        assert rows_off_rank0 == int(rows_off_rank0) and 0 < rows_off_rank0 < tk


def saved_by_hand(rows: int, *, d: int, f: int, experts: int, b: Fraction,
                  quantized: bool) -> int:
    """A rank's saved activations: bf16 keeps TK*2D + rows*(2D + 4F) (docs/metrics.md); a
    quantized precision keeps its rows padded per expert to 128 (a rank's rows split
    evenly over its experts), the dispatched rows and the SwiGLU output at b bytes, gate
    and up in bf16 (model.py's docstring)."""
    tk = SHAPE.T * SHAPE.K
    if not quantized:
        return tk * 2 * d + rows * (2 * d + 4 * f)
    groups = [rows // experts + (i < rows % experts) for i in range(experts)]
    padded = sum(math.ceil(g / 128) * 128 for g in groups)
    return int(tk * 2 * d + padded * (d * b + 4 * f + f * b))


def test_figures_follow_designs_formulas(run: Run) -> None:
    """Each derived figure worked out here from T, D, E, K, F and EP by docs/metrics.md's
    formulas ("The analytical model"), with the rows the ranks reported receiving."""
    t, d, e, k = SHAPE.T, SHAPE.D, SHAPE.E, SHAPE.K
    tk = t * k
    for case in run.report["cases"]:
        f, ep, training = case["F"], case["ep"], case["mode"] == "training"
        el, passes, b = e // ep, 3 if training else 1, WEIGHT_BYTES[case["precision"]]
        quantized = case["precision"] != "bf16"
        seconds = case["layerMS"] * 1e-3

        flops = 6 * tk * d * f * passes
        assert case["usefulTFPerGPU"] == pytest.approx(flops / seconds / 1e12), case["id"]
        active_ranks = sum(rows > 0 for rows in case["receiveRows"])
        forward_bytes = (t * d * 2 + tk * (2 * d + 4 * f) + Fraction(el * active_ranks, ep)
                         * 3 * d * f * b + tk * 4)
        assert case["analyticalHBMGBps"] == pytest.approx(
            float(forward_bytes * passes) / seconds / 1e9), case["id"]

        cap = 128 * (math.ceil(8 * tk / 128) + el - 1) if quantized else 8 * tk
        assert case["capacityRows"] == cap, case["id"]
        assert case["inputBytes"] == t * d * 2

        # bf16 scratch widths over the capacity rows; a quantized staged or mega dispatch
        # adds its wire rows (D elements at b bytes, and a 4-byte tensor scale).
        per_row = 4 * d + 10 * f if training else 2 * d + 6 * f
        if quantized and case["pipeline"] != "standard":
            per_row += int(d * b) + 4
        assert case["scratchBytes"] == cap * per_row, case["id"]

        if training:
            assert case["savedBytes"] == [
                saved_by_hand(rows, d=d, f=f, experts=el, b=b, quantized=quantized)
                for rows in case["receiveRows"]], case["id"]
        else:
            assert case["savedBytes"] == []
        slot = max(case["savedBytes"], default=0)
        assert case["slotBytes"] == slot and case["arenaBytes"] == slot + cap * per_row
        payload = case["logicalForwardPayloadBytesRank0"]
        assert case["forwardFlopsPerLogicalPayloadByteRank0"] == pytest.approx(
            6 * tk * d * f / payload)


def test_every_wire_field_present_or_null_with_reason(run: Run) -> None:
    meta = run.report["meta"]
    for case in run.report["cases"]:
        missing = set(Case.model_fields) - set(case)
        assert not missing, (case["id"], missing)
        nulls = {k for k, v in case.items() if v is None}
        training = case["mode"] == "training"
        allowed = {"nvlinkTXGBps", "nvlinkRXGBps", "nvlinkMaxTXGBps", "nvlinkMaxRXGBps",
                   "allocatedPeakGiB", "reservedPeakGiB", "graphAccepted", "gpuState",
                   "failure", "phaseGraphs", "phaseGraphNote",  # no CUDA graphs on the CPU
                   "compileS", "compiledGraphs",  # nothing compiled on the CPU
                   "fp8Scaling"}  # not an fp8 case
        if not training:
            allowed |= {"backwardMS", "backwardPhaseMS", "backwardPhaseMeanMS",
                        "backwardPhaseSumMS", "backwardPhaseGapMS", "backwardPhaseGapPercent",
                        "inLayerBackwardPhaseMS", "inLayerBackwardPhaseSumMS",
                        "inLayerBackwardPhaseGapMS"}
        assert nulls <= allowed, (case["id"], nulls - allowed)
        assert set(case["windows"]) == ({"combined", "forward", "backward"} if training
                                        else {"combined", "forward"})
        assert all(len(w) == 3 for w in case["windows"].values())
    assert "NVLink not measured" in meta["bandwidthNote"]
    assert "No allocator peaks on the CPU" in meta["memoryNote"]
    assert "graphAccepted is null" in meta["graphNote"]
    assert "wall clock" in meta["timingNote"]
    assert "no L2 flush on the CPU" in meta["timingNote"]
    assert "null where the layer ran uncompiled" in meta["timingNote"]


def test_every_case_has_positive_phase_times_and_bandwidths(run: Run) -> None:
    for case in run.report["cases"]:
        quantized = case["pipeline"] != "standard" and case["precision"] != "bf16"
        phases = case["phaseMS"]
        assert set(phases) == {*(["quantize"] if quantized else []), "dispatch", "experts",
                               "combine"}, case["id"]
        assert all(ms > 0 for ms in phases.values()), (case["id"], phases)
        assert set(case["phaseMeanMS"]) == set(phases)
        assert all(ms > 0 for ms in case["phaseMeanMS"].values())
        # The rows each rank received, split by hand from the routing: a rank's own rows
        # (sends[r][r]) stay; the rest crossed. Dispatch rows are the wire rows (bf16 2
        # bytes an element; mxfp8 1 + an e8m0 scale per 32; nvfp4 half + an e4m3 scale
        # per 16 + the fp32 tensor scale), the combine's bf16 rows (every rank gets its
        # T*K back).
        d = SHAPE.D
        wire = {"bf16": 2 * d, "mxfp8": d + d // 32, "nvfp4": d // 2 + d // 16 + 4}
        row = wire[case["precision"]] if quantized or case["pipeline"] != "standard" else 2 * d
        spec = CaseSpec(case["mode"], case["ep"], case["precision"], case["pipeline"],
                        case["category"], case["F"], case["imbalance"])
        sends = build_plan(SHAPE, spec, 3).sends
        own = [sends[r][r] for r in range(case["ep"])]
        received = case["receiveRows"]
        assert case["dispatchLocalBytes"] == [n * row for n in own]
        assert case["dispatchRemoteBytes"] == [(received[r] - own[r]) * row
                                               for r in range(case["ep"])]
        back = SHAPE.T * SHAPE.K
        assert case["combineLocalBytes"] == [n * 2 * d for n in own]
        assert case["combineRemoteBytes"] == [(back - n) * 2 * d for n in own]
        # Sent both ways: a rank sends its T*K rows less its own in the dispatch, and
        # sends back what it received less its own in the combine.
        assert case["dispatchSentRemoteBytes"] == [(back - n) * row for n in own]
        assert case["combineSentRemoteBytes"] == [(received[r] - own[r]) * 2 * d
                                                  for r in range(case["ep"])]
        # GB/s from the busiest rank's remote max(TX, RX) over the phase's time.
        rank_bytes = [max(received[r] - own[r], back - own[r]) for r in range(case["ep"])]
        hot = max(range(case["ep"]), key=lambda r: rank_bytes[r])
        assert case["dispatchBusiestRank"] == hot == case["combineBusiestRank"]
        assert case["dispatchGBps"] == pytest.approx(rank_bytes[hot] * row
                                                     / phases["dispatch"] / 1e6)
        assert case["combineGBps"] == pytest.approx(rank_bytes[hot] * 2 * d
                                                    / phases["combine"] / 1e6)
        # The first view: the same phases inside the layer's own step (the CPU's wall
        # clock), their sum against the layer's forward.
        inside = case["inLayerPhaseMS"]
        assert set(inside) == {"dispatch", "experts", "combine"}, case["id"]
        assert all(ms > 0 for ms in inside.values())
        assert case["inLayerPhaseSumMS"] == pytest.approx(sum(inside.values()))
        assert case["inLayerPhaseGapMS"] == pytest.approx(
            case["forwardMS"] - sum(inside.values()))
        assert case["inLayerPhaseNote"].startswith("wall clock around each phase")
        assert (case["dispatchMode"], case["dispatchDedup"]) == ("static", False)
        # The phases' sum against the layer's forward, and the backward's in training.
        total = sum(phases.values())
        assert case["phaseSumMS"] == pytest.approx(total)
        assert case["phaseGapMS"] == pytest.approx(case["forwardMS"] - total)
        assert case["phaseGapPercent"] == pytest.approx(
            (case["forwardMS"] - total) / case["forwardMS"] * 100)
        assert f"{case['phaseGapMS']:+.4g} ms" in case["phaseNote"]
        if case["mode"] == "training":
            back_phases = case["backwardPhaseMS"]
            assert set(back_phases) == {"combine", "experts", "dispatch"}
            assert all(ms > 0 for ms in back_phases.values())
            back_total = sum(back_phases.values())
            assert case["backwardPhaseGapMS"] == pytest.approx(case["backwardMS"] - back_total)
            assert f"{case['backwardPhaseGapMS']:+.4g} ms" in case["phaseNote"]
        else:
            assert case["backwardPhaseMS"] is None
        assert case["phaseGraphs"] is None  # no CUDA graphs on the CPU
        # No NVML on the CPU: null, with the reason.
        assert case["gpuState"] is None and "no GPU" in case["gpuStateReason"], case["id"]
    meta = run.report["meta"]
    assert "each phase timed on its own" in meta["phaseNote"]
    assert "timed inside the layer's own step" in meta["phaseNote"]
    assert "remote max(TX, RX)" in meta["bandwidthNote"]
    assert "null on the CPU" in meta["gpuStateNote"]


def test_skipped_case_is_in_the_notes(run: Run) -> None:
    note = run.report["meta"]["skippedNote"]
    assert SKIPPED in note and "needs 4 ranks, 2 available" in note
    assert f"skip {SKIPPED}" in run.result.stderr
    assert "mega: the whole layer through torch.compile on CUDA (eager on the CPU)" in (
        run.report["meta"]["pipelineNote"])


def one_case_matrix(tmp: Path, ep: int) -> Path:
    matrix = tmp / "one.toml"
    matrix.write_text(
        "[shape]\nT = 8\nD = 32\nE = 2\nK = 1\n[timing]\nwindows = 1\niterations = 1\n"
        f"warmup = 0\nwarmup_ms = 0\n[matrix]\nmode = 'inference'\nep = {ep}\nprecision = 'bf16'\n"
        "pipeline = 'standard'\nF = 32\nimbalance = 1\ncategory = 'one'\n")
    return matrix


def test_nproc_below_one_is_an_error(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from runner.commands import run_command

    code = run_command(one_case_matrix(tmp_path, 1), nproc=0, url=None, token=None,
                       out=tmp_path / "r.json", spool_dir=tmp_path / "spool")
    assert code == 2
    assert capsys.readouterr().err == "error: --nproc must be at least 1, got 0\n"
    assert not (tmp_path / "r.json").exists()


def test_a_run_where_every_case_is_skipped_fails(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    ran = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--matrix", str(one_case_matrix(tmp_path, 2)),
         "--nproc", "1", "--out", str(out)], capture_output=True, text=True, cwd=REPO,
        timeout=120)
    assert ran.returncode == 1, ran.stderr
    assert "error: no case ran" in ran.stderr
    report = json.loads(out.read_text())
    assert report["cases"] == [] and "needs 2 ranks, 1 available" in report["meta"]["skippedNote"]


def test_ctrl_c_says_where_the_finished_cases_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from runner import launch
    from runner.matrix import load_matrix
    from runner.reporter import RunOptions

    def interrupted(opts: RunOptions, nproc: int | None) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "launch", interrupted)
    opts = RunOptions(load_matrix(one_case_matrix(tmp_path, 1)), "http://x", None,
                      tmp_path / "r.json", tmp_path / "spool")
    assert launch.run_safely(opts, 1) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted: the case in flight is lost")
    assert f"in {tmp_path / 'r.json'} and in the spool {tmp_path / 'spool'}" in err
    assert "moescope runner flush" in err


def test_no_room_for_the_report_stops_every_rank_with_the_reason(tmp_path: Path) -> None:
    """Rank 0 cannot keep the report (spool full, service down): both ranks stop before
    any case, and the error is rank 0's reason, not its peer's lost connection."""
    from conftest import free_port

    spool = tmp_path / "spool"
    (spool / "rejected").mkdir(parents=True)
    (spool / "rejected" / "old.json").write_bytes(b"x" * 200_000)
    ran = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--matrix", str(one_case_matrix(tmp_path, 1)),
         "--nproc", "2", "--url", f"http://127.0.0.1:{free_port()}", "--deadline", "0",
         "--spool", str(spool), "--out", str(tmp_path / "r.json")],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**os.environ, "MOESCOPE_SPOOL_MAX_MB": "0.1"})
    assert ran.returncode == 1, ran.stderr
    assert "is full" in ran.stderr and "did not take it either" in ran.stderr
    assert "no case ran" in ran.stderr and "Traceback" not in ran.stderr


def test_every_case_names_its_expert_kernel_tails_and_set_up(run: Run) -> None:
    import numpy as np
    import torch

    meta = run.report["meta"]
    # torch 2.13's CPU _grouped_mm passes the probe, so every case's experts ran grouped
    # (the CPU has no native scaled GEMM; mega runs eagerly on the CPU).
    assert meta["host"]["groupedMM"] is True and meta["host"]["groupedMMReason"] is None
    assert f"torch {torch.__version__}" in meta["expertNote"]  # read at run time
    assert "torch._grouped_mm" in meta["expertNote"]
    for case in run.report["cases"]:
        assert case["expertKernel"] == "grouped_mm", case["id"]
        # One iteration a window: each window is its iteration, so the tails are numpy's
        # percentiles of the windows.
        assert set(case["iterationMS"]) == set(case["windows"]), case["id"]
        for kind, windows in case["windows"].items():
            want = np.percentile(np.array(windows), [50, 90, 99])
            got = case["iterationMS"][kind]
            assert [got["p50"], got["p90"], got["p99"]] == pytest.approx(list(want)), kind
        assert 0 < case["setupS"] < case["wallS"], case["id"]


def test_ceilings_were_measured_before_the_cases(run: Run) -> None:
    meta = run.report["meta"]
    ceilings = meta["measuredCeilings"]
    assert ceilings["denseTF"]["bf16"] > 0 and len(ceilings["denseTFPerGPU"]["bf16"]) == 2
    assert ceilings["denseTF"]["bf16"] == min(ceilings["denseTFPerGPU"]["bf16"])
    assert set(ceilings["unmeasured"]) == {"mxfp8", "nvfp4"}  # emulated on the CPU
    # Every case's grouped shape, by hand: its local experts, the busiest rank's rows per
    # expert rounded up (standard: as they are; staged: over min(4, T) token stages, each
    # stage's share padded to 128 rows; mega: padded), and % of that ceiling derived at
    # ingest.
    report = validate_report(run.report)
    for raw, case in zip(run.report["cases"], report.cases, strict=True):
        experts = SHAPE.E // raw["ep"]
        rows = math.ceil(max(raw["receiveRows"]) / experts)
        stages = min(4, SHAPE.T) if raw["pipeline"] == "staged" else 1
        per_stage = math.ceil(max(raw["receiveRows"]) / stages)
        active = min(experts, per_stage)
        gemm = math.ceil(per_stage / active)
        if raw["pipeline"] != "standard":
            gemm = 128 * math.ceil(gemm / 128)
        (entry,) = [g for g in ceilings["grouped"]
                    if (g["precision"], g["experts"], g["rowsPerExpert"], g["F"],
                        g["pipeline"], g["mode"]) == (raw["precision"], experts, rows,
                                                      raw["F"], raw["pipeline"], raw["mode"])]
        assert (entry["gemmExperts"], entry["gemmRowsPerExpert"], entry["stages"]) == (
            active, gemm, stages)
        assert entry["emulated"] is (raw["precision"] != "bf16")
        assert entry["tf"] == min(entry["tfPerGPU"])
        # The busiest rank's useful rate (the mean's x max/mean rows) over the ceiling at its
        # rows; an emulated precision is measured against none.
        rows_in = raw["receiveRows"]
        hot = max(rows_in) / (sum(rows_in) / len(rows_in))
        expected = None if raw.get("emulated") else pytest.approx(
            raw["usefulTFPerGPU"] * hot / entry["tf"] * 100)
        assert derive(report.meta, case).percentOfMeasuredCeiling == expected
    # nccl-tests' arithmetic: algbw = each rank's buffer / time, busbw = algbw (n-1)/n.
    (a2a,) = ceilings["allToAll"]
    # At the cases' message sizes (each rank's send buffer, T K / stages rows): bf16 rows
    # of 2D = 128 B, 64 of them (2048 B per staged stage of 16); staged mxfp8's wire rows
    # of D + D/32 = 66 B (16: 1056), mega's (64: 4224); nvfp4 mega's D/2 + D/16 + 4 = 40 B
    # (64: 2560).
    assert a2a["ep"] == 2
    assert [s["bytes"] for s in a2a["sizes"]] == [1056, 2048, 2560, 4224, 8192]
    for size in a2a["sizes"]:
        assert size["algbwGBps"] == pytest.approx(size["bytes"] / size["ms"] / 1e6)
        assert size["busbwGBps"] == pytest.approx(size["algbwGBps"] / 2)
    assert a2a["busbwGBps"] == max(s["busbwGBps"] for s in a2a["sizes"])
    assert "mean nothing for GPUs" in meta["measuredCeilingNote"]
