"""The semantic filter calibrated on labelled pairs: BERTScore recall, precision/recall, the run's record
of what it rejected, and the Variants page when it rejected nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sago_engine.variants import filter_calibration as fc

ROOT = Path(__file__).resolve().parents[3]


def test_pairs_file_errors_name_file_and_line(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text('{"a": "x", "b": "y", "label": "paraphrase"}\n\n{"a": "x", "b": "", "label": "paraphrase"}\n')
    with pytest.raises(ValueError, match=r"p\.jsonl:3: .*missing/bad: \['b'\]"):
        fc.load_pairs(p)


def test_committed_pairs_are_balanced_and_each_has_a_reason():
    pairs = fc.load_pairs()
    labels = [p["label"] for p in pairs]
    assert labels.count("paraphrase") == labels.count("different") == 24
    assert all(p["reason"].strip() and p["kind"].strip() for p in pairs)


def test_rates_calibrate_and_leave_one_out_by_hand():
    scores = np.array([0.95, 0.9, 0.8, 0.85, 0.5, 0.7])
    labels = ["paraphrase", "paraphrase", "paraphrase", "different", "different", "different"]
    r = fc.rates(scores, labels, 0.75)
    assert (r.rejected_different, r.rejected_paraphrase, r.recall, r.precision) == (2, 0, 2 / 3, 1.0)
    assert fc.calibrate(scores, labels) == pytest.approx(0.75)  # between 0.8 (lowest paraphrase) and 0.7
    loo = fc.leave_one_out(scores, labels)
    # without 0.8 the threshold rises to (0.9 + 0.85) / 2 = 0.875 and rejects 0.8: one rephrasing lost;
    # without 0.7 it falls to (0.8 + 0.5) / 2 = 0.65 and keeps 0.7: only 0.5 is rejected out of sample
    assert (loo.rejected_different, loo.rejected_paraphrase) == (1, 1)
    assert np.isnan(fc.rates(scores, labels, 0.1).precision)


def test_recall_is_not_lowered_by_a_frame_around_the_text():
    from sago_engine.models.bertscore import bertscore_f1, bertscore_recall

    base = "What is the capital of France?"
    framed = "Good morning! If you have a moment, I would be very grateful for your help with this: " + base
    swapped = "What is the capital of Australia?"
    f1 = bertscore_f1([framed, swapped, base, ""], [base, base, base, base])
    rec = bertscore_recall([framed, swapped, base, ""], [base, base, base, base])
    assert rec[0] > f1[0] + 0.15  # the frame costs F1 far more than recall
    assert rec[1] < rec[0]  # a swapped entity lowers recall
    assert rec[2] == 1.0 and rec[3] == 0.0


def test_paper_threshold_rejects_almost_nothing_and_recall_rejects_meaning_changes():
    """On the committed pairs (docs/METHOD.md reports these numbers): the paper's mapped F1 threshold
    keeps nearly every meaning change; score = "recall" at 0.85 rejects most and no rephrasing."""
    from sago_engine.variants.semantic_filter import FilterConfig, effective_threshold

    pairs = fc.load_pairs()
    labels = [p["label"] for p in pairs]
    paper = fc.rates(fc.pair_scores(pairs, "f1"), labels, effective_threshold(FilterConfig())["threshold"])
    assert paper.rejected_different <= 2
    rec = fc.rates(fc.pair_scores(pairs, "recall"), labels, 0.85)
    assert rec.rejected_different >= 16 and rec.rejected_paraphrase == 0


def test_recall_score_needs_the_raw_scale(tmp_path):
    from precompute.config import ConfigError, load_config
    from tests.support.factories import tiny_toml

    base = tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets")
    p = tmp_path / "c.toml"
    p.write_text(base + '\n[semantic_filter]\nscore = "recall"\n')
    with pytest.raises(ConfigError, match=r"\[semantic_filter\]: score 'recall' needs scale 'raw'"):
        load_config(p, check_keys=False)
    p.write_text(base + '\n[semantic_filter]\nscore = "recall"\nscale = "raw"\nthreshold = 0.85\n')
    assert load_config(p, check_keys=False).filter["score"] == "recall"


def test_run_records_what_the_filter_rejected_and_pages_say_when_nothing(tiny_store):
    import json

    from precompute.closing import closing_lines
    from sago_engine.store import open_store
    from tests.support.apptest import open_page

    with open_store(tiny_store) as st:
        counts = st.filter_counts()
        rec = json.loads(st.runs()["semantic_filter"].iloc[0])
        v = st.variants()
    assert counts["variants_scored"] == int(v["semantic_score"].notna().sum()) > 0
    assert counts["variants_rejected"] == int((~v["kept"].astype(bool) & v["skip_reason"].isna()).sum())
    assert (rec["variants_scored"], rec["variants_rejected"]) == (counts["variants_scored"], counts["variants_rejected"])
    lines = closing_lines(tiny_store, [])
    assert f"semantic filter: rejected {counts['variants_rejected']} of {counts['variants_scored']} scored variants" in \
        "\n".join(lines)
    if counts["variants_rejected"] == 0:
        at = open_page(tiny_store, "variants")
        assert not at.exception, at.exception
        assert any("The semantic filter rejected nothing" in i.value for i in at.info)
