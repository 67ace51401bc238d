"""The one registry pattern (families, backends, axes) and the axis registry every stage reads."""

from __future__ import annotations

import numpy as np
import pytest

from sago_engine import types
from sago_engine.axes import NOISE_TOL, delta_fn
from sago_engine.axes.activation import delta_cos
from sago_engine.axes.confidence import delta_ent, delta_prob
from sago_engine.axes.generation import delta_bert, delta_bleu
from sago_engine.axes.mirroring import delta_mr
from sago_engine.axis_spec import AXIS_SPECS, NEEDS, AxisSpec, register_axis
from sago_engine.backends import BACKENDS
from sago_engine.registry import Registry, UnknownNameError
from sago_engine.scoring import scores as scoring
from sago_engine.types import GenerationResult
from sago_engine.variants import FAMILIES, full_grid, make_variants
from sago_engine.views import palette


# ---------------------------------------------------------------- Registry[T]
def test_registry_keeps_order_refuses_duplicates_and_suggests():
    reg: Registry[int] = Registry("thing")
    reg.register("alpha", 1)
    reg.register("beta", 2)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("alpha", 3)
    with pytest.raises(ValueError, match="non-empty"):
        reg.register("", 3)
    assert reg.names() == ("alpha", "beta") and list(reg) == ["alpha", "beta"] and len(reg) == 2
    assert reg["alpha"] == 1 and reg.get("gamma", 0) == 0 and "beta" in reg and "gamma" not in reg
    with pytest.raises(UnknownNameError, match=r"unknown thing 'alpah'; did you mean 'alpha'\?.*\['alpha', 'beta'\]"):
        reg["alpah"]
    e = pytest.raises(KeyError, lambda: reg["zzz"]).value
    assert isinstance(e, ValueError) and "did you mean" not in str(e)
    reg.unregister("alpha")
    assert reg.names() == ("beta",)
    with pytest.raises(UnknownNameError):
        reg.unregister("alpha")


def test_registry_imports_a_path_target_on_first_access_and_builds_once():
    built = []
    reg: Registry[object] = Registry("kind", build=lambda name, obj: built.append(name) or (name, obj),
                                     package="sago_engine")
    reg.register("sqrt", "math:sqrt")
    reg.register("rel", ".seeds:stable_hash")  # relative to ``package``
    assert built == []  # nothing imported or built before first use
    import math

    from sago_engine.seeds import stable_hash

    assert reg["sqrt"] == ("sqrt", math.sqrt) and reg["sqrt"] is reg["sqrt"] and built == ["sqrt"]
    assert reg["rel"] == ("rel", stable_hash)


def test_families_and_backends_are_registries():
    assert isinstance(FAMILIES, Registry) and isinstance(BACKENDS, Registry)
    assert list(BACKENDS) == ["hf_local", "openai", "openai_compatible", "anthropic", "gemini", "hybrid"]
    with pytest.raises(ValueError, match="did you mean 'gemini'"):
        BACKENDS["gemeni"]
    with pytest.raises(ValueError, match="already registered"):
        BACKENDS.register("hybrid", ".hybrid:HybridBackend")


# ---------------------------------------------------------------- the axis registry
def test_axis_specs_are_the_papers_six_axes_and_every_view_reads_them():
    assert types.AXES == AXIS_SPECS.names() == ("cos", "bleu", "bert", "prob", "ent", "mr")
    assert types.DEFAULT_NORMALIZERS == {"cos": 2.0, "bleu": 100.0, "bert": 1.0, "prob": 250.0, "ent": 10.0, "mr": 1.0}
    assert scoring.resolve_normalizers() == types.DEFAULT_NORMALIZERS
    assert [types.axis_label(a) for a in types.AXES] == ["Δ-Cos", "Δ-BLEU", "Δ-BERT", "Δ-Prob", "Δ-Ent", "Δ-MR"]
    assert types.AXIS_LABELS == {a: AXIS_SPECS[a].label for a in types.AXES}
    assert types.WHITE_BOX_AXES == {"cos", "prob", "ent"}
    assert NOISE_TOL == {"cos": 1e-6, "bleu": 1e-9, "bert": 1e-6, "prob": 1e-4, "ent": 1e-5, "mr": 0.0}
    assert palette.AXIS_COLORS == {a: AXIS_SPECS[a].color for a in types.AXES}
    assert len(set(palette.AXIS_COLORS.values())) == 6
    assert types.spec_of("cos@user_mean") is AXIS_SPECS["cos"] and types.axis_label("bert@rescaled").startswith("Δ-BERT")
    for spec in AXIS_SPECS.values():
        assert spec.needs in NEEDS and (spec.result_field is None) == (not spec.white_box)
        lo, hi = spec.value_range
        assert lo < hi and spec.unit and spec.direction and spec.definition
    assert [a for a in types.AXES if AXIS_SPECS[a].response_stat] == ["prob", "ent"]
    assert [a for a in types.AXES if AXIS_SPECS[a].needs_variant] == ["mr"]
    with pytest.raises(ValueError, match="unknown axis 'blue' in normalizers; did you mean 'bleu'"):
        scoring.resolve_normalizers({"blue": 1.0})


def test_register_axis_refuses_option_names_unknown_needs_and_duplicates():
    spec = AXIS_SPECS["bleu"]
    fields = {k: getattr(spec, k) for k in AxisSpec.__dataclass_fields__}
    with pytest.raises(ValueError, match="must not contain '@'"):
        register_axis(AxisSpec(**{**fields, "name": "bleu@x"}))
    with pytest.raises(ValueError, match="needs must be one of"):
        register_axis(AxisSpec(**{**fields, "name": "toy", "needs": "vibes"}))
    with pytest.raises(ValueError, match="already registered"):
        register_axis(spec)
    assert "toy" not in AXIS_SPECS


def _result(text, seed, white=True):
    rng = np.random.default_rng(seed)
    r = GenerationResult(text=text, n_tokens=3)
    if white:
        r.token_logprobs, r.token_entropies = -rng.random(3) * 4, rng.random(3) * 2
        r.hidden_last = rng.normal(size=(4, 6)).astype(np.float32)
    return r


def test_each_axis_delta_function_equals_the_axis_functions():
    """``AxisSpec.delta`` over (reply, base reply) pairs gives, element by element, what the
    per-axis functions give for one base reply and its variants' replies."""
    base = _result("Paris is the capital of France.", 0)
    replies = [_result("Paris.", 1), _result("The capital of France is Paris.", 2),
               _result("Paris is the capital of France.", 0), _result("PARIS IS THE CAPITAL!", 3)]
    grid = full_grid()
    variants = make_variants("p", "What is the capital of France?", [grid[0], grid[80], grid[100], grid[-1]], 7)
    bases = [base] * len(replies)
    texts = [r.text for r in replies]
    expect = {
        "cos": delta_cos(np.stack([r.hidden_last for r in replies]), base.hidden_last),
        "bleu": delta_bleu(texts, base.text),
        "bert": delta_bert(texts, base.text),
        "prob": delta_prob([r.seq_logprob for r in replies], base.seq_logprob),
        "ent": delta_ent([r.mean_entropy for r in replies], base.mean_entropy),
        "mr": delta_mr(texts, variants, base.text),
    }
    for a in types.AXES:
        got = delta_fn(a)(replies, bases, variants)
        assert got.dtype == np.float64 and got.shape == (4,)
        np.testing.assert_array_equal(got, expect[a], err_msg=a)
        assert got[2] == 0.0  # the same reply: exactly 0
    nan = delta_fn("cos")([_result("x", 1, white=False)], [base])
    assert np.isnan(nan).all() and np.isnan(delta_fn("prob")([_result("x", 1, white=False)], [base])).all()
    with pytest.raises(ValueError, match="needs the variant"):
        delta_fn("mr")(replies, bases)
    with pytest.raises(ValueError, match="replies vs"):
        delta_fn("bleu")(replies, bases[:2])
    with pytest.raises(KeyError):
        delta_fn("cos@user_mean")


def test_unavailable_reasons_come_from_what_the_axis_needs():
    from sago_engine.measure.pipeline import _unavailable_reason

    base, res, text_only = _result("a b", 0), _result("a c", 1), _result("a c", 1, white=False)
    caps = frozenset({"cos", "prob", "ent"})
    assert all(_unavailable_reason(a, caps, base, res) is None for a in types.AXES)
    for a in ("cos", "prob", "ent"):
        assert _unavailable_reason(a, frozenset(), base, res) == NEEDS[AXIS_SPECS[a].needs].lacks
        assert _unavailable_reason(a, caps, base, text_only) == NEEDS[AXIS_SPECS[a].needs].missing
    assert _unavailable_reason("cos", frozenset(), base, res) == "backend exposes no activations"
    assert _unavailable_reason("ent", caps, base, text_only) == "no entropies returned"
    spent = GenerationResult(text="", finish_reason="length")
    assert _unavailable_reason("bleu", caps, base, spent).startswith("no visible reply (variant)")
