"""The matrix TOML file: expansion, defaults, ids, and errors that name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from runner.matrix import MatrixError, load_matrix

SHAPE = "[shape]\nT = 8\nD = 16\nE = 4\nK = 2\n"
MATRIX = SHAPE + """
[matrix]
mode = ["inference", "training"]
ep = [2]
precision = ["bf16", "mxfp8"]
pipeline = "standard"
F = [32, 64]
imbalance = [1, 1.5]
category = "tiny"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


def test_cross_product_and_defaults(tmp_path: Path) -> None:
    m = load_matrix(write(tmp_path, MATRIX + """
[[case]]
mode = "training"
ep = 1
precision = "nvfp4"
pipeline = "mega"
F = 48
imbalance = 1
category = "extra"
"""))
    assert len(m.cases) == 2 * 2 * 2 * 2 + 1
    ids = [c.id for c in m.cases]
    assert ids[0] == "inference-ep2-bf16-standard-tiny-F32-i1"
    assert "training-ep2-mxfp8-standard-tiny-F64-i1.5" in ids
    assert ids[-1] == "training-ep1-nvfp4-mega-extra-F48-i1"
    # At least ten windows by default, so the iteration tails (p90, p99) mean something.
    assert (m.timing.windows, m.timing.iterations) == (10, 30)
    assert m.timing.timeout_s == 120.0  # a dead peer is seen in 2 minutes, not 30
    assert (m.capacity_factor, m.seed) == (8, 0)
    assert m.peaks.tf == {}


def test_timing_seed_and_peaks(tmp_path: Path) -> None:
    # Top-level keys come before the first table (TOML puts later ones inside it).
    m = load_matrix(write(tmp_path, "capacity_factor = 4\nseed = 7\n" + MATRIX + """
[timing]
windows = 3
iterations = 2
warmup = 1
timeout_s = 600
[peaks]
tf = { bf16 = 989.5 }
hbm_gbps = 4800
"""))
    assert (m.timing.windows, m.timing.iterations, m.timing.warmup) == (3, 2, 1)
    assert m.timing.timeout_s == 600.0
    assert (m.capacity_factor, m.seed) == (4, 7)
    assert m.peaks.tf == {"bf16": 989.5} and m.peaks.hbm_gbps == 4800.0


@pytest.mark.parametrize(("text", "key"), [
    ("", "shape"),
    (SHAPE, "matrix"),
    (MATRIX.replace("ep = [2]", "ep = [2, 0]"), "matrix.ep[1]"),
    (MATRIX.replace("ep = [2]", 'ep = ["two"]'), "matrix.ep[0]"),
    (MATRIX.replace('pipeline = "standard"', 'pipeline = "warp"'), "matrix.pipeline"),
    (MATRIX.replace('category = "tiny"', ""), "matrix.category"),
    (MATRIX.replace("imbalance = [1, 1.5]", "imbalance = [0.5]"), "matrix.imbalance[0]"),
    (MATRIX.replace("T = 8", "T = -1"), "shape.T"),
    (MATRIX + "[timing]\nwindows = 0\n", "timing.windows"),
    (MATRIX + "[timing]\nwindow = 3\n", "timing.window"),
    (MATRIX + "[timing]\ntimeout_s = 0\n", "timing.timeout_s"),
    (MATRIX + "[peaks]\ntf = { bf16 = -1 }\n", "peaks.tf.bf16"),
    (MATRIX + "[peaks]\ntf = { bf61 = 989 }\n", "peaks.tf.bf61"),
    ("colour = 1\n" + MATRIX, "colour"),
    (MATRIX + "colour = 1\n", "matrix.colour"),
    (MATRIX.replace("ep = [2]", "ep = [3]"), "inference-ep3-bf16-standard-tiny-F32-i1.ep"),
    (MATRIX.replace("imbalance = [1, 1.5]", "imbalance = [3]"),
     "inference-ep2-bf16-standard-tiny-F32-i3.imbalance"),
    (MATRIX + "[[case]]\nmode = 'inference'\n", "case[0].ep"),
])
def test_errors_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(MatrixError) as info:
        load_matrix(write(tmp_path, text))
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    text = MATRIX.replace("F = [32, 64]", "F = [32, 32]")
    with pytest.raises(MatrixError, match="duplicate case id 'inference-ep2-bf16-standard"):
        load_matrix(write(tmp_path, text))


def test_invalid_toml_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match="not valid TOML"):
        load_matrix(write(tmp_path, "[shape\n"))


def test_model_command_on_a_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "--matrix", str(write(tmp_path, MATRIX)), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 16
    first = lines[0]
    assert first["id"] == "inference-ep2-bf16-standard-tiny-F32-i1"
    assert first["usefulFlops"] == 6 * 16 * 16 * 32  # 6 * TK * D * F
    assert first["receiveRows"] == [16, 16] and "savedBytes" not in first
    training = next(x for x in lines if x["id"].startswith("training-ep2-bf16"))
    assert len(training["savedBytes"]) == 2


def test_model_command_reports_errors(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, MATRIX.replace("ep = [2]", "ep = [0]"))
    assert main(["model", "--matrix", str(path)]) == 1
    assert "matrix.ep[0]: must be an integer >= 1" in capsys.readouterr().err
