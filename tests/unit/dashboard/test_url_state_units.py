"""``dashboard.urlstate`` unit by unit: parsing and formatting URL text, and ``restore`` / ``publish``
in a real Streamlit script run (``AppTest.from_function``, no page, no store): a pasted link wins, the
session's own echo is ignored, values a widget does not offer are dropped, only registered parameters
are written."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import urlstate
from dashboard.urlstate import _format, _number, _parse


# ------------------------------------------------------------------ text ↔ values
def test_number_is_finite_float_text_only():
    assert _number("1.5") == 1.5 and _number("-2") == -2.0 and _number("1e3") == 1000.0
    for bad in ("inf", "-inf", "nan", "1e309", "Infinity"):
        with pytest.raises(ValueError, match="not a finite number"):
            _number(bad)
    with pytest.raises(ValueError):
        _number("abc")


def test_parse_each_kind():
    assert _parse("list", ["a", "b", "a"]) == ["a", "b", "a"]
    assert _parse("floatlist", ["1", "x", "inf", "2.5", "1e309", "-0.5"]) == [1.0, 2.5, -0.5]  # bad elements dropped
    assert _parse("floatlist", ["nan"]) == []
    assert _parse("int", ["1", "2", "7"]) == 7 and isinstance(_parse("int", ["7.0"]), int)  # the last value wins
    assert _parse("int", ["-3"]) == -3
    with pytest.raises(ValueError, match="not a whole number"):
        _parse("int", ["2.5"])
    with pytest.raises(ValueError):
        _parse("int", ["inf"])
    assert _parse("float", ["9", "0.25"]) == 0.25
    with pytest.raises(ValueError):
        _parse("float", ["nan"])
    for yes in ("1", "true", "TRUE", "Yes", "on", "ON"):
        assert _parse("bool", [yes]) is True, yes
    for no in ("0", "false", "no", "off", "", "2"):
        assert _parse("bool", [no]) is False, no
    assert _parse("bool", ["1", "0"]) is False
    assert _parse("str", ["a", "b", "c"]) == "c"


def test_format_each_kind():
    for kind in urlstate.KINDS:
        assert _format(kind, None) == []
    assert _format("list", ["a", 2.0, 0.30000000000000004, 3]) == ["a", "2", "0.3", "3"]
    assert _format("floatlist", [0.5, 2.0, 1e-07]) == ["0.5", "2", "1e-07"]
    assert _format("bool", True) == ["1"] and _format("bool", False) == []
    assert _format("float", 2) == ["2"] and _format("float", 0.1 + 0.2) == ["0.3"]
    assert _format("int", 7) == ["7"] and _format("str", "x y") == ["x y"]


def test_restore_refuses_unknown_kinds_and_unbounded_numbers():
    with pytest.raises(ValueError, match="unknown kind 'date'"):
        urlstate.restore("d", "k", "date")
    for kind in urlstate.NUMERIC_KINDS:
        for kw in ({}, {"lo": 0.0}, {"hi": 1.0}):
            with pytest.raises(ValueError, match=f"URL parameter 'n' \\({kind}\\) needs choices or a range"):
                urlstate.restore("n", "k", kind, **kw)


# ------------------------------------------------------------------ restore / publish in a script run
def _page(fields):
    """A page: restore every field (param, key, kind, keywords), then publish; the fields can be replaced
    between runs through ``session_state["_test_fields"]``."""
    import streamlit as st

    from dashboard import urlstate

    urlstate.start_run()
    for param, key, kind, kw in st.session_state.get("_test_fields", fields):
        urlstate.restore(param, key, kind, **kw)
    urlstate.publish()


def _app(fields, params=None) -> AppTest:
    at = AppTest.from_function(_page, kwargs={"fields": fields}, default_timeout=60)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


def _url(at) -> dict:
    """The query string as {param: [values]} (a single value as a one-element list)."""
    return {k: (list(v) if isinstance(v, list) else [v]) for k, v in at.query_params.items()}


def _state(at, key):
    return at.session_state[key] if key in at.session_state else None


FIELDS = [("n", "k_n", "int", {"lo": 0, "hi": 10, "default": 3}),
          ("x", "k_x", "floatlist", {"lo": 0.0, "hi": 1.0}),
          ("m", "k_m", "list", {"choices": ["a", "b", "c"]}),
          ("s", "k_s", "str", {"choices": ["p", "q"], "default": "p"}),
          ("f", "k_f", "bool", {})]


def test_a_link_is_applied_and_published_back():
    at = _app(FIELDS, {"n": "10", "x": ["0", "0.5", "1", "1.5", "-0.1", "nan"], "m": ["c", "z", "a"], "s": "q",
                       "f": "yes", "other": "kept"})
    assert not at.exception
    assert [_state(at, k) for k in ("k_n", "k_x", "k_m", "k_s", "k_f")] == [10, [0.0, 0.5, 1.0], ["c", "a"], "q", True]
    assert _url(at) == {"n": ["10"], "x": ["0", "0.5", "1"], "m": ["c", "a"], "s": ["q"], "f": ["1"], "other": ["kept"]}
    assert at.session_state["_url_fields"] == {"n": ("k_n", "int"), "x": ("k_x", "floatlist"), "m": ("k_m", "list"),
                                               "s": ("k_s", "str"), "f": ("k_f", "bool")}
    at0 = _app(FIELDS, {"n": "0"})
    assert _state(at0, "k_n") == 0


@pytest.mark.parametrize("link", [{"n": "11"}, {"n": "-1"}, {"n": "abc"}, {"n": "2.5"}, {"n": "inf"}, {"s": "r"}])
def test_values_a_widget_does_not_offer_are_dropped(link):
    at = _app(FIELDS, link)
    assert not at.exception
    assert _state(at, "k_n") == 3 and _state(at, "k_s") == "p"  # the defaults
    assert _url(at)["n"] == ["3"] and _url(at)["s"] == ["p"]


def _toasts(at) -> list[str]:
    return [t.value for t in at.toast]


def test_what_a_link_asks_for_and_does_not_get_is_said_in_a_toast():
    at = _app(FIELDS, {"n": "11", "x": ["0.5", "abc", "2"], "m": ["c", "z"], "s": "q", "f": "yes"})
    assert _toasts(at) == ["Link parameter n: 11 not offered here, so not applied.",
                           "Link parameter x: abc, 2 not offered here, so not applied.",
                           "Link parameter m: z not offered here, so not applied."]
    assert _state(at, "k_x") == [0.5] and _state(at, "k_m") == ["c"] and _state(at, "k_s") == "q"
    assert _toasts(at.run()) == []  # said once: the rerun reads the session's own echo
    assert _toasts(_app(FIELDS, {"n": "10", "x": ["0", "1"], "m": ["a"], "s": "p", "f": "0"})) == []
    assert _toasts(_app(FIELDS)) == []


def test_a_dropped_value_is_shortened_and_shown_literally():
    long = "*" + "a" * 60
    at = _app(FIELDS, {"s": long, "m": [f"z{i}" for i in range(7)]})
    s_toast, m_toast = _toasts(at)[1], _toasts(at)[0]
    assert s_toast == f"Link parameter s: \\*{'a' * 39}… not offered here, so not applied."
    assert m_toast == "Link parameter m: z0, z1, z2, z3, z4 and 2 more not offered here, so not applied."


def test_the_toast_shortens_past_forty_characters_and_counts_past_five_values():
    forty, fortyone = "b" * 40, "b" * 41
    assert _toasts(_app(FIELDS, {"s": forty})) == [f"Link parameter s: {forty} not offered here, so not applied."]
    assert _toasts(_app(FIELDS, {"s": fortyone})) == [f"Link parameter s: {forty}… not offered here, so not applied."]
    five = "Link parameter m: z0, z1, z2, z3, z4"
    assert _toasts(_app(FIELDS, {"m": [f"z{i}" for i in range(5)]})) == [f"{five} not offered here, so not applied."]
    assert _toasts(_app(FIELDS, {"m": [f"z{i}" for i in range(6)]})) == [
        f"{five} and 1 more not offered here, so not applied."]


def test_one_bound_alone_limits_a_field_with_choices():
    fields = [("c", "k_c", "float", {"choices": [0.5, 2.0], "hi": 1.0}), ("d", "k_d", "float", {"choices": [0.5, 2.0], "lo": 1.0})]
    at = _app(fields, {"c": "2", "d": "0.5"})
    assert _state(at, "k_c") is None and _state(at, "k_d") is None and len(_toasts(at)) == 2
    at = _app(fields, {"c": "0.5", "d": "2"})
    assert (_state(at, "k_c"), _state(at, "k_d"), _toasts(at)) == (0.5, 2.0, [])


def test_a_hostile_link_value_renders_inert_in_its_toast():
    from tests.support.rendered import active_html

    at = _app(FIELDS, {"s": "![p](http://127.0.0.1:9/p.png)", "m": ["<img src=x onerror=alert(1)>", "[a](javascript:x)"]})
    assert len(_toasts(at)) == 2 and all(active_html(t) == [] for t in _toasts(at)), _toasts(at)


def test_without_a_link_defaults_are_seeded_and_nothing_else_is_written():
    at = _app(FIELDS)
    assert not at.exception
    assert _state(at, "k_n") == 3 and _state(at, "k_s") == "p"
    assert _state(at, "k_x") is None and _state(at, "k_m") is None and _state(at, "k_f") is None
    assert _url(at) == {"n": ["3"], "s": ["p"]}
    at = _app([("c", "k_c", "str", {"default": "dflt"}), ("e", "k_e", "str", {})])
    assert _state(at, "k_c") == "dflt" and _state(at, "k_e") is None and _url(at) == {"c": ["dflt"]}


def test_the_sessions_own_echo_is_ignored_and_an_edited_link_wins():
    at = _app(FIELDS, {"n": "7", "m": ["a", "b"], "f": "1"})
    at.session_state["k_n"] = 5  # the user moves the widget: the URL still says 7 until publish
    at.session_state["k_m"] = ["b"]
    at.session_state["k_f"] = False
    at.run()
    assert [_state(at, k) for k in ("k_n", "k_m", "k_f")] == [5, ["b"], False]  # not reset to the echo, nor the default
    assert _url(at) == {"n": ["5"], "m": ["b"], "s": ["p"]}  # f removed: False is no parameter
    at.query_params["n"] = "9"  # an edited link
    at.run()
    assert _state(at, "k_n") == 9 and _url(at)["n"] == ["9"]


def test_a_parameter_not_registered_in_a_run_keeps_its_echo():
    """A run that registers fewer fields (another page) leaves the others' parameters and their echo alone."""
    at = _app(FIELDS, {"n": "7", "s": "q"})
    at.session_state["_test_fields"] = [FIELDS[3]]  # a page with s only
    at.session_state["k_s"] = "p"
    at.run()
    assert _url(at) == {"n": ["7"], "s": ["p"]}  # n left as it was
    at.session_state["k_n"] = 4  # n changed while its page was not shown
    del at.session_state["_test_fields"]
    at.run()
    assert _state(at, "k_n") == 4 and _url(at)["n"] == ["4"]  # "7" was this session's echo, not a new link


def test_publish_with_nothing_registered_writes_nothing():
    def page():
        from dashboard import urlstate

        urlstate.publish()

    at = AppTest.from_function(page, default_timeout=60)
    at.query_params["n"] = "1"
    at.run()
    assert not at.exception and _url(at) == {"n": ["1"]}


def test_restore_without_start_run_registers_its_field():
    def page():
        import streamlit as st

        from dashboard import urlstate

        urlstate.restore("a", "k_a", default="x")  # kind "str" by default
        urlstate.restore("b", "k_b", "int", choices=[1, 2], default=2)
        st.session_state["seen"] = dict(st.session_state["_url_fields"])
        urlstate.publish()

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    assert at.session_state["seen"] == {"a": ("k_a", "str"), "b": ("k_b", "int")}
    assert _url(at) == {"a": ["x"], "b": ["2"]}
