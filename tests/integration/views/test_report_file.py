"""`sago report STORE --html/--json`: the numbers equal a recomputation from the store's raw Δ̃ rows, the HTML
shows them, opens in chromium with the network off (no request but the file itself) and stays inert on the
hostile-store corpus (no script, no fetch, the payload shown as text)."""

from __future__ import annotations

import json
import math
import re
import urllib.parse

import duckdb
import pytest

from precompute.__main__ import main as runner_main
from precompute.report_file import MAX_TEXT, esc
from tests.support.browser import browser_page, require_chromium
from tests.support.factories import make_store


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    store = make_store(tmp / "s.duckdb", models=("model-a", "model-b"), datasets=("truthfulqa", "nq_open"),
                       n_prompts=6, n_variants=3, seed=3, missing_axes={"model-b": ["cos"]})
    _add_noise_floor(store, "run-model-a")
    assert runner_main(["report", str(store), "--html", str(tmp / "r.html"), "--json", str(tmp / "r.json"),
                        "--resamples", "200"]) == 0
    return store, json.loads((tmp / "r.json").read_text(encoding="utf-8")), (tmp / "r.html")


def _add_noise_floor(store, run_id: str) -> None:
    """Base repeats' Δ̃ for one run: two repeats of the first four prompts of each dataset, every axis (one row
    unavailable); the other model has none."""
    con = duckdb.connect(str(store))
    pids = con.execute("SELECT prompt_id, dataset FROM prompts ORDER BY prompt_id").fetchall()
    axes = [a for (a,) in con.execute("SELECT DISTINCT axis FROM deltas ORDER BY axis").fetchall()]
    rows = [(run_id, d, pid, k, a, 0.01 * (i + k), 0.01 * (i + k) + 0.003 * j, (i, k, j) != (0, 1, 0), None)
            for i, (pid, d) in enumerate(pid for pid in pids if int(pid[0].rsplit(":", 1)[1]) < 4)
            for k in (1, 2) for j, a in enumerate(axes)]
    con.executemany("INSERT INTO noise_floor VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.close()


def _raw_floor(store) -> dict[tuple[str, str], list[float]]:
    """f(i) = sqrt(mean over available repeats of Δ̃²) per prompt, listed per (model, axis), from the raw rows."""
    con = duckdb.connect(str(store), read_only=True)
    rows = con.execute("""SELECT r.model, n.prompt_id, n.axis, n.delta_norm FROM noise_floor n JOIN runs r USING (run_id)
                          WHERE n.available""").fetchall()
    con.close()
    acc: dict[tuple[str, str, str], list[float]] = {}
    for model, pid, axis, dn in rows:
        acc.setdefault((model, axis, pid), []).append(dn)
    out: dict[tuple[str, str], list[float]] = {}
    for (model, axis, _), v in acc.items():
        out.setdefault((model, axis), []).append(math.sqrt(sum(x * x for x in v) / len(v)))
    return out


def _raw_scores(store) -> dict[tuple[str, str, str], float]:
    """s_X(i) = sqrt(mean Δ̃²) over kept variants with an available Δ̃, from the raw rows (SAGO §Notation)."""
    con = duckdb.connect(str(store), read_only=True)
    rows = con.execute("""SELECT r.model, d.prompt_id, d.axis, d.delta_norm FROM deltas d JOIN runs r USING (run_id)
                          JOIN variants v USING (variant_id) WHERE d.available AND v.kept""").fetchall()
    con.close()
    acc: dict[tuple[str, str, str], list[float]] = {}
    for model, pid, axis, dn in rows:
        acc.setdefault((model, pid, axis), []).append(dn)
    return {k: math.sqrt(sum(x * x for x in v) / len(v)) for k, v in acc.items()}


def test_sgs_and_pairs_equal_a_recomputation_from_raw_rows(written):
    store, numbers, _ = written
    s = _raw_scores(store)
    assert numbers["schema"] == "sago-report/1"
    got = {(r["model"], r["axis"]): r for r in numbers["sgs"]}
    want_keys = {(m, a) for m, _, a in s}
    assert set(got) == want_keys and ("model-b", "cos") not in got  # n/a axis: no row, never 0
    for (m, a), r in got.items():
        vals = [v for (mm, _, aa), v in s.items() if (mm, aa) == (m, a)]
        assert r["sgs"] == pytest.approx(sum(vals) / len(vals), rel=1e-9)
        assert r["n_prompts"] == len(vals) == 12
        assert r["lo"] <= r["sgs"] <= r["hi"] and r["verdict"] in ("above ε", "not above ε")
    for r in numbers["pairwise"]:
        shared = [p for (m, p, a) in s if m == r["model_a"] and a == r["axis"] and (r["model_b"], p, a) in s]
        diff = sum(s[(r["model_a"], p, r["axis"])] - s[(r["model_b"], p, r["axis"])] for p in shared) / len(shared)
        assert r["diff"] == pytest.approx(diff, rel=1e-9, abs=1e-12) and r["n_prompts"] == len(shared)
    assert {r["axis"] for r in numbers["pairwise"]} == {a for _, a in want_keys} - {"cos"}
    for axis in {a for _, a in want_keys}:
        top = [w for w in numbers["worst"] if w["axis"] == axis and w["rank"] == 1][0]
        assert top["s"] == pytest.approx(max(v for (_, _, a), v in s.items() if a == axis), rel=1e-9)
        assert top["prompt_text"].startswith("Question ")
    assert [r["model"] for r in numbers["runs"]] == ["model-a", "model-b"]


def test_per_dataset_sgs_and_noise_floor_equal_a_recomputation_from_raw_rows(written):
    store, numbers, path = written
    s = _raw_scores(store)
    text = path.read_text(encoding="utf-8")
    got = {(r["model"], r["dataset"], r["axis"]): r for r in numbers["sgs_by_dataset"]}
    assert set(got) == {(m, p.split(":")[0], a) for m, p, a in s}  # the factory's prompt ids are "<dataset>:<i>"
    for (m, d, a), r in got.items():
        vals = [v for (mm, p, aa), v in s.items() if (mm, aa) == (m, a) and p.startswith(f"{d}:")]
        assert r["sgs"] == pytest.approx(sum(vals) / len(vals), rel=1e-9) and r["n_prompts"] == len(vals) == 6
        assert r["lo"] <= r["sgs"] <= r["hi"] and f"{r['sgs']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]" in text
    floor = _raw_floor(store)
    rows = {(r["model"], r["axis"]): r for r in numbers["noise_floor"]}
    assert set(rows) == {(m, a) for m, _, a in s}
    for (m, a), r in rows.items():
        if m == "model-b":  # no repeats: not measured, never 0
            assert r["floor"] is None and r["n_paired"] == 0 and r["p"] is None
            continue
        assert r["floor"] == pytest.approx(sum(floor[(m, a)]) / len(floor[(m, a)]), rel=1e-9)
        assert r["n_paired"] == len(floor[(m, a)]) == 8 and f"{r['floor']:.3f}" in text
    assert "not measured" in text and "No noise floor measured" not in text


def test_html_shows_the_same_numbers_and_nothing_active(written):
    _, numbers, path = written
    text = path.read_text(encoding="utf-8")
    for r in numbers["sgs"]:
        assert f"{r['sgs']:.3f}" in text and f"{r['lo']:.3f}" in text
    for r in numbers["pairwise"]:
        assert f"{r['diff']:.3f}" in text
    assert "<script" not in text.lower() and "Content-Security-Policy" in text
    assert text.count("<svg") == 2  # the SGS chart and the pairwise chart, inline
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)


def test_store_text_is_escaped_and_cut():
    assert esc('<img src=x onerror="a()">') == "&lt;img src=x onerror=&quot;a()&quot;&gt;"
    long = esc("x" * (MAX_TEXT + 5))
    assert long.endswith("(5 more characters)") and esc(None) == "—"


def test_html_opens_offline_in_chromium(written):
    require_chromium()
    _, numbers, path = written
    with browser_page(1300, 1000) as page:
        page.context.set_offline(True)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        assert page.locator("svg").count() == 2
        assert page.locator("table").nth(0).locator("tbody tr").count() == len(numbers["sgs"])
        body = page.inner_text("body")
    assert requests == [path.as_uri()]
    assert "SGS per model × axis" in body and "Model vs model" in body and "Worst prompts" in body


def test_report_is_inert_on_the_hostile_corpus(tmp_path):
    """Every text column of the payload store holds markup, scripts and URLs to a pixel logger: the report
    shows them as text, nothing runs, nothing is fetched; stores the store layer refuses are refused."""
    require_chromium()
    from tests.support.hostile_stores import PWNED, SECRET, PixelLogger, build_corpus

    with PixelLogger() as pixel:
        corpus = build_corpus(tmp_path, pixel.port)
        out = tmp_path / "payload.html"
        assert runner_main(["report", str(corpus.stores["payload"]), "--html", str(out), "--json",
                            str(tmp_path / "p.json"), "--resamples", "50"]) == 0
        for name in corpus.refused:
            assert runner_main(["report", str(corpus.stores[name]), "--json", str(tmp_path / f"{name}.json")]) == 2
            assert not (tmp_path / f"{name}.json").exists()
        text = out.read_text(encoding="utf-8")
        assert "<script" not in text.lower() and SECRET not in text
        assert [c for c in RAW_CONTROLS if c in text] == []  # the payload's ESC, BEL, RLO, RLM: U+FFFD
        huge = tmp_path / "huge.html"  # 1 MB strings: each shown cut, the file stays small
        assert runner_main(["report", str(corpus.stores["huge"]), "--html", str(huge), "--resamples", "50"]) == 0
        assert huge.stat().st_size < 400_000 and "more characters)" in huge.read_text(encoding="utf-8")
        with browser_page(1400, 1200) as page:
            left: list[str] = []

            def route(r):
                if urllib.parse.urlparse(r.request.url).scheme not in ("file", "data"):
                    left.append(r.request.url)
                return r.continue_()

            page.route("**/*", route)
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(out.as_uri())
            page.wait_for_timeout(500)
            assert page.evaluate(f"window.{PWNED}") is None
            assert page.evaluate("document.scripts.length") == 0
            assert page.evaluate("document.querySelectorAll('img, iframe, object, embed, a[href]').length") == 0
            assert "sago-payload" in page.inner_text("body")  # shown, as text
    assert dialogs == [] and pixel.hits == []
    assert all(u.startswith("http://127.0.0.1") for u in left) and left == []


def test_json_is_the_same_bytes_when_written_again(written, tmp_path):
    """Two reports of one store are identical (no timestamp, a stable order): a diff shows only real changes."""
    store, _, _ = written
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert runner_main(["report", str(store), "--json", str(out), "--resamples", "200"]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert runner_main(["report", str(tmp_path / "missing.duckdb"), "--json", str(a)]) == 2


#: Terminal controls and bidi marks (an RLO reverses what follows it): the report shows U+FFFD in their place.
CONTROLS = "Hello \x1b[2J\x07 there \u202e evil \u200f"
RAW_CONTROLS = ("\x1b", "\x07", "\u202e", "\u200f")


def test_report_html_shows_control_and_bidi_characters_as_replacements(tmp_path):
    store = make_store(tmp_path / "s.duckdb", models=("model-a", "model-b"), datasets=("truthfulqa",),
                       n_prompts=4, n_variants=2, seed=5)
    con = duckdb.connect(str(store))
    con.execute("UPDATE prompts SET text = ? || text", [CONTROLS])
    con.execute("UPDATE variants SET text = ? || text", [CONTROLS])
    con.execute("UPDATE responses SET response = ? || response", [CONTROLS])
    con.execute("UPDATE runs SET model = model || ?", [" \u202eevil\u200f\x1b[31m"])
    con.close()
    out = tmp_path / "r.html"
    assert runner_main(["report", str(store), "--html", str(out), "--resamples", "50"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "Hello \ufffd[2J\ufffd there \ufffd evil \ufffd" in text  # the worst cases' texts, shown
    assert "No noise floor measured" in text  # no base repeats in this store
    assert [c for c in RAW_CONTROLS if c in text] == []  # tables, charts' SVG labels and texts alike
    assert esc("a\u202eb\u2066c\x9bd\te\nf") == "a\ufffdb\ufffdc\ufffdd\te\nf"
