"""The why sentence (ingest/why.py) for each way a change can read."""

from __future__ import annotations

from ingest.why import Change, ReportRef, phase_phrase, why_sentence


def test_the_issues_example_reads_as_written() -> None:
    change = Change(9, "inference nvfp4 mega", 19.2, 21.0, "combine", 98.0, 102.0, 0,
                    ["driver 580.95.05 -> 580.159.03"], [], ReportRef(6, "2026-11-06"),
                    ReportRef(7, "2026-11-07"))
    assert why_sentence(change) == (
        "9 inference nvfp4 mega cases +19.2 % to +21.0 %, all in combine (+98 % to +102 %); "
        "nothing else moved; coincides with driver 580.95.05 → 580.159.03; last good "
        "report 6 (2026-11-06), first bad report 7 (2026-11-07)")


def test_one_case_without_phases_or_history_before() -> None:
    change = Change(1, "training bf16 staged EP8", -6.04, -6.01, None, None, None, 3, [],
                    ["SM clock min 1965 -> 1410 MHz (-28 %)"], None, ReportRef(2, "2026-01-02"))
    assert why_sentence(change) == (
        "1 training bf16 staged EP8 case -6.0 %, no phases timed; 3 other cases moved too; "
        "coincides with SM clock min 1965 → 1410 MHz (-28 %); no earlier report, first bad "
        "report 2 (2026-01-02)")


def test_nothing_coincides() -> None:
    change = Change(2, "", 4.0, 4.4, "experts", 9.6, 9.6, 1, [], [], ReportRef(3, "d3"),
                    ReportRef(4, "d4"))
    assert why_sentence(change) == (
        "2 cases +4.0 % to +4.4 %, all in experts (+10 %); 1 other case moved too; no "
        "provenance or GPU state change; last good report 3 (d3), first bad report 4 (d4)")


def test_phase_phrase_agrees_or_counts() -> None:
    assert phase_phrase([("combine", 60.2), ("combine", 61.4)]) == (
        "all in combine (+60 % to +61 %)")
    assert phase_phrase([("combine", 5.0)]) == "in combine (+5 %)"
    assert phase_phrase([("combine", 5.0), ("experts", 3.0), ("combine", 1.0), (None, None)]) \
        == "in combine (2), experts (1), no phase (1)"
    assert phase_phrase([(None, None)]) == "no phases timed"
