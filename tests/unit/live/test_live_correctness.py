"""Live correctness: a typed reference marks each reply of a probe right or wrong (hand-written replies)."""

import pandas as pd
import pytest

from sago_engine.live.correctness import LIVE_SCORERS, probe_correctness, typed_reference


def _responses(rows):
    return pd.DataFrame(rows, columns=["variant_id", "response", "error"])


def test_typed_reference_splits_at_the_bar_and_drops_blanks():
    assert typed_reference(" Canberra | canberra city |  | ") == ["Canberra", "canberra city"]
    assert typed_reference("") == [] and typed_reference(None) == []


def test_each_reply_gets_its_verdict_and_the_base_its_own():
    resp = _responses([
        (None, "The capital of Australia is Canberra.", None),
        ("v1", "It is Sydney, the largest city.", None),
        ("v2", "   ", None),  # no text: unavailable, never wrong
        ("v3", "", "context length exceeded"),  # an error: unavailable
        ("v4", "CANBERRA!", None),  # case and punctuation do not matter
    ])
    base, table = probe_correctness(resp, ["Canberra"])
    assert base.verdict == "correct"
    got = dict(zip(table["variant_id"], table["verdict"]))
    assert got == {"v1": "wrong", "v2": "unavailable", "v3": "unavailable", "v4": "correct"}
    assert table.set_index("variant_id").at["v3", "reason"] == "the reply is an error"


def test_no_reference_is_unavailable_and_a_pending_base_is_none():
    base, table = probe_correctness(_responses([("v1", "Canberra", None)]), [])
    assert base is None and table["verdict"].tolist() == ["unavailable"]


def test_exact_differs_from_contains_on_a_sentence():
    resp = _responses([(None, "The answer is Canberra.", None), ("v1", "Canberra", None)])
    base, table = probe_correctness(resp, ["Canberra"], scorer="exact")
    assert base.verdict == "wrong" and table["verdict"].tolist() == ["correct"]
    assert "contains" in LIVE_SCORERS
    with pytest.raises(ValueError, match="valid: contains"):
        probe_correctness(resp, ["Canberra"], scorer="judge")
