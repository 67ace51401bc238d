"""Method choices: option axes, rank agreement, the paper's claims per option, distance to the
paper's scale, reply-length-cap pairs; the mirroring-judge audit (Cohen's κ, sample, hand labels in a sidecar);
the Method choices page headless (AppTest) on synthetic stores with and without options and judge verdicts."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.scoring import judge_audit as ja
from sago_engine.scoring import rankcorr
from sago_engine.store import open_store
from sago_engine.store.sidecar.judge_labels import read_labels, sidecar_path, write_label
from sago_engine.types import AXES
from sago_engine.views import method_choices as mc
from tests.support.factories import add_judge_verdicts, add_option_axes, make_cap_store, make_store
from tests.support.rendered import all_tables, shown

ROOT = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------- Cohen's κ (hand-computed)
def test_kappa_and_confusion_on_a_hand_computed_table():
    # judge YES on 6/10, heuristic YES on 5/10; equal on 7 → p_o = 0.7, p_e = 0.6·0.5 + 0.4·0.5 = 0.5,
    # κ = (0.7 − 0.5) / (1 − 0.5) = 0.4. Confusion (rows judge, cols heuristic): YES/YES 4, YES/NO 2, NO/YES 1, NO/NO 3.
    judge = [1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
    heur = [1, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    r = ja.agreement(judge, heur, ("judge", "heuristic"))
    assert r["n"] == 10 and r["agree"] == pytest.approx(0.7) and r["kappa"] == pytest.approx(0.4)
    assert r["confusion"].to_numpy().tolist() == [[4, 2], [1, 3]]
    assert list(r["confusion"].index) == ["judge YES", "judge NO"]
    # always opposite, balanced: p_o = 0, p_e = 0.5 → κ = −1
    assert ja.agreement([1, 0, 1, 0], [0, 1, 0, 1])["kappa"] == pytest.approx(-1.0)


def test_kappa_is_nan_with_a_reason_when_undefined_and_rejects_bad_codes():
    r = ja.agreement([1, 1, 1], [1, 1, 1])
    assert math.isnan(r["kappa"]) and "same answer" in r["reason"] and r["agree"] == 1.0
    r = ja.agreement([None, 1], [0, float("nan")])  # no pair rated by both
    assert r["n"] == 0 and math.isnan(r["kappa"]) and r["reason"]
    with pytest.raises(ValueError):
        ja.agreement([1, 2], [1, 0])


# ---------------------------------------------------------------- rank agreement (Kendall τ-b)
def _table(option, sgs, models=("m1", "m2", "m3", "m4"), axis="cos"):
    return pd.DataFrame({"option": option, "model": list(models)[: len(sgs)], "axis": axis, "sgs": sgs})


def test_rank_agreement_counts_swapped_pairs_and_kendall_tau():
    # reference order m1<m2<m3<m4; option swaps m2 and m3: 1 discordant of 6 pairs → τ = (5 − 1)/6 = 2/3
    t = pd.concat([_table("default", [0.1, 0.2, 0.3, 0.4]), _table("o", [0.1, 0.3, 0.2, 0.4])])
    r = mc.rank_agreement(t, "default").iloc[0]
    assert r["n_models"] == 4 and r["n_discordant"] == 1 and r["tau"] == pytest.approx(2 / 3) and r["reason"] == ""
    # fully reversed → τ = −1
    t = pd.concat([_table("default", [0.1, 0.2, 0.3, 0.4]), _table("o", [0.4, 0.3, 0.2, 0.1])])
    assert mc.rank_agreement(t, "default").iloc[0]["tau"] == pytest.approx(-1.0)


def test_rank_agreement_is_nan_with_reason_for_two_models_or_ties():
    t = pd.concat([_table("default", [0.1, 0.2]), _table("o", [0.3, 0.2])])
    r = mc.rank_agreement(t, "default").iloc[0]
    assert math.isnan(r["tau"]) and "at least 3" in r["reason"] and r["n_discordant"] == 1
    t = pd.concat([_table("default", [0.1, 0.2, 0.3]), _table("o", [0.2, 0.2, 0.2])])
    r = mc.rank_agreement(t, "default").iloc[0]
    assert math.isnan(r["tau"]) and "same SGS" in r["reason"]


def _models(n):
    return tuple(f"m{i}" for i in range(n))


def test_rank_agreement_p_with_tied_sgs_is_the_exact_permutation_p():
    # T15: reference SGS with ties (Δ-MR 0.0 twice); the 120 orders of the option's SGS give p = 8/120
    ms = _models(5)
    t = pd.concat([_table("default", [0.4, 0.2, 0.2, 0.0, 0.0], ms, "mr"),
                   _table("o", [0.408, 0.157, 0.229, 0.104, 0.076], ms, "mr")])
    r = mc.rank_agreement(t, "default").iloc[0]
    assert r["tau"] == pytest.approx(0.8944, abs=1e-4)
    assert r["p"] == pytest.approx(0.0667, abs=1e-4) and r["p_method"] == rankcorr.METHOD_ENUMERATED
    t = pd.concat([_table("default", [0.10, 0.20, 0.20, 0.30]), _table("o", [0.11, 0.22, 0.25, 0.35])])
    r = mc.rank_agreement(t, "default").iloc[0]
    assert r["p"] == pytest.approx(0.1667, abs=1e-4) and r["p_method"] == rankcorr.METHOD_ENUMERATED
    # without the tie: scipy's exact p
    t = pd.concat([_table("default", [0.1, 0.2, 0.3, 0.4]), _table("o", [0.11, 0.22, 0.25, 0.35])])
    r = mc.rank_agreement(t, "default").iloc[0]
    assert r["p"] == pytest.approx(0.0833, abs=1e-4) and r["p_method"] == rankcorr.METHOD_EXACT


def test_kendall_permutation_p_for_ten_tied_models_matches_brute_force_enumeration():
    # n = 10 > 8: Monte-Carlo permutation test. y has three tie groups (3, 3, 4), so its 10! orders fall on
    # 10!/(3!·3!·4!) = 4200 equally likely arrangements: enumerating them gives the exact permutation p.
    x = [0.0, 0.0, 0.1, 0.2, 0.2, 0.3, 0.4, 0.5, 0.5, 0.6]
    y = [0.0, 0.1, 0.0, 0.2, 0.0, 0.1, 0.2, 0.1, 0.2, 0.2]

    def s_num(a, b):
        return sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i in range(10) for j in range(i + 1, 10))

    arrangements = set(itertools.permutations(y))
    assert len(arrangements) == 4200
    obs = abs(s_num(x, y))
    exact = sum(abs(s_num(x, b)) >= obs for b in arrangements) / len(arrangements)
    r = rankcorr.kendall_tau(x, y)
    se = math.sqrt(exact * (1 - exact) / rankcorr.N_RESAMPLES)
    assert r.method == rankcorr.METHOD_MONTE_CARLO and abs(r.p - exact) <= 4 * se + 1 / rankcorr.N_RESAMPLES
    assert rankcorr.kendall_tau(x, y) == r  # seeded: the same data give the same p
    t = pd.concat([_table("default", x, _models(10)), _table("o", y, _models(10))])
    row = mc.rank_agreement(t, "default").iloc[0]
    assert row["p_method"] == rankcorr.METHOD_MONTE_CARLO and abs(row["p"] - exact) <= 4 * se + 1e-4


# ---------------------------------------------------------------- the paper's claims
def _scores(option, spec, n=12):
    """Per-prompt scores: spec = {(model, dataset, axis): centre}; s = centre ± 0.01 alternating (n prompts each)."""
    rows = []
    for (m, d, a), c in spec.items():
        for i in range(n):
            rows.append({"option": option, "model": m, "dataset": d, "prompt_id": f"{d}:{i}", "axis": a,
                         "s": c + (0.01 if i % 2 else -0.01)})
    return pd.DataFrame(rows)


def test_claims_hold_or_fail_as_the_tests_say():
    # option "hi": both models far above ε on Δ-BLEU and Δ-MR (p ≪ 0.001), and on Δ-Cos m1 < m2 on d1 but
    # m1 > m2 on d2 with tiny spread → a reversal with bootstrap probability 1.
    hi = {}
    for m in ("m1", "m2"):
        for d in ("d1", "d2"):
            hi[(m, d, "bleu")] = 0.5
            hi[(m, d, "mr")] = 0.4
    hi.update({("m1", "d1", "cos"): 0.1, ("m2", "d1", "cos"): 0.3, ("m1", "d2", "cos"): 0.3, ("m2", "d2", "cos"): 0.1})
    # option "lo": m2 is at 0.02 everywhere (below ε = 0.05) and Δ-Cos keeps one order on both datasets
    lo = dict(hi)
    lo.update({k: 0.02 for k in hi if k[0] == "m2"})
    lo.update({("m1", "d1", "cos"): 0.3, ("m1", "d2", "cos"): 0.3})
    sc = pd.concat([_scores("hi", hi), _scores("lo", lo)], ignore_index=True)
    c = mc.claims(sc, ("cos",), eps=0.05, n_resamples=200).set_index(["option", "claim"])["holds"]
    abc = (mc.CLAIM_A, mc.CLAIM_B, mc.CLAIM_C)
    assert [c[("hi", k)] for k in abc] == [True, True, True]
    assert [c[("lo", k)] for k in abc] == [False, False, False]
    wide = mc.claims_wide(mc.claims(sc, ("cos",), n_resamples=200), ["hi", "lo"])
    assert wide.set_index("claim").loc[mc.CLAIM_A, "lo"].startswith("fails — 1/2 models")


def test_claims_cannot_be_tested_without_the_axes():
    sc = _scores("o", {("m1", "d1", "cos"): 0.2, ("m2", "d1", "cos"): 0.3})
    c = mc.claims(sc, ("cos",), n_resamples=100).set_index("claim")
    assert c.loc[mc.CLAIM_B, "holds"] is None and c.loc[mc.CLAIM_C, "holds"] is None  # no BLEU/MR; one dataset


# ---------------------------------------------------------------- option axes and the paper's scale
def test_option_axes_replace_only_their_base_axis():
    assert list(mc.option_axes(["bert@rescaled", "cos", "cos@user_mean", "cos@user_last"])["axis"]) == [
        "cos@user_last", "cos@user_mean", "bert@rescaled"]  # the paper's axis order, then option
    sc = pd.DataFrame({"model": "m", "dataset": "d", "prompt_id": "p", "axis": ["cos", "bleu", "cos@x"],
                       "s": [0.1, 0.5, 0.7]})
    out = mc.axis_option_scores(sc, "cos", ["x"]).set_index(["option", "axis"])["s"]
    assert out.to_dict() == {("default", "cos"): 0.1, ("default", "bleu"): 0.5, ("x", "bleu"): 0.5, ("x", "cos"): 0.7}


def test_paper_scale_distance_in_orders_of_magnitude():
    # Figure 2a: Δ-Cos ranges 0.05–0.28, Δ-Ent is 0.01 for every open model, Δ-BLEU 0.52–0.84.
    t = pd.DataFrame({"option": ["a", "a", "a", "b"], "model": ["m1", "m2", "m1", "m1"],
                      "axis": ["cos", "cos", "ent", "cos"], "sgs": [0.008, 0.012, 0.1, 0.1]})
    s = mc.paper_scale(t, ("cos", "ent")).set_index(["option", "axis"])
    assert s.loc[("a", "cos"), "median_sgs"] == pytest.approx(0.01)
    assert s.loc[("a", "cos"), "distance"] == pytest.approx(math.log10(5)) and s.loc[("a", "cos"), "direction"] == "below"
    assert s.loc[("a", "ent"), "distance"] == pytest.approx(1.0) and s.loc[("a", "ent"), "direction"] == "above"
    assert s.loc[("b", "cos"), "distance"] == 0.0 and s.loc[("b", "cos"), "direction"] == "inside"
    cl = mc.closest_options(s.reset_index()).set_index("option")
    assert cl.loc["b", "closest"] and not cl.loc["a", "closest"]
    assert cl.loc["a", "distance"] == pytest.approx((math.log10(5) + 1.0) / 2)
    assert "'b' comes closest — inside" in mc.closest_statement("Δ-Cos", cl.reset_index(), s.reset_index())


# ---------------------------------------------------------------- reply length cap pairs
def _settings(cap=48, **over):
    """A ``run_settings`` row as the runner records a labelled run with its own reply cap."""
    model = over.pop("model", f"smol-{cap}")
    base = {"run_id": "r1", "model": model, "backend": "hf_local", "model_source": "zoo:smol",
            "weights_sha256": "abc", "dtype": "float32", "seed": 1,
            "decoding": json.dumps({"greedy": True, "max_new_tokens": cap}),
            "config": json.dumps({"run": {"max_new_tokens": 48, "store": "a.duckdb"}, "models": [{"key": "smol"}],
                                  "run_model": {"key": "smol", "label": model, "max_new_tokens": cap}}),
            "normalizers": "{}", "semantic_filter": "{}", "encoder": "{}"}
    base.update(over)
    return base


def test_cap_pairs_only_runs_differing_in_max_new_tokens_and_label():
    long = _settings(128, run_id="r2")
    other_seed = {**_settings(256, run_id="r3"), "seed": 2}
    same_cap = _settings(48, run_id="r4", model="smol-48b")
    p = mc.cap_pairs(pd.DataFrame([_settings(), long, other_seed, same_cap]))
    # r3 differs in its seed: never paired; r1 and r4 share the cap: not a pair, but each pairs with r2
    assert sorted(p[["run_short", "run_long", "cap_short", "cap_long", "model"]].values.tolist()) == [
        ["r1", "r2", 48, 128, "smol"], ["r4", "r2", 48, 128, "smol"]]


def test_cap_choice_from_a_store_with_a_pair(tmp_path):
    store = make_cap_store(tmp_path / "cap.duckdb", caps=(48, 128))
    with open_store(store) as st:
        chs = {c.key: c for c in mc.collect_choices(st)}
        ref = st.prompt_scores()
    cap = chs["cap"]
    assert cap.available and cap.options == ("max_new_tokens = 48", "max_new_tokens = 128")
    assert set(cap.scores["model"]) == {"smol"}
    short = cap.scores[(cap.scores["option"] == "max_new_tokens = 48") & (cap.scores["axis"] == "bleu")]
    want = ref[(ref["run_id"] == "run-smol-cap48") & (ref["axis"] == "bleu")]
    assert sorted(short["s"]) == pytest.approx(sorted(want["s"]))
    assert not chs["axis:cos"].available and "cos@<option>" in chs["axis:cos"].missing


# ---------------------------------------------------------------- store queries behind the page
def test_prompt_scores_of_chosen_axes_and_axis_names(tmp_path):
    store = add_option_axes(make_store(tmp_path / "o.duckdb"))
    with open_store(store) as st:
        names = st.axis_names()
        allsc = st.prompt_scores(axes=tuple(names))
        plain = st.prompt_scores()
        some = st.prompt_scores(axes=("cos", "cos@user_last"))
    assert set(plain["axis"]) == set(AXES)  # None = the six plain axes
    assert {"cos@user_last", "cos@user_mean", "bert@rescaled", "cos", "mr"} <= set(names)
    assert set(some["axis"]) == {"cos", "cos@user_last"}
    ref = allsc[allsc["axis"].isin(["cos", "cos@user_last"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(some.reset_index(drop=True), ref)


def test_mirroring_examples_carry_the_judged_reply(tmp_path):
    store = add_judge_verdicts(make_store(tmp_path / "j.duckdb"))
    with open_store(store) as st:
        ex = st.mirroring_examples()
    # make_store: 2 models x 2 datasets x 4 prompts, one social_register variant each (v0 of 3) = 16
    # (run, variant) pairs, each judged on its variant reply and on the base reply
    assert len(ex) == 2 * 2 * 4 * 1 * 2 == 32 and ex["response"].notna().all()
    assert ex.groupby(["run_id", "variant_id"]).size().eq(2).all() and set(ex["response_of"]) == {"base", "variant"}
    v = ex[ex["response_of"] == "variant"].iloc[0]
    assert v["response"] == f"Reply to {v['variant_id']}, in kind." and v["variant_prompt"].startswith("Q ")
    b = ex[ex["response_of"] == "base"].iloc[0]
    assert b["response"] == f"Base reply to {b['prompt_id']}."


# ---------------------------------------------------------------- audit sample and hand labels
def test_audit_sample_is_ten_percent_seeded_and_order_free(tmp_path):
    store = add_judge_verdicts(make_store(tmp_path / "a.duckdb"), verdicts=lambda i: (None if i % 7 == 0 else i % 2, 1))
    with open_store(store) as st:
        ex = st.mirroring_examples()
    n_usable = int(ex["verdict"].notna().sum())
    s1 = ja.audit_sample(ex)
    s2 = ja.audit_sample(ex.sample(frac=1.0, random_state=1))
    assert len(s1) == math.ceil(0.1 * n_usable) and s1["verdict"].notna().all()
    assert s1[list(ja.KEY)].values.tolist() == s2[list(ja.KEY)].values.tolist()
    assert list(s1["order"]) == list(range(len(s1)))
    other = ja.audit_sample(ex, seed="another seed")
    assert s1[list(ja.KEY)].values.tolist() != other[list(ja.KEY)].values.tolist()


def _sha(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def test_labels_round_trip_to_a_sidecar_and_leave_the_store_untouched(tmp_path):
    store = add_judge_verdicts(make_store(tmp_path / "l.duckdb"))
    before = _sha(store)
    side = sidecar_path(store)
    assert side == tmp_path / "l.judge-labels.db"
    with open_store(store) as st:
        ex = st.mirroring_examples()
    a, b = ex.iloc[0], ex.iloc[1]
    write_label(side, store, a["run_id"], a["variant_id"], a["response_of"], 1)
    write_label(side, store, b["run_id"], b["variant_id"], b["response_of"], 0)
    write_label(side, store, a["run_id"], a["variant_id"], a["response_of"], 0)  # relabel replaces
    lab = read_labels(side, store)
    assert len(lab) == 2 and set(lab["label"]) == {0}
    assert _sha(store) == before and not Path(str(store) + ".wal").exists()
    assert read_labels(side, tmp_path / "other.duckdb").empty  # keyed by store name
    la = ja.label_agreement(ex, lab)
    assert la["n_labelled"] == 2 and la["vs_heuristic"]["n"] == 2
    with pytest.raises(ValueError):
        write_label(side, store, "r", "v", "base", 2)
    with pytest.raises(ValueError):
        write_label(store, store, "r", "v", "base", 1)


# ---------------------------------------------------------------- the page (AppTest)
def _page(store, state: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(store)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.run()
    at.switch_page("pages/method_choices.py")
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def full_store(tmp_path_factory):
    """Three models × three datasets with Δ-Cos / Δ-BERT option axes and judge verdicts."""
    p = tmp_path_factory.mktemp("mc") / "full.duckdb"
    make_store(p, models=("model-a", "model-b", "model-c"), datasets=("truthfulqa", "nq_open", "alpaca"),
               n_prompts=6, n_variants=6, seed=3)
    add_option_axes(p, factors={"cos@user_last": {"model-a": 3.0, "model-b": 1.0, "model-c": 0.5}})
    return add_judge_verdicts(p)


def test_page_shows_options_sgs_ranks_claims_and_judge_kappa(full_store):
    at = _page(full_store)
    heads = [shown(h.value) for h in at.header]  # store-derived titles are Markdown-escaped
    assert heads[:2] == ["Δ-Cos: token position and layers", "Δ-BERT: encoder and scale"]
    with open_store(full_store) as st:
        chs = {c.key: c for c in mc.collect_choices(st)}
        ex = st.mirroring_examples()
    cos = chs["axis:cos"]
    summ = mc.choice_summary(cos.scores, cos.axes, cos.reference)
    tables = all_tables(at)  # the Δ-Cos section's tables come first (grids, then the static claims tables)
    sgs = next(t for t in tables if {"model", "user_last"} <= set(t.columns)).set_index(["model", "axis"])
    want = summ["sgs"].set_index(["option", "model"]).loc[("user_last", "model-a"), "ci_cell"]
    assert sgs.loc[("model-a", "Δ-Cos"), "user_last"] == want
    ranks = next(t for t in tables if "tau" in t.columns).set_index("option")
    assert set(ranks["p_method"]) <= {"", rankcorr.METHOD_EXACT, rankcorr.METHOD_ENUMERATED, rankcorr.METHOD_MONTE_CARLO}
    assert ranks.loc["user_last", "tau"] == pytest.approx(summ["ranks"].set_index("option").loc["user_last", "tau"])
    claims = next(t for t in tables if "claim" in t.columns)
    assert set(claims["claim"]) == {mc.CLAIM_A, mc.CLAIM_B, mc.CLAIM_C}
    assert claims.set_index("claim").loc[mc.CLAIM_B, "user_last"].startswith("holds — models at p < 0.001")
    k = ja.judge_vs_heuristic(ex)["kappa"]
    assert [m.value for m in at.metric if m.label.startswith("Cohen")] == [f"{k:.3f}"]
    assert any("Δ-Cos: token position and layers:" in shown(m.value) for m in at.markdown)


def test_page_without_options_or_verdicts_says_how_to_get_them(tmp_path):
    at = _page(make_store(tmp_path / "plain.duckdb"))
    infos = " ".join(shown(i.value) for i in at.info)
    assert "no Δ-Cos option axes" in infos and "no Δ-BERT option axes" in infos
    assert "max_new_tokens" in infos and "[judge]" in infos and "log-probs" in infos
    assert [shown(h.value) for h in at.header][2] == "R_X: the paper's normalizers vs data-driven"  # still computed


def test_page_records_a_label_in_the_sidecar_only(tmp_path):
    store = add_judge_verdicts(make_store(tmp_path / "lab.duckdb"))
    before = _sha(store)
    at = _page(store)
    at.radio(key="methods_label_value").set_value("NO").run()
    at.button(key="methods_label_save").click().run()
    assert not at.exception, at.exception
    lab = read_labels(sidecar_path(store), store)
    assert len(lab) == 1 and lab["label"].iloc[0] == 0
    assert _sha(store) == before
    assert any(m.label == "κ (you vs judge)" for m in at.metric)


def test_share_mode_without_live_disables_labelling(tmp_path, monkeypatch):
    share = tmp_path / "share"
    share.mkdir()
    store = add_judge_verdicts(make_store(share / "meeting.duckdb"))
    monkeypatch.setenv("SAGO_SHARE_DIR", str(share))
    monkeypatch.delenv("SAGO_LIVE", raising=False)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/method_choices.py")
    at.run()
    assert not at.exception, at.exception
    assert not [r for r in at.radio if r.key == "methods_label_value"]
    assert any("without --live" in i.value for i in at.info)
    assert not sidecar_path(store).exists()


@pytest.mark.parametrize("broken", ["view", "garbage"])
def test_a_label_sidecar_that_cannot_be_read_is_named_and_nothing_runs(tmp_path, monkeypatch, broken):
    """A sidecar holding a view, or a file that is not a database, gives a shared dashboard's visitor a
    warning naming the file (no server path), no exception, and no label control; the store is untouched."""
    import duckdb

    share = tmp_path / "share"
    share.mkdir()
    store = add_judge_verdicts(make_store(share / "lab.duckdb"))
    monkeypatch.setenv("SAGO_SHARE_DIR", str(share))
    monkeypatch.setenv("SAGO_LIVE", "1")
    side = sidecar_path(store)
    if broken == "view":
        con = duckdb.connect(str(side))
        con.execute("CREATE VIEW judge_labels AS SELECT 'x' AS store_name")
        con.close()
    else:
        side.write_bytes(b"not a database\x00" * 64)
    before = _sha(store)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/method_choices.py")
    at.run()
    assert not at.exception, at.exception
    warn = " ".join(shown(w.value) for w in at.warning)
    assert f"The label file {side.name} cannot be read" in warn and str(tmp_path) not in warn
    assert not [r for r in at.radio if r.key == "methods_label_value"]
    assert _sha(store) == before

