"""`sago report --json/--html` on a store with a sampled run: per model and axis the share of movement due to
rephrasing vs sampling (with its CI) and on how many prompts rephrasing exceeds the dice — the numbers of
``views.sampling.separation_view``, checked against a recomputation from the raw ``sample_deltas`` rows."""

from __future__ import annotations

import json
import math

import duckdb
import pytest

from precompute.__main__ import main as runner_main
from sago_engine.store import open_store
from sago_engine.views.sampling import separation_view
from tests.support.factories import make_store


@pytest.fixture(scope="module")
def written(tiny_sampled_store, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report_sampled")
    assert runner_main(["report", str(tiny_sampled_store), "--html", str(tmp / "r.html"), "--json",
                        str(tmp / "r.json"), "--resamples", "200"]) == 0
    return tiny_sampled_store, json.loads((tmp / "r.json").read_text(encoding="utf-8")), (tmp / "r.html").read_text()


def _raw_shares(store) -> dict[tuple[str, str], float]:
    """1 − Σ_i f(i)² / Σ_i m(i)² per (model, axis): f(i)² = mean of the base samples' Δ̃², m(i)² = mean of the
    kept variants' samples' Δ̃², over prompts that have both (available rows only)."""
    with duckdb.connect(str(store), read_only=True) as con:
        rows = con.execute("""
            SELECT r.model, x.axis, x.prompt_id,
                   avg(x.delta_norm * x.delta_norm) FILTER (WHERE x.variant_id IS NULL) AS f2,
                   avg(x.delta_norm * x.delta_norm) FILTER (WHERE x.variant_id IS NOT NULL AND v.kept) AS m2
            FROM sample_deltas x JOIN runs r USING (run_id) LEFT JOIN variants v USING (variant_id)
            WHERE x.available GROUP BY ALL""").fetchall()
    sums: dict[tuple[str, str], list[float]] = {}
    for model, axis, _, f2, m2 in rows:
        if f2 is None or m2 is None:
            continue
        s = sums.setdefault((model, axis), [0.0, 0.0])
        s[0] += f2
        s[1] += m2
    return {k: (1.0 - f / m if m > 0 else math.nan) for k, (f, m) in sums.items()}


def test_report_gives_the_rephrasing_share_per_model_and_axis(written):
    store, numbers, _ = written
    rows = numbers["sampling"]
    raw = _raw_shares(store)
    assert {(r["model"], r["axis"]) for r in rows} == set(raw) and len(rows) >= 3
    for r in rows:
        want = raw[(r["model"], r["axis"])]
        assert (r["share"] is None) == math.isnan(want)
        if r["share"] is not None:
            assert r["share"] == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert 0 <= r["n_exceeds_bh"] <= r["n_exceeds"] <= r["n_prompts"]
        if r["share_lo"] is not None:
            assert r["share_lo"] <= r["share_hi"]
    with open_store(store) as st:
        view = separation_view(st, None, n_resamples=200, seed=0)["models"]
    assert [r["n_exceeds"] for r in rows] == [int(n) for n in view["n_exceeds"]]  # the Significance page's numbers
    assert [p["model"] for p in numbers["pass_k"]] == sorted({r["model"] for r in rows})


def test_html_shows_the_sampling_table(written):
    _, numbers, html = written
    assert "<h2>Rephrasing or the dice? (sampled runs)</h2>" in html
    r = numbers["sampling"][0]
    assert f"{r['n_exceeds']} of {r['n_prompts']} ({r['n_exceeds_bh']} after BH)" in html


def test_a_store_without_sampled_runs_reports_none(tmp_path):
    store = make_store(tmp_path / "s.duckdb", models=("model-a",), n_prompts=3, n_variants=2)
    assert runner_main(["report", str(store), "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"),
                        "--resamples", "50"]) == 0
    numbers = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert numbers["sampling"] == [] and numbers["pass_k"] == []
    assert "Rephrasing or the dice?" not in (tmp_path / "r.html").read_text(encoding="utf-8")
