"""The analytical model: values worked by hand, the reference report reproduced exactly."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from runner.model import (
    active_experts_mean,
    capacity_rows,
    largest_remainder,
    model_bytes,
    model_case,
    padded_rows,
    receive_rows,
    saved_bytes,
    send_matrix,
    zipf_exponent,
)
from runner.spec import CaseSpec, Shape, SpecError, check_spec

# T=4 tokens, D=8, E=4 experts, top-2: TK = 8 routed rows per rank.
TINY = Shape(T=4, D=8, E=4, K=2)


def spec(**overrides: Any) -> CaseSpec:
    values: dict[str, Any] = {"mode": "inference", "ep": 2, "precision": "bf16",
                              "pipeline": "standard", "category": "tiny", "F": 16,
                              "imbalance": 1.0}
    values.update(overrides)
    return CaseSpec(**values)


def test_ids_follow_the_reference() -> None:
    assert spec().id == "inference-ep2-bf16-standard-tiny-F16-i1"
    assert spec(imbalance=1.5, mode="training").id == "training-ep2-bf16-standard-tiny-F16-i1.5"


def test_largest_remainder_by_hand() -> None:
    assert largest_remainder(10, [1, 1, 1]) == [4, 3, 3]
    # quotas 3.5, 2.1, 1.4: floors 3, 2, 1 and the spare row to the largest remainder
    assert largest_remainder(7, [0.5, 0.3, 0.2]) == [4, 2, 1]


def test_zipf_plan_by_hand() -> None:
    # EP 2, i = 1.5: 1 + 2^-s = 2/1.5, so 2^-s = 1/3 and s = log2(3); 16 rows split 3:1.
    assert zipf_exponent(2, 1.5) == pytest.approx(math.log2(3), rel=1e-12)
    assert receive_rows(2, 8, 1.5) == [12, 4]
    assert receive_rows(4, 8, 1.0) == [8, 8, 8, 8]
    assert receive_rows(4, 8, 4.0) == [32, 0, 0, 0]
    rows = receive_rows(16, 12288, 4.0)
    assert rows[0] == 4 * 12288 and sum(rows) == 16 * 12288
    assert rows == sorted(rows, reverse=True)


def test_send_matrix_meets_both_sums() -> None:
    for ep, tk, imbalance in [(2, 8, 1.5), (4, 8, 2.5), (8, 12288, 4.0), (3, 5, 3.0)]:
        receive = receive_rows(ep, tk, imbalance)
        sends = send_matrix(ep, tk, receive)
        assert [sum(row) for row in sends] == [tk] * ep
        assert [sum(col) for col in zip(*sends, strict=True)] == receive


def test_flops_and_capacity_by_hand() -> None:
    m = model_case(TINY, spec())
    assert m.usefulFlops == 6 * 8 * 8 * 16 == 6144
    assert model_case(TINY, spec(mode="training")).usefulFlops == 3 * 6144
    assert m.capacityRows == 8 * 8
    # mxfp8, El = 2: 128 * (ceil(64/128) + 2 - 1)
    assert capacity_rows(TINY, spec(precision="mxfp8")) == 256
    assert m.inputBytes == 4 * 8 * 2


def test_model_bytes_by_hand() -> None:
    receive = [12, 4]
    # inputs 64 + routed 8*(16+64) + weights 2 experts * 3*8*16 * 2 bytes + scores 32
    assert model_bytes(TINY, spec(imbalance=1.5), receive) == 64 + 640 + 1536 + 32
    # mxfp8 weights: 2 * 384 * 33/32 = 792
    assert model_bytes(TINY, spec(imbalance=1.5, precision="mxfp8"), receive) == 1528
    assert model_bytes(TINY, spec(mode="training"), [8, 8]) == 3 * 2272


def test_active_experts_count_only_experts_with_rows() -> None:
    shape = Shape(T=4, D=8, E=8, K=2)  # El = 4 at EP 2
    assert active_experts_mean(shape, spec(), [15, 1]) == Fraction(4 + 1, 2)
    assert active_experts_mean(shape, spec(), [16, 0]) == 2


def test_saved_bytes_by_hand() -> None:
    assert saved_bytes(TINY, spec(), [12, 4]) == []
    # bf16: TK*2D = 128, then 80 bytes a received row
    assert saved_bytes(TINY, spec(mode="training"), [12, 4]) == [128 + 960, 128 + 320]
    # mxfp8: each of the 2 experts' groups padded to 128 rows; 8.25 + 64 + 16.5 bytes a row
    assert padded_rows(12, 2) == 256 and padded_rows(129, 1) == 256 and padded_rows(0, 3) == 0
    assert saved_bytes(TINY, spec(mode="training", precision="mxfp8"), [12, 4]) == [22848] * 2


def test_logical_payload_by_hand() -> None:
    # rank 0 keeps 8 * 12/16 = 6 of its 8 rows, sends 2: 2 rows * 2 ways * 8 * 2 bytes
    assert model_case(TINY, spec(imbalance=1.5)).logicalForwardPayloadBytesRank0 == 64


@pytest.mark.parametrize(("overrides", "field"), [
    ({"ep": 3}, "ep"), ({"imbalance": 3.0}, "imbalance"), ({"precision": "fp4"}, "precision"),
    ({"pipeline": "warp"}, "pipeline"),
])
def test_invalid_cases_name_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=f"^{field}: "):
        check_spec(TINY, spec(**overrides))


def test_check_reproduces_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    reference = Path(__file__).resolve().parent.parent / "ingest/data/gb300-nvl72-isolated-v6.json"
    assert main(["model", "--report", str(reference), "--check"]) == 0
    out = capsys.readouterr().out
    for name in ("usefulTFPerGPU", "analyticalHBMGBps", "capacityRows", "receiveRows",
                 "inputBytes", "savedBytes"):
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert line.endswith("ok"), line
        worst = float(line.split()[2])
        assert worst < 1e-9
    assert " 63 " in next(line for line in out.splitlines() if line.startswith("capacityRows"))


def test_check_fails_on_an_altered_field(
    tmp_path: Path, reference: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    reference["cases"][40]["savedBytes"][3] += 1
    path = tmp_path / "altered.json"
    path.write_text(json.dumps(reference))
    assert main(["model", "--report", str(path), "--check"]) == 1
    out = capsys.readouterr()
    line = next(line for line in out.out.splitlines() if line.startswith("savedBytes"))
    assert line.endswith("FAIL") and reference["cases"][40]["id"] in line
    assert "savedBytes" in out.err


def test_json_lines(tmp_path: Path, reference: dict[str, Any],
                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.json"
    reference["cases"] = reference["cases"][36:38]  # one bf16, one mxfp8 training case
    path.write_text(json.dumps(reference))
    assert main(["model", "--report", str(path), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["id"] for line in lines] == [c["id"] for c in reference["cases"]]
    for line, case in zip(lines, reference["cases"], strict=True):
        assert line["savedBytes"] == case["savedBytes"]
        assert line["usefulFlops"] == 3 * 6 * 2048 * 6 * 7168 * case["F"]
        assert set(line) >= {"modelBytes", "capacityRows", "receiveRows", "inputBytes"}


def test_check_needs_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text("[shape]\nT=4\nD=8\nE=4\nK=2\n[matrix]\nmode='inference'\nep=2\n"
                      "precision='bf16'\npipeline='standard'\nF=16\nimbalance=1\ncategory='t'\n")
    assert main(["model", "--matrix", str(matrix), "--check"]) == 2
    assert "--report" in capsys.readouterr().err


def test_model_command_needs_no_torch(tmp_path: Path) -> None:
    """`moescope model` runs where only the runner's light dependencies are installed."""
    reference = Path(__file__).resolve().parent.parent / "ingest/data/gb300-nvl72-isolated-v6.json"
    code = (
        "import sys, contextlib, io\n"
        "import cli.main\n"
        "assert 'runner' not in sys.modules, 'the cli imports the runner eagerly'\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert cli.main.main(['model', '--report', {str(reference)!r}, '--check']) == 0\n"
        "heavy = {'torch', 'fastapi', 'dash', 'sqlalchemy'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr


def test_the_capacity_factor_of_the_matrix_and_the_report_is_used(
    tmp_path: Path, reference: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # The model used the default factor 8 whatever the matrix or the report said, so a run
    # with capacity_factor = 2 failed its own --check.
    matrix = tmp_path / "m.toml"
    matrix.write_text("capacity_factor = 2\n[shape]\nT=4\nD=8\nE=4\nK=2\n[matrix]\n"
                      "mode='training'\nep=2\nprecision='bf16'\npipeline='standard'\nF=16\n"
                      "imbalance=1\ncategory='t'\n")
    assert main(["model", "--matrix", str(matrix), "--json"]) == 0
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["capacityRows"] == 2 * 4 * 2  # factor * T * K
    assert line["scratchBytes"] == 16 * (4 * 8 + 10 * 16)

    case = reference["cases"][0]
    factor4 = model_case(Shape(2048, 7168, 384, 6), CaseSpec(
        case["mode"], case["ep"], case["precision"], case["pipeline"], case["category"],
        case["F"], case["imbalance"]), capacity_factor=4)
    reference["meta"]["capacityFactor"] = 4
    reference["cases"] = [{**case, "capacityRows": factor4.capacityRows}]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(reference))
    assert main(["model", "--report", str(path), "--check"]) == 0
    assert factor4.capacityRows == case["capacityRows"] // 2


def test_a_reader_that_leaves_early_is_no_error() -> None:
    """`moescope model --json | head -1`: the pipe closes under us; no 'Broken pipe'."""
    reference = Path(__file__).resolve().parent.parent / "ingest/data/gb300-nvl72-isolated-v6.json"
    out = subprocess.run(
        f"{sys.executable} -m cli model --report {reference} --json | head -c 10",
        shell=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert len(out.stdout) == 10 and out.stderr == ""
