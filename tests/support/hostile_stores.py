"""A corpus of hostile sago stores, built by code at test time (nothing binary is committed).

``build_corpus(root, port)`` writes, under ``root``:

- ``secret.txt`` — a file OUTSIDE the shared folder holding ``SECRET``;
- ``share/payload.duckdb`` — a complete store (two models, option axes, judge verdicts, replies,
  base repeats, noise floor, API usage, templates, meta) whose every text column of every
  table holds ``payload(port)``: a CSV formula, a Markdown image and link, raw HTML (``<img>``,
  ``<script>``, ``<a href="javascript:…">``), a ``{{template}}``, LaTeX, a Streamlit colour
  directive, a bare URL, control and bidi-override characters. Key columns carry it
  consistently (the tables still join); columns with a fixed vocabulary (axis, family,
  position, status, …) keep their valid rows and gain extra rows whose value is the payload.
  Some numbers are non-finite (NaN, ±inf in Δ, Δ̃, seq_logprob, entropy, latency, semantic
  score, cost);
- ``share/huge.duckdb`` — 1 MB strings (a prompt, its variants, a reply, a reason, a judge answer,
  an error) and a 10,000-word prompt with a punctuation-noise variant;
- ``share/controls.duckdb`` — the payload store again with ``controls_payload(port)``: every C0
  control (NUL included), DEL, C1 controls, line/paragraph separators, bidi embeddings and
  isolates, zero-width characters, and what a reply's lone surrogate becomes (U+FFFD) beside the
  escaped form ``\\ud83d`` a raw JSON reply carries (DuckDB holds only valid UTF-8, so a store
  cannot hold a lone surrogate itself);
- ``share/numbers.duckdb`` — huge finite numbers (±1e308, 5e-324, ``n_tokens`` 2³¹ − 1, usage 2⁶³ − 1) in Δ, Δ̃,
  log-probs, latency, semantic score, usage and cost, and one label carried by both runs;
- ``share/view.duckdb`` — ``prompts`` replaced by a VIEW that appends ``read_text(secret.txt)``;
- ``share/macro.duckdb`` — user macros that shadow built-in functions sago's SQL calls and
  return the secret file.

The pixel logger (``PixelLogger``) listens on 127.0.0.1:``port``, where every URL of the payload
points: a page that makes the browser fetch anything from a store string shows up in its log.
"""

from __future__ import annotations

import http.server
import json
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from sago_engine.store import open_store, schema, suffstats
from sago_engine.types import OPTION_SEP
from tests.support.factories import add_judge_verdicts, add_option_axes, make_store

#: What the secret file outside the shared folder holds; it must never reach a page.
SECRET = "TOP-SECRET-server-file-7f3c"
#: A substring of every payload (coverage checks look for it).
MARKER = "sago-payload"
#: Globals a payload script would set if anything of it ran.
PWNED = "__sago_pwned"


def payload(port: int) -> str:
    """One string with every kind of active content, all URLs on 127.0.0.1:``port`` (the logger).

    Starts with a spreadsheet formula (CSV injection needs the first character); has no ``@``
    (the option-axis separator), so it can also be an option name.
    """
    u = f"http://127.0.0.1:{port}"
    p = (f'=HYPERLINK("{u}/csv","x") {MARKER} ![pixel]({u}/md.png) [Download the corrected store]({u}/link) '
         f'<img src="{u}/html.png" onerror="window.{PWNED}=1"> <script>window.{PWNED}=1</script> '
         f'<a href="javascript:window.{PWNED}=1">js</a> [js](javascript:window.{PWNED}=1) '
         f'<a href="{u}/a">a</a> {{{{7*7}}}} $\\href{{{u}/tex}}{{t}}$ :red[red] :material/home: '
         f'{u}/auto <b>b</b> &lt;i&gt; \u202eevil\u202c \u0007\u001b[31m')
    assert OPTION_SEP not in p
    return p


#: Characters that must never act on a terminal or a page: C0 (NUL included) and DEL, C1, line and
#: paragraph separators, bidi embeddings/overrides/isolates, zero-width characters and the BOM.
CONTROLS = ("".join(chr(c) for c in range(0x00, 0x20)) + "\x7f" + "".join(chr(c) for c in range(0x80, 0xA0))
            + "\u2028\u2029\u202a\u202b\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200e\u200f\ufeff")


def controls_payload(port: int) -> str:
    """``payload(port)`` followed by every ``CONTROLS`` character and what a lone surrogate in a
    reply becomes: U+FFFD (``replytext``) and the JSON escape ``\\ud83d`` as text."""
    return f"{payload(port)} ctl[{CONTROLS}] half-emoji[\ufffd \\ud83d \\xED\\xA0\\xBD]"


#: Columns with a fixed vocabulary: their rows stay valid, an extra row carries the payload.
ENUM_COLUMNS = {"deltas": ("axis",), "variants": ("family", "subtype", "position"), "runs": ("status", "backend"),
                "mirroring_verdicts": ("response_of",), "noise_floor": ("axis",), "sample_deltas": ("axis",),
                "templates": ("kind",),
                "meta": ("key",), "correctness": ("verdict", "scorer")}
#: meta keys that must stay as they are for the file to be a sago store at all.
_META_KEEP = ("app", "schema_version", "layout_version")


@dataclass
class Corpus:
    """Paths of a built corpus: the shared folder, each store by name, the secret file, the payload."""

    share: Path
    secret_file: Path
    payload: str
    stores: dict[str, Path] = field(default_factory=dict)
    #: stores the store layer must refuse (name → what makes them foreign)
    refused: dict[str, str] = field(default_factory=dict)


def build_corpus(root: Path, port: int) -> Corpus:
    """Write the corpus under ``root`` (see the module docstring); returns its paths."""
    share = root / "share"
    share.mkdir(parents=True, exist_ok=True)
    secret = root / "secret.txt"
    secret.write_text(SECRET + "\n")
    c = Corpus(share=share, secret_file=secret, payload=payload(port))
    c.stores["payload"] = payload_store(share / "payload.duckdb", c.payload)
    c.stores["controls"] = payload_store(share / "controls.duckdb", controls_payload(port))
    c.stores["numbers"] = numbers_store(share / "numbers.duckdb")
    c.stores["huge"] = huge_store(share / "huge.duckdb")
    c.stores["view"] = view_store(share / "view.duckdb", secret)
    c.stores["macro"] = macro_store(share / "macro.duckdb", secret)
    c.refused = {"view": "view `prompts`", "macro": "macro"}
    return c


# ---------------------------------------------------------------- the payload store
def _full_store(path: Path, models=("model-a", "model-b")) -> Path:
    """A valid store with rows in every table (the poisoning below then reaches every column)."""
    make_store(path, models=models, datasets=("truthfulqa", "nq_open"), n_prompts=3, n_variants=3, seed=5,
               missing_axes={models[1]: ["cos"]})
    add_option_axes(path, options={"cos": ("user_last",)})
    add_judge_verdicts(path, seed=1)
    with open_store(path, read_only=False) as st:
        runs = st.runs()
        con = st.con
        pids = [r[0] for r in con.execute("SELECT prompt_id FROM prompts ORDER BY prompt_id").fetchall()]
        ds = dict(con.execute("SELECT prompt_id, dataset FROM prompts").fetchall())
        con.execute("UPDATE runs SET decoding = ?, config = ?, semantic_filter = ?, encoder = ?, capabilities = ?, "
                    "versions = ?, origin = ?, model_source = 'zoo:x', weights_sha256 = 'abc', dtype = 'float32', "
                    "device = 'cpu', started_at = now(), finished_at = now()",
                    [json.dumps({"greedy": True, "max_new_tokens": 8}), json.dumps({"run": {"seed": 5}}),
                     json.dumps({"threshold": 0.22}), json.dumps({"name": "minilm"}), json.dumps(["text"]),
                     json.dumps({"sago": "0"}), json.dumps({"kind": "imported"})])
        con.execute("UPDATE prompts SET reference = ?, category = 'c'", [json.dumps({"answers": ["x"]})])
        con.execute("UPDATE variants SET generator = 'rule', meta = ?, skip_reason = 'none'",
                    [json.dumps({"tone": "negative"})])
        con.execute("UPDATE variants SET subtype = 'length', meta = ? WHERE family = 'structural'",
                    [json.dumps({"target_ratio": 0.5})])
        con.execute("UPDATE responses SET n_tokens = 3, seq_logprob = -2.5, mean_entropy = 1.5, latency_s = 0.1, "
                    "cos_per_layer = [0.9, 0.8], finish_reason = 'stop', request = 'req', raw_response = 'raw'")
        con.execute("UPDATE mirroring_verdicts SET error = 'none'")
        rows = []
        for run_id in runs["run_id"]:
            for pid in pids[:2]:
                rows.append({"response_id": f"{run_id}/{pid}/rep1", "run_id": run_id, "prompt_id": pid, "repeat": 1,
                             "response": "A repeat.", "n_tokens": 2, "seq_logprob": -1.0, "mean_entropy": 1.0,
                             "finish_reason": "stop", "latency_s": 0.1, "error": "none"})
        st.insert_df("base_repeats", pd.DataFrame(rows))
        st.insert_df("samples", pd.DataFrame([{"response_id": f"{r['response_id']}/s1", "run_id": r["run_id"],
                                               "prompt_id": r["prompt_id"], "variant_id": None, "sample": 1, "seed": 7,
                                               "response": "A sample.", "n_tokens": 2, "seq_logprob": -1.0,
                                               "mean_entropy": 1.0, "finish_reason": "stop", "latency_s": 0.1,
                                               "error": "none"} for r in rows]))
        nf = [{"run_id": r["run_id"], "dataset": ds[r["prompt_id"]], "prompt_id": r["prompt_id"], "repeat": 1,
               "axis": a, "delta": 0.01, "delta_norm": 0.01, "available": True, "reason": "repeat"}
              for r in rows for a in ("bleu", "mr")]
        st.insert_df("noise_floor", pd.DataFrame(nf))
        vid = dict(con.execute("SELECT prompt_id, min(variant_id) FROM variants GROUP BY ALL").fetchall())
        sd = [{"run_id": r["run_id"], "dataset": ds[r["prompt_id"]], "prompt_id": r["prompt_id"], "variant_id": v,
               "sample": 1, "response_id": f"{r['response_id']}/{v or 'base'}/s1", "axis": a, "delta": -40.0,
               "delta_norm": -0.4, "available": True, "reason": "sample"}
              for r in rows for v in (None, vid[r["prompt_id"]]) for a in ("bleu", "prob")]
        st.insert_df("sample_deltas", pd.DataFrame(sd))
        st.insert_df("units", pd.DataFrame([{"run_id": r, "prompt_id": p, "n_variants": 3}
                                            for r in runs["run_id"] for p in pids]))
        st.insert_df("templates", pd.DataFrame([{"template_id": "t1", "kind": "judge", "text": "Judge {reply}"}]))
        st.insert_df("run_usage", pd.DataFrame([{"run_id": r, "requests": 1, "cache_hits": 0, "retries": 0, "errors": 0,
                                                 "prompt_tokens": 5, "completion_tokens": 5, "cost_usd": 0.01,
                                                 "models_returned": json.dumps(["m"])} for r in runs["run_id"]]))
        resp = con.execute("SELECT response_id, run_id FROM responses LIMIT 4").fetchall()
        st.insert_df("api_responses", pd.DataFrame([{"response_id": i, "run_id": r, "model_returned": "m",
                                                     "finish_raw": "stop", "attempts": 1} for i, r in resp]))
        pv = con.execute("SELECT prompt_id, variant_id FROM variants LIMIT 2").fetchall()
        st.insert_df("imported_rows", pd.DataFrame([{"run_id": runs["run_id"].iloc[0], "source": "results/x.csv",
                                                     "row_index": k, "prompt_id": p_, "variant_id": v,
                                                     "columns": json.dumps({"response": "r"})}
                                                    for k, (p_, v) in enumerate(pv)]))
        replies = con.execute("""SELECT run_id, response_id, prompt_id, variant_id, NULL AS repeat FROM responses
                                 UNION ALL SELECT run_id, response_id, prompt_id, NULL, repeat FROM base_repeats
                                 ORDER BY response_id""").df()
        st.write_correctness(replies.assign(
            scorer="contains", scorer_version="squad-norm-1",
            verdict=[("correct", "wrong", "undecided", "unavailable")[k % 4] for k in range(len(replies))],
            score=[float(k % 2) for k in range(len(replies))], reason="why", raw="judge said"))
        con.execute("INSERT OR REPLACE INTO meta VALUES ('published_at', '2026-01-01 00:00'), ('status', 'running'), "
                    "('progress', '3/9')")
        st.insert_df("correctness", pd.DataFrame([{"run_id": r, "response_id": i, "prompt_id": p_, "variant_id": v,
                                                   "repeat": None, "scorer": "exact", "scorer_version": "1",
                                                   "verdict": "correct", "score": 1.0, "reason": "ok", "raw": "yes"}
                                                  for (i, r), (p_, v) in zip(resp, pv)]))
    return path


def _text_columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """(table, column, type) of every VARCHAR / JSON column of every base table."""
    return con.execute("""SELECT table_name, column_name, data_type FROM information_schema.columns
                          WHERE table_schema = 'main' AND (data_type = 'VARCHAR' OR data_type = 'JSON')
                          ORDER BY table_name, ordinal_position""").fetchall()


def text_columns(path: Path) -> list[tuple[str, str, str]]:
    """``_text_columns`` of the store at ``path`` (opened read-only)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return _text_columns(con)
    finally:
        con.close()


def _poison_json(value, p: str, i: int):
    if value is None:
        return json.dumps({"payload": p}) if i % 2 == 0 else None
    v = json.loads(value)
    if isinstance(v, dict):
        v["payload"] = p
    elif isinstance(v, list):
        v.append(p)
    else:
        v = {"payload": p, "value": v}
    return json.dumps(v)


def payload_store(path: Path, p: str) -> Path:
    """The payload store (module docstring)."""
    _full_store(path)
    con = duckdb.connect(str(path))
    try:
        stats = set(suffstats.STATS_TABLES)
        cols = [c for c in _text_columns(con) if c[0] not in stats]
        # extra rows first, copies of a valid row with one fixed-vocabulary column set to the payload
        for table, enum_cols in ENUM_COLUMNS.items():
            key = schema.KEYS.get(table, ())
            for col in enum_cols:
                if table == "meta":
                    con.execute("INSERT INTO meta VALUES (?, ?)", [p, p])
                    continue
                if table == "deltas":  # a delta of an unknown axis, beside the valid rows
                    con.execute(f"INSERT INTO deltas SELECT * REPLACE (? AS {col}) FROM deltas LIMIT 1", [p])
                    continue
                other = [k for k in key if k != col][:1] or [next(c[1] for c in cols if c[0] == table)]
                con.execute(f"INSERT INTO {table} SELECT * REPLACE (? AS {col}, {other[0]} || '#extra-{col}' "
                            f"AS {other[0]}) FROM {table} LIMIT 1", [p])
        # then every text column: keys and names prefixed consistently (the tables still join)
        for table, col, typ in cols:
            if table == "meta" and col == "value":
                con.execute(f"UPDATE meta SET value = ? || ' ' || value WHERE key NOT IN {_META_KEEP}", [p])
                continue
            if col in ENUM_COLUMNS.get(table, ()):
                continue
            if typ == "JSON":
                rows = con.execute(f"SELECT rowid, CAST({col} AS VARCHAR) FROM {table}").fetchall()
                for i, (rid, v) in enumerate(rows):
                    con.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", [_poison_json(v, p, i), rid])
                continue
            con.execute(f"UPDATE {table} SET {col} = CASE WHEN {col} IS NOT NULL THEN ? || ' ' || {col} "
                        f"WHEN rowid % 2 = 0 THEN ? END", [p, p])
        # an option axis named by the payload (Method choices shows option names), a variant whose
        # tone (from meta) is the payload, and non-finite numbers
        con.execute(f"INSERT INTO deltas SELECT * REPLACE ('cos{OPTION_SEP}' || ? AS axis) FROM deltas "
                    f"WHERE axis = 'cos{OPTION_SEP}user_last'", [p])
        con.execute("UPDATE variants SET meta = json_object('tone', ?) WHERE family = 'social_register'", [p])
        for table in ("responses", "base_repeats", "mirroring_verdicts"):  # the reply-boundary flags (VARCHAR[])
            con.execute(f"UPDATE {table} SET flags = [?, 'surrogates_replaced'] WHERE rowid % 2 = 0", [p])
        _non_finite(con)
        suffstats.materialise(con)
        for table, col, _typ in _text_columns(con):  # statistics rows of the fixed-vocabulary columns
            if table in stats and not con.execute(f"SELECT count(*) FROM {table} WHERE {col} LIKE ?",
                                                  [f"%{MARKER}%"]).fetchone()[0]:
                con.execute(f"INSERT INTO {table} SELECT * REPLACE (? AS {col}) FROM {table} LIMIT 1", [p])
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


def _non_finite(con: duckdb.DuckDBPyConnection) -> None:
    """NaN and ±inf in a few rows of each numeric measurement column (never in every row)."""
    for i, v in enumerate(("nan", "inf", "-inf")):
        con.execute(f"UPDATE deltas SET delta = '{v}'::DOUBLE WHERE rowid % 17 = {i}")
        con.execute(f"UPDATE deltas SET delta_norm = '{v}'::DOUBLE WHERE rowid % 19 = {i}")
        con.execute(f"UPDATE responses SET seq_logprob = '{v}'::DOUBLE, mean_entropy = '{v}'::DOUBLE, "
                    f"latency_s = '{v}'::DOUBLE, cos_per_layer = ['{v}'::DOUBLE, 0.5] WHERE rowid % 5 = {i}")
        con.execute(f"UPDATE variants SET semantic_score = '{v}'::DOUBLE WHERE rowid % 7 = {i}")
        con.execute(f"UPDATE noise_floor SET delta = '{v}'::DOUBLE, delta_norm = '{v}'::DOUBLE WHERE rowid % 5 = {i}")
        con.execute(f"UPDATE base_repeats SET seq_logprob = '{v}'::DOUBLE, latency_s = '{v}'::DOUBLE "
                    f"WHERE rowid % 3 = {i}")
    con.execute("UPDATE run_usage SET cost_usd = 'inf'::DOUBLE, price_in_per_mtok = 'nan'::DOUBLE")


# ---------------------------------------------------------------- huge finite numbers, a repeated label
#: Finite values at the edge of float64 (and of BIGINT for counts).
HUGE = (1e308, -1e308, 5e-324)


def numbers_store(path: Path) -> Path:
    """A valid store whose numbers are finite but huge (``HUGE``) in a few rows of each measurement
    column, and whose two runs carry one label (the store layer shows one label per run)."""
    _full_store(path)
    con = duckdb.connect(str(path))
    try:
        for i, v in enumerate(HUGE):
            con.execute(f"UPDATE deltas SET delta = {v!r}::DOUBLE WHERE rowid % 11 = {i}")
            con.execute(f"UPDATE deltas SET delta_norm = {v!r}::DOUBLE WHERE rowid % 13 = {i}")
            con.execute(f"UPDATE responses SET seq_logprob = {v!r}::DOUBLE, mean_entropy = {v!r}::DOUBLE, "
                        f"latency_s = {v!r}::DOUBLE, n_tokens = 2147483647 WHERE rowid % 5 = {i}")
            con.execute(f"UPDATE variants SET semantic_score = {v!r}::DOUBLE, strength = {v!r}::DOUBLE "
                        f"WHERE rowid % 7 = {i}")
            con.execute(f"UPDATE noise_floor SET delta = {v!r}::DOUBLE, delta_norm = {v!r}::DOUBLE WHERE rowid % 5 = {i}")
        con.execute("UPDATE run_usage SET cost_usd = 1e308, price_in_per_mtok = 1e308, prompt_tokens = 9223372036854775807")
        con.execute("UPDATE runs SET model = 'model-a'")  # one label, two runs
        suffstats.materialise(con)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


# ---------------------------------------------------------------- the huge store
MB = 1_000_000


def _words(n: int, seed: int) -> str:
    """``n`` words from a 10-word vocabulary plus ".", seeded (the shape of a long, repetitive prompt)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(10)] + ["."]
    return " ".join(rng.choice(vocab) for _ in range(n))


def long_prompt_pair(n_words: int = 10_000, seed: int = 1) -> tuple[str, str]:
    """A prompt of ``n_words`` words and a punctuation-noise variant of it: about one word in ten
    gains a mark, and some "." repeat (seeded; the shape of ``SurfaceNoise`` "punctuation" at
    strength 3, GLOBAL, built directly because that family is slow on a text this long)."""
    base = _words(n_words, seed=0)
    rng = random.Random(seed)
    out = []
    for w in base.split(" "):
        r = rng.random()
        out.append(w + rng.choice((",", "!", "?", ";")) if r < 0.1 else w * 3 if w == "." and r < 0.4 else w)
    return base, " ".join(out)


def huge_store(path: Path) -> Path:
    """1 MB strings where a page shows stored text, and a 10,000-word prompt (module docstring)."""
    make_store(path, models=("model-a",), datasets=("truthfulqa",), n_prompts=2, n_variants=3, seed=2)
    add_judge_verdicts(path, seed=2)
    big = (_words(MB // 3, seed=3) + " ")[:MB]
    long_base, long_var = long_prompt_pair()
    con = duckdb.connect(str(path))
    try:
        pids = [r[0] for r in con.execute("SELECT prompt_id FROM prompts ORDER BY prompt_id").fetchall()]
        con.execute("UPDATE prompts SET text = ? WHERE prompt_id = ?", [big, pids[0]])
        vids = [r[0] for r in con.execute("SELECT variant_id FROM variants WHERE prompt_id = ? ORDER BY variant_id",
                                          [pids[0]]).fetchall()]
        half = len(big) // 2
        con.execute("UPDATE variants SET text = ? WHERE variant_id = ?", [big[:half] + "CHANGED" + big[half:], vids[0]])
        con.execute("UPDATE variants SET text = ? WHERE variant_id = ?", [big.replace(" . ", " ! "), vids[1]])
        con.execute("UPDATE prompts SET text = ? WHERE prompt_id = ?", [long_base, pids[1]])
        con.execute("UPDATE variants SET text = ? WHERE prompt_id = ?", [long_var, pids[1]])
        con.execute("UPDATE responses SET response = ? WHERE rowid = 0", [big])
        con.execute("UPDATE responses SET error = ? WHERE rowid = 1", [big])
        con.execute("UPDATE mirroring_verdicts SET raw = ? WHERE rowid = 0", [big])
        con.execute("UPDATE deltas SET available = false, delta = NULL, delta_norm = NULL, reason = ? "
                    "WHERE rowid = 0", [big])
        suffstats.materialise(con)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


# ---------------------------------------------------------------- stores the store layer refuses
def view_store(path: Path, secret_file: Path) -> Path:
    """A store whose ``prompts`` is a VIEW appending the secret file's text to every prompt (case T4)."""
    make_store(path, models=("model-a", "model-b"), datasets=("truthfulqa",), n_prompts=3, n_variants=3, seed=4)
    con = duckdb.connect(str(path))
    try:
        con.execute("ALTER TABLE prompts RENAME TO prompts_real")
        con.execute(f"CREATE VIEW prompts AS SELECT prompt_id, dataset, source_id, text || ' ' || "
                    f"(SELECT content FROM read_text('{secret_file}')) AS text, reference, category FROM prompts_real")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


def macro_store(path: Path, secret_file: Path) -> Path:
    """A store with user macros shadowing built-ins sago's SQL calls; each returns the secret file."""
    make_store(path, models=("model-a", "model-b"), datasets=("truthfulqa",), n_prompts=3, n_variants=3, seed=6)
    read = f"(SELECT content FROM read_text('{secret_file}'))"
    con = duckdb.connect(str(path))
    try:
        for name, args in (("coalesce", "a, b"), ("trim", "a"), ("lower", "a"), ("concat", "a, b")):
            con.execute(f"CREATE MACRO {name}({args}) AS {read}")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


# ---------------------------------------------------------------- the pixel logger
class PixelLogger:
    """An HTTP server on 127.0.0.1 that records every request (path, Referer) and answers a 1×1 GIF.

    Use as a context manager; ``hits`` lists (method, path, referer).
    """

    GIF = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")

    def __init__(self) -> None:
        self.hits: list[tuple[str, str, str]] = []
        log = self.hits
        gif = self.GIF

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                log.append(("GET", self.path, self.headers.get("Referer", "")))
                self.send_response(200)
                self.send_header("Content-Type", "image/gif")
                self.send_header("Content-Length", str(len(gif)))
                self.end_headers()
                self.wfile.write(gif)

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> PixelLogger:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

