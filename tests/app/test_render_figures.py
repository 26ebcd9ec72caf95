"""The CLI's gate table shows the paired measurement as it was taken: both sides, interval, rounds."""

from __future__ import annotations

from evokernel_tui.commands.render import latency_figures


def test_paired_latency_line_has_interval_rounds_and_both_spreads():
    text = latency_figures({"median_ms": 43.277, "reference_ms": 32.346, "speedup": 0.747, "lo": 0.61, "hi": 0.9,
                            "cand_iqr_ms": 1.5, "ref_iqr_ms": 0.8, "rounds": 6, "calls_per_round": 1,
                            "noisy": True})
    assert "43.277 ms (IQR 1.500)" in text and "eager 32.346 ms (IQR 0.800)" in text
    assert "0.75× [0.61–0.90]" in text and "6 rounds × 1 calls" in text and "noisy" in text


def test_clear_measurement_is_not_called_noisy():
    text = latency_figures({"median_ms": 1.0, "reference_ms": 2.0, "speedup": 2.0, "lo": 1.9, "hi": 2.1,
                            "cand_iqr_ms": 0.01, "ref_iqr_ms": 0.02, "rounds": 9, "calls_per_round": 12,
                            "noisy": False})
    assert "2.00× [1.90–2.10]" in text and "noisy" not in text and "9 rounds × 12 calls" in text
