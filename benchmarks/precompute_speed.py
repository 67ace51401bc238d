"""Precompute speed: the naive per-variant loop vs sago's runner, same model, same prompts, one process.

Usage: ``python benchmarks/precompute_speed.py [--model KEY] [--dtype float32] [--batch-size 56] [--runner-only]
[--device cuda]``

Workload: ``--model`` (default smollm2-135m-instruct; any model with a ``[[models]]`` entry in
``precompute/configs/demo.toml``, e.g. qwen2.5-coder-0.5b-instruct, whose batch size is used
unless ``--batch-size``), 8 prompts (the first 2 of truthfulqa, nq_open, alpaca and
simpleqa_verified) × the demo variant grid (5 social-register + 5 surface-noise + 3 structural
variants per prompt, plus the base prompt = 112 greedy generations of up to 48 new tokens).

* **naive** — what one writes by hand (torch's stock linear kernel): per prompt text, batch size 1, ``model.generate``; then a
  second forward pass over the prompt for the last-token hidden states of every layer; then a
  third, teacher-forced pass over prompt + response for token log-probs and entropies; then per
  variant BLEU, one BERTScore call per pair, the other axes, and one DuckDB insert per row.
* **sago** — ``precompute.runner.run`` into a fresh store: one greedy ``generate`` per
  length-sorted batch gives the response, the prefill's last-token hidden states and the step
  logits' log-probs / entropies; BERTScore batched per chunk; bulk (DataFrame) inserts.

Both load the model inside their timed run, from the dequantized-weights cache (warmed by an
untimed load first: a machine's first load dequantizes the GGUF, 10–40 s; a cached load takes
≈ 0.2–0.5 s, printed separately) and both build the same plan (variants + semantic filter).

Checks (exit status 1 if they fail): greedy responses identical, and every delta within
``TOL`` of the naive one wherever the two runs produced the same base and variant response.

Metering (``ForwardMeter``, hooks on the model and every ``nn.Linear``):

* **executed FLOPs**: 2·rows·in·out of every Linear call (prefill, every decode step, the LM
  head), padding and finished rows included, plus attention's score and value products:
  4 · heads · head_dim per (query, key) pair per layer, every row × query × mask column.
* **useful FLOPs**: the part of each Linear call that falls on real prompt tokens (not left
  padding; the shared chat-template prefix, prefilled once at batch 1, counts once) and real
  reply tokens (not a row that already emitted EOS and keeps decoding with its batch, nor the
  step whose input is the EOS itself), plus the attention pairs of those tokens with the real
  tokens they attend to (causal, within a layer's sliding window if it has one).
* **decode bytes**: per decode step, every Linear's weight + bias in its dtype (a tied
  embedding once, as the LM head) plus the KV cache read (2 × layers × kv_heads × head_dim ×
  cached length × rows × element size).
* **forward time**: wall time inside the model's top-level ``forward`` calls, per phase
  (prefill: > 1 input position per row; decode: one).

Ceilings, measured in this process before and after the runs (max of the two): the best
GFLOP/s of a large square product in the run's dtype over the kernels this process could use
(``torch.mm``; on CPU in float32 also oneDNN's inner product, ``sago_engine.runtime.kernels``), and the best GB/s of reading a
640 MB float32 tensor (``t.sum()``; a copy's read + write rate is printed beside it). Prints,
last lines::

    executed_fraction: F          (sago's executed forward GFLOP/s / matmul ceiling)
    decode_bandwidth_fraction: B  (sago's decode bytes / decode seconds / read-bandwidth ceiling)
    roofline_fraction: F          (sago's useful forward GFLOP/s / matmul ceiling)
    speedup: X.XX                 (naive wall time / sago wall time; not with --runner-only)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sago_engine  # noqa: E402,F401 - first: it sets OpenMP's wait policy before torch starts (sago_engine.runtime.threads)

# isort: split
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from precompute.config import load_config  # noqa: E402
from precompute.model_config import ModelConfig  # noqa: E402
from precompute.runner import make_plan, run, run_id_for, write_plan  # noqa: E402
from sago_engine.axes import delta_bert, delta_bleu, delta_cos, delta_ent, delta_mr, delta_prob, detector_kind  # noqa: E402
from sago_engine.backends import get_backend  # noqa: E402
from sago_engine.backends.hf_local import HFLocalBackend, set_threads, token_stats  # noqa: E402
from sago_engine.runtime.kernels import onednn_linear, onednn_usable, use_linear_kernel  # noqa: E402
from sago_engine.scoring.scores import normalize  # noqa: E402
from sago_engine.store import open_store  # noqa: E402
from sago_engine.types import AXES, DEFAULT_MAX_NEW_TOKENS, GenerationResult  # noqa: E402

MODEL = "smollm2-135m-instruct"
DATASETS = ("truthfulqa", "nq_open", "alpaca", "simpleqa_verified")
#: Largest |Δ_sago − Δ_naive| accepted per axis (raw, unnormalized units) where both responses match.
TOL = {"cos": 1e-4, "bleu": 1e-9, "bert": 1e-5, "prob": 5e-3, "ent": 5e-3, "mr": 0.0}
#: Where the models run (``--device``; cpu unless given).
DEVICE = "cpu"


# --------------------------------------------------------------------------- measurement


class ForwardMeter:
    """What the model's forward calls did, in total and per phase (``prefill``: calls with more
    than one input position per row, or that keep no logits — a length bucket's prefill,
    ``logits_to_keep`` empty; ``decode``: one position, i.e. a generation step, the first of which
    feeds each row's last prompt token after a bucketed prefill).

    * **executed** FLOPs: 2·rows·in·out of every ``nn.Linear`` call, padding and finished rows
      included; plus attention's score (QKᵀ) and value (PV) products, 4 · heads · head_dim FLOPs
      per (query, key) pair per layer, over every row × input position × ``attention_mask``
      column (what a masked dense attention kernel computes; a call without a mask — the shared
      prefix — counts its causal pairs).
    * **useful** FLOPs: the share of each Linear call's executed FLOPs that falls on useful input
      rows. A position is useful when it is a real token: in a prefill, a column of the last
      ``T`` columns of ``attention_mask`` that is 1 (left padding is not; a call without a mask is
      all useful — e.g. the shared prefix prefilled once at batch 1); in a decode step, a row
      that has not finished and whose input token is not an EOS id (the step fed the EOS itself
      produces nothing; rows that finished keep decoding with the batch). "Finished" is tracked
      per generate call: reset by every prefill call, set once a row's decode input is an EOS id.
      A Linear that sees one position per row (the LM head under ``logits_to_keep=1``) counts a
      row as useful when that row's last position is; one that sees no row (the LM head of a
      pass that keeps no logits) is not counted. Useful attention pairs: a useful position with
      the real (mask 1) positions at or before it, within the layer's sliding window if any.
    * **decode bytes**: per decode step every Linear's weight (+ bias) in its dtype, each tensor
      once (a tied embedding counts once, as the LM head), plus the KV cache read,
      2 × layers × kv_heads × head_dim × cached length × rows × element size (norm weights and
      the embedding rows looked up are left out: < 0.1 % here).
    * **tokens**: useful / executed input positions, per phase (integers; the unit test's check).
    * **seconds**: wall time inside the model's top-level forward calls (the hooks' own
      bookkeeping runs before the clock starts).
    """

    def __init__(self, model: torch.nn.Module, eos_ids=()) -> None:
        self.eos = torch.tensor(sorted(set(eos_ids)), dtype=torch.long)
        self.seconds = 0.0
        self.calls = 0
        #: per phase: executed FLOPs, useful FLOPs, seconds, executed tokens, useful tokens, bytes
        self.phase = {k: {"flops": 0, "useful_flops": 0, "seconds": 0.0, "tokens": 0, "useful_tokens": 0,
                          "bytes": 0} for k in ("prefill", "decode")}
        self.flops = 0
        self.useful_flops = 0
        self.unmatched_linear_calls = 0  # Linear calls whose rows were neither B·T nor B (counted all useful)
        self._t0 = 0.0
        self._f0 = self._u0 = 0
        self._cur = "prefill"
        self._B = self._T = self._pos_useful = self._rows_useful = 0
        self._finished: torch.Tensor | None = None
        cfg = model.config
        cfg = getattr(cfg, "get_text_config", lambda: cfg)()
        heads = cfg.num_attention_heads
        self._kv_per_pos = (2 * cfg.num_hidden_layers * (getattr(cfg, "num_key_value_heads", None) or heads)
                            * (getattr(cfg, "head_dim", None) or cfg.hidden_size // heads))
        self._kv_elem = next(model.parameters()).element_size()
        # attention: FLOPs per (query, key) pair summed over layers, grouped by sliding window
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        types = getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers
        win = getattr(cfg, "sliding_window", None)
        self._attn_pair_flops: dict[int | None, int] = {}
        for t in types:
            w = win if (t == "sliding_attention" and win) else None
            self._attn_pair_flops[w] = self._attn_pair_flops.get(w, 0) + 4 * heads * head_dim
        self.attn_flops = self.attn_useful_flops = 0
        seen, wb = set(), 0
        self._hooks = [model.register_forward_pre_hook(self._pre, with_kwargs=True),
                       model.register_forward_hook(self._post)]
        for mod in model.modules():
            if isinstance(mod, torch.nn.Linear):
                self._hooks.append(mod.register_forward_hook(self._linear))
                for p in (mod.weight, mod.bias):
                    if p is not None and p.data_ptr() not in seen:
                        seen.add(p.data_ptr())
                        wb += p.numel() * p.element_size()
        self.weight_bytes = wb

    def _pre(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        B, T = (ids.shape[0], ids.shape[-1]) if ids is not None else (0, 0)
        if not (torch.is_tensor(mask) and mask.dim() == 2 and mask.shape[0] == B):
            mask = None  # no (B, K) mask: every position real
        if mask is not None:
            new = mask[:, -T:].bool().cpu() if T else torch.zeros(B, 0, dtype=torch.bool)
        else:
            new = torch.ones(B, T, dtype=torch.bool)
        ltk = kwargs.get("logits_to_keep")
        no_logits = torch.is_tensor(ltk) and ltk.numel() == 0  # a bucketed prefill: hidden states only
        self._cur = "decode" if T == 1 and not no_logits else "prefill"
        if self._cur == "prefill":
            self._finished = torch.zeros(B, dtype=torch.bool)  # a new generate call (or a plain forward)
        else:
            if self._finished is None or self._finished.shape[0] != B:
                self._finished = torch.zeros(B, dtype=torch.bool)
            is_eos = torch.isin(ids[:, -1].cpu(), self.eos)
            new = new & ~(self._finished | is_eos).unsqueeze(1)
            self._finished |= is_eos
            kv_len = mask.shape[1] if mask is not None else 0
            self.phase["decode"]["bytes"] += self.weight_bytes + self._kv_per_pos * kv_len * B * self._kv_elem
        self._B, self._T = B, T
        self._f0, self._u0 = self.flops, self.useful_flops
        self._attention(mask, new, B, T)
        self._pos_useful = int(new.sum())
        self._rows_useful = int(new[:, -1].sum()) if T else 0
        ph = self.phase[self._cur]
        ph["tokens"] += B * T
        ph["useful_tokens"] += self._pos_useful
        _sync()
        self._t0 = time.perf_counter()

    def _attention(self, mask: torch.Tensor | None, useful: torch.Tensor, B: int, T: int) -> None:
        """Add one forward call's attention FLOPs (executed and useful) to the totals.

        ``mask`` (B, K) over cached + new positions (None: no mask, no cache — the shared prefix,
        causal); ``useful`` (B, T) bool, the call's useful input positions."""
        if T == 0:
            return
        m = torch.ones(B, T, dtype=torch.long) if mask is None else mask.bool().cpu().long()
        K = m.shape[1]
        cs = torch.cat([torch.zeros(B, 1, dtype=torch.long), m.cumsum(1)], dim=1)  # cs[:, c+1] = real keys ≤ c
        cols = torch.arange(K - T, K)  # the query positions' mask columns
        for w, f in self._attn_pair_flops.items():
            lo = torch.clamp(cols + 1 - w, min=0) if w is not None else torch.zeros_like(cols)
            keys = cs[:, cols + 1] - cs[:, lo]  # (B, T) real keys each query attends to
            n_useful = int((keys * useful.long()).sum())
            # without a mask the kernel runs causally (its pairs, all real); with one, densely
            executed = n_useful if mask is None else B * T * K
            self.flops += f * executed
            self.useful_flops += f * n_useful
            self.attn_flops += f * executed
            self.attn_useful_flops += f * n_useful

    def _post(self, module, args, output) -> None:
        _sync()  # CUDA kernels run asynchronously: time them to completion
        dt = time.perf_counter() - self._t0
        self.seconds += dt
        self.calls += 1
        ph = self.phase[self._cur]
        ph["flops"] += self.flops - self._f0
        ph["useful_flops"] += self.useful_flops - self._u0
        ph["seconds"] += dt

    def _linear(self, module, args, output) -> None:
        rows = args[0].numel() // module.in_features
        if rows == 0:  # the LM head of a pass that keeps no logits
            return
        per_row = 2 * module.in_features * module.out_features
        if rows == self._B * self._T:
            useful = self._pos_useful
        elif rows == self._B:  # one position per row: the LM head under logits_to_keep
            useful = self._rows_useful
        else:
            useful = rows
            self.unmatched_linear_calls += 1
        self.flops += per_row * rows
        self.useful_flops += per_row * useful

    @property
    def gflops_per_s(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds else float("nan")

    @property
    def useful_gflops_per_s(self) -> float:
        return self.useful_flops / self.seconds / 1e9 if self.seconds else float("nan")

    def decode_gb_per_s(self) -> float:
        d = self.phase["decode"]
        return d["bytes"] / d["seconds"] / 1e9 if d["seconds"] else float("nan")

    def phases(self, ceiling: float | None = None) -> str:
        """Per phase: seconds, executed and useful TFLOP and GFLOP/s, tokens (and fractions of
        ``ceiling`` GFLOP/s if given), for the report."""
        out = []
        for k, p in self.phase.items():
            sec = p["seconds"] or float("nan")
            ex, us = p["flops"] / sec / 1e9, p["useful_flops"] / sec / 1e9
            s = (f"{k} {p['seconds']:.2f} s, {p['flops'] / 1e12:.2f} TFLOP executed / {p['useful_flops'] / 1e12:.2f} useful "
                 f"({ex:.1f} / {us:.1f} GFLOP/s), tokens {p['useful_tokens']}/{p['tokens']} useful")
            if ceiling:
                s += f", executed_fraction {ex / ceiling:.2f}, roofline_fraction {us / ceiling:.2f}"
            out.append(s)
        return "; ".join(out)

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()


def _sync() -> None:
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_ceiling(dtype: torch.dtype, sizes=(1024, 2048, 3072), reps: int = 5) -> dict[str, float]:
    """Best GFLOP/s of a square product in ``dtype`` on ``DEVICE`` per kernel (same threads as the
    runs; on CUDA larger sizes too, timed to completion): ``torch.mm`` (MKL on x86 CPU wheels)
    and, on CPU in float32 where usable, oneDNN's inner product (``kernels.OneDNNLinear``'s op).
    The ceiling is the best of them: the fastest kernel this process could have used."""
    g = torch.Generator().manual_seed(0)
    if DEVICE.startswith("cuda"):
        sizes = (*sizes, 8192)
    kernels = {"torch.mm": lambda a, b: a @ b}
    if DEVICE == "cpu" and dtype == torch.float32 and onednn_usable():
        kernels["onednn"] = onednn_linear  # a·bᵀ: the same FLOPs as a @ b for square n × n
    best = {k: 0.0 for k in kernels}
    with torch.inference_mode():
        for n in sizes:
            a = torch.randn(n, n, generator=g).to(dtype).to(DEVICE)
            b = torch.randn(n, n, generator=g).to(dtype).to(DEVICE)
            for name, fn in kernels.items():
                fn(a, b)
                for _ in range(reps):
                    _sync()
                    t = time.perf_counter()
                    fn(a, b)
                    _sync()
                    best[name] = max(best[name], 2 * n**3 / (time.perf_counter() - t) / 1e9)
    return best


def bandwidth_ceiling(mbytes: int = 640, reps: int = 5) -> dict[str, float]:
    """Best GB/s of streaming a ``mbytes`` MB float32 tensor on ``DEVICE`` (same threads as the
    runs): ``read`` = ``t.sum()`` (bytes read), ``copy`` = ``dst.copy_(src)`` (bytes read +
    written). The decode ceiling is ``read``: a decode step reads its weights and KV cache."""
    n = mbytes * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    best = {"read": 0.0, "copy": 0.0}
    for name, fn, nbytes in (("read", src.sum, n * 4), ("copy", lambda: dst.copy_(src), 2 * n * 4)):
        fn()
        for _ in range(reps):
            _sync()
            t = time.perf_counter()
            fn()
            _sync()
            best[name] = max(best[name], nbytes / (time.perf_counter() - t) / 1e9)
    return best


# --------------------------------------------------------------------------- the naive loop


def naive_generate(be: HFLocalBackend, text: str, max_new: int) -> GenerationResult:
    """Batch size 1, three passes: generate; forward for hidden states; teacher-forced forward."""
    model = be.model
    prompt = be.encode_prompt(text)
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        seq = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new,
                             do_sample=False, temperature=None, top_p=None, top_k=None,
                             eos_token_id=be.eos_ids, pad_token_id=be.pad_id)[0, len(prompt):].tolist()
        n, finish = len(seq), "length"
        for t, tok in enumerate(seq):
            if tok in be.eos_ids:
                n, finish = t + 1, "stop"
                break
        kept = seq[:n]
        out = model(input_ids=ids, output_hidden_states=True)  # pass 2: activations
        hidden = torch.stack([h[0, -1] for h in out.hidden_states]).float().numpy()
        full = torch.tensor([prompt + kept])
        logits = model(input_ids=full).logits[0, len(prompt) - 1 : -1]  # pass 3: teacher forcing
        lp, ent = token_stats(logits, full[0, len(prompt):])
    # decoded exactly as HFLocalBackend does (no strip: a reply's trailing newline is part of it)
    text = be.tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return GenerationResult(text=text, n_tokens=n,
                            token_logprobs=lp.double().numpy(), token_entropies=ent.double().numpy(),
                            hidden_last=hidden, finish_reason=finish, token_ids=kept)


def naive_run(cfg, plan, be: HFLocalBackend, store_path: Path, run_id: str) -> tuple[dict, dict]:
    """The naive loop over the plan; returns ({(prompt_id, variant_id|None): text}, {(variant_id, axis): delta})."""
    texts, deltas = {}, {}
    with open_store(store_path, read_only=False, create=True) as store:
        write_plan(store, plan)
        for p in plan.prompts:
            base = naive_generate(be, p.text, cfg.max_new_tokens)
            texts[(p.prompt_id, None)] = base.text
            for v in plan.variants[p.prompt_id]:
                r = naive_generate(be, v.text, cfg.max_new_tokens)
                texts[(p.prompt_id, v.variant_id)] = r.text
                raw = {
                    "cos": float(delta_cos(r.hidden_last, base.hidden_last)),
                    "bleu": float(delta_bleu([r.text], base.text)[0]),
                    "bert": float(delta_bert([r.text], base.text)[0]),
                    "prob": float(delta_prob([r.seq_logprob], base.seq_logprob)[0]),
                    "ent": float(delta_ent([r.mean_entropy], base.mean_entropy)[0]),
                    "mr": float(delta_mr([r.text], [v], base.text)[0]),
                }
                for axis in AXES:
                    deltas[(v.variant_id, axis)] = raw[axis]
                    row = pd.DataFrame([{"run_id": run_id, "dataset": p.dataset, "prompt_id": p.prompt_id,
                                         "variant_id": v.variant_id, "axis": axis, "delta": raw[axis],
                                         "delta_norm": float(normalize(raw[axis], cfg.normalizers[axis])),
                                         "available": True, "reason": None,
                                         "detector": detector_kind(v) if axis == "mr" else None}])
                    store.insert_df("deltas", row)  # one row per insert
    return texts, deltas


# --------------------------------------------------------------------------- sago's runner


def sago_run(cfg) -> dict:
    """``precompute.runner.run(cfg)`` into a fresh store, metered; returns seconds, meter, timing,
    responses {(prompt_id, variant_id|None): text} and deltas {(variant_id, axis): (Δ, Δ̃)}."""
    meters: list[ForwardMeter] = []
    timing = {"load": 0.0, "generate": 0.0}

    def factory(spec):
        t = time.perf_counter()
        be = get_backend(spec)
        timing["load"] += time.perf_counter() - t
        info = be.info()
        pk = info.get("packed_weights") or {}
        packed = "+".join(k for k in ("mkl", "onednn") if pk.get(k))
        timing["kernel"] = info.get("linear_kernel") + (f" (packed: {packed}, MKL for {pk['rows']} rows)" if pk.get("mkl")
                                                        else f" (packed: {packed})" if packed else "")
        meters.append(ForwardMeter(be.model, be.eos_ids))
        gen = be.generate

        def timed(prompts, max_new_tokens):
            t = time.perf_counter()
            try:
                return gen(prompts, max_new_tokens)
            finally:
                timing["generate"] += time.perf_counter() - t

        be.generate = timed
        return be

    t = time.perf_counter()
    run(cfg, progress=False, backend_factory=factory, publish_every_s=1e9)
    seconds = time.perf_counter() - t
    with open_store(cfg.store) as st:
        d = st.deltas(kept_only=False)
        resp = {}
        for pid in d["prompt_id"].unique():
            for _, row in st.responses(pid).iterrows():
                vid = row["variant_id"] if isinstance(row["variant_id"], str) else None  # base: NULL
                resp[(row["prompt_id"], vid)] = row["response"]
        deltas = {(r.variant_id, r.axis): (r.delta, r.delta_norm, r.prompt_id) for r in d.itertuples()}
    return {"seconds": seconds, "meter": meters[0], "timing": timing, "responses": resp, "deltas": deltas}


def dtype_report(ref: dict, other: dict) -> None:
    """bf16 vs the reference dtype: wall-time ratio, identical responses, and per axis the largest
    |Δ̃ difference| (normalized, [-1, 1] units) and the SGS difference (mean over prompts of the
    per-prompt RMS of Δ̃, SAGO §Scoring)."""
    same = sum(ref["responses"][k] == other["responses"].get(k) for k in ref["responses"])
    print(f"bfloat16 vs reference: wall {other['seconds']:.2f} s vs {ref['seconds']:.2f} s "
          f"(×{ref['seconds'] / other['seconds']:.2f} speed); responses identical {same}/{len(ref['responses'])}")
    for axis in AXES:
        diffs, s_ref, s_oth = [], {}, {}
        for (vid, ax), (_, dn, pid) in ref["deltas"].items():
            if ax != axis:
                continue
            dn2 = other["deltas"][(vid, ax)][1]
            if dn == dn and dn2 == dn2:  # both available
                diffs.append(abs(dn - dn2))
                s_ref.setdefault(pid, []).append(dn)
                s_oth.setdefault(pid, []).append(dn2)
        if not diffs:
            print(f"  {axis}: unavailable")
            continue
        sgs = [float(np.mean([np.sqrt(np.mean(np.square(s[p]))) for p in s])) for s in (s_ref, s_oth)]
        print(f"  {axis}: max |ΔΔ̃| {max(diffs):.3f}, mean |ΔΔ̃| {np.mean(diffs):.4f}; "
              f"SGS {sgs[0]:.4f} vs {sgs[1]:.4f} (|diff| {abs(sgs[0] - sgs[1]):.4f})")


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=MODEL, help=f"zoo key with a [[models]] entry in demo.toml (default {MODEL})")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch-size", type=int, default=None, help="sago's batch size (default: demo.toml's)")
    ap.add_argument("--chunk-prompts", type=int, default=None, help="prompts per committed chunk (default: demo.toml's)")
    ap.add_argument("--max-new", type=int, default=DEFAULT_MAX_NEW_TOKENS)
    ap.add_argument("--runner-only", action="store_true", help="skip the naive loop (no speedup line)")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N (benchmarks/gpu_smoke.sh)")
    ap.add_argument("--no-prefix-cache", action="store_true",
                    help="ablation: prefill every row in full (no shared chat-template prefix cache)")
    ap.add_argument("--bf16-check", action="store_true",
                    help="also run sago in bfloat16 and report its speed and delta differences against this dtype")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device

    if a.no_prefix_cache:
        HFLocalBackend.MIN_SHARED_PREFIX = 10**9
    demo = load_config(ROOT / "precompute/configs/demo.toml")
    mcfg = next((m for m in demo.models if m.key == a.model), None)
    if mcfg is None:
        ap.error(f"--model {a.model!r}: not in precompute/configs/demo.toml ({', '.join(m.key for m in demo.models)})")
    model = a.model
    bs = a.batch_size if a.batch_size is not None else mcfg.batch_size
    if bs < 1:
        ap.error(f"--batch-size must be >= 1, got {bs}")
    tmp = Path(tempfile.mkdtemp(prefix="sago-bench-"))
    cfg = dataclasses.replace(
        demo, store=str(tmp / "sago.duckdb"), datasets=DATASETS, n_prompts=2, max_new_tokens=a.max_new,
        chunk_prompts=a.chunk_prompts or demo.chunk_prompts,
        models=(ModelConfig(key=model, dtype=a.dtype, device=DEVICE, batch_size=bs),),
    )
    tdtype = getattr(torch, a.dtype)
    set_threads()  # SAGO_THREADS, as the backend will apply it: the ceiling runs on the same threads
    print(f"model {model}, torch {torch.__version__}, device {DEVICE}, threads {torch.get_num_threads()}, dtype {a.dtype}, "
          f"sago batch_size {bs}, chunk_prompts {cfg.chunk_prompts}, max_new_tokens {a.max_new}, "
          f"shared-prefix cache {'off' if a.no_prefix_cache else 'on'}")
    ceil0 = matmul_ceiling(tdtype)
    bw0 = bandwidth_ceiling()

    # the first load on a machine dequantizes the GGUF weights and caches them; neither run pays it
    warm = time.perf_counter()
    HFLocalBackend(model, dtype=a.dtype, device=DEVICE, batch_size=1).close()
    print(f"weights cache warmed (a load before the timed runs): {time.perf_counter() - warm:.2f} s")
    sago = sago_run(cfg)
    sago_s, m, resp, sd = sago["seconds"], sago["meter"], sago["responses"], sago["deltas"]
    timing = sago["timing"]
    print(f"sago:  {sago_s:7.2f} s wall for {len(resp)} generations | linear kernel {timing.get('kernel')} | model load {timing['load']:.2f} s | "
          f"generate {timing['generate']:.2f} s (forward {m.seconds:.2f} s, {m.calls} calls, {m.flops / 1e12:.2f} TFLOP "
          f"executed / {m.useful_flops / 1e12:.2f} useful, {m.gflops_per_s:.1f} / {m.useful_gflops_per_s:.1f} GFLOP/s) | "
          f"plan + scoring + writes {sago_s - timing['generate'] - timing['load']:.2f} s")
    if a.bf16_check:
        bf_cfg = dataclasses.replace(cfg, store=str(tmp / "sago_bf16.duckdb"),
                                     models=(dataclasses.replace(cfg.models[0], dtype="bfloat16"),))
        bf = sago_run(bf_cfg)
        dtype_report(sago, bf)

    naive_s = None
    if not a.runner_only:
        t = time.perf_counter()
        be = HFLocalBackend(model, dtype=a.dtype, device=DEVICE, batch_size=1)
        naive_kernel = use_linear_kernel(be.model, a.dtype, be.device.type, kernel="torch")  # by hand: stock kernel
        load = time.perf_counter() - t
        nm = ForwardMeter(be.model)
        plan = make_plan(cfg)
        run_id = run_id_for(cfg, cfg.models[0], plan)
        n_texts, n_deltas = naive_run(cfg, plan, be, tmp / "naive.duckdb", run_id)
        naive_s = time.perf_counter() - t
        print(f"naive: {naive_s:7.2f} s wall for {len(n_texts)} generations | linear kernel {naive_kernel} | model load {load:.2f} s | "
              f"forward {nm.seconds:.2f} s ({nm.calls} calls, {nm.flops / 1e12:.2f} TFLOP, {nm.gflops_per_s:.1f} GFLOP/s)")
        same = {k for k in n_texts if resp.get(k) == n_texts[k]}
        diff = sorted(set(n_texts) - same, key=str)
        print(f"responses identical: {len(same)}/{len(n_texts)}")
        for k in diff[:5]:
            print(f"  differs {k}: naive {n_texts[k][:60]!r} | sago {str(resp.get(k))[:60]!r}")
        base_of = {vid: pid for (pid, vid) in n_texts if vid}
        worst = {ax: 0.0 for ax in AXES}
        compared = 0
        for (vid, ax), nv in n_deltas.items():
            pid = base_of[vid]
            if (pid, vid) in same and (pid, None) in same:
                compared += 1
                worst[ax] = max(worst[ax], abs(sd[(vid, ax)][0] - nv))
        print(f"deltas compared: {compared}; max |Δ_sago − Δ_naive| per axis: "
              + ", ".join(f"{ax} {worst[ax]:.2e} (tol {TOL[ax]:g})" for ax in AXES))
        ok = not diff and all(worst[ax] <= TOL[ax] for ax in AXES)
        print(f"check: {'PASS' if ok else 'FAIL'}")
    ceil1 = matmul_ceiling(tdtype)
    ceilings = {k: max(ceil0[k], ceil1[k]) for k in ceil0}
    ceiling = max(ceilings.values())
    bw1 = bandwidth_ceiling()
    bw = {k: max(bw0[k], bw1[k]) for k in bw0}
    dec = m.phase["decode"]
    print(f"sago forward by phase: {m.phases(ceiling)}")
    print(f"sago useful work: {m.useful_flops / m.flops:.1%} of executed FLOPs "
          f"(prefill {m.phase['prefill']['useful_flops'] / max(1, m.phase['prefill']['flops']):.1%}, "
          f"decode {dec['useful_flops'] / max(1, dec['flops']):.1%}); attention products "
          f"{m.attn_useful_flops / 1e12:.3f} of the {m.useful_flops / 1e12:.2f} useful TFLOP "
          f"({m.attn_flops / 1e12:.3f} executed)"
          + (f"; {m.unmatched_linear_calls} Linear calls of unknown row layout counted useful" if m.unmatched_linear_calls else ""))
    print(f"matmul ceiling ({a.dtype}, best square product): {ceiling:.1f} GFLOP/s ("
          + ", ".join(f"{k} {v:.1f}" for k, v in ceilings.items())
          + f"); sago forward {m.gflops_per_s:.1f} GFLOP/s executed, {m.useful_gflops_per_s:.1f} useful")
    print(f"bandwidth ceiling (float32, {DEVICE}): read (t.sum() over 640 MB) {bw['read']:.1f} GB/s, copy (read + write) "
          f"{bw['copy']:.1f} GB/s; ceiling = read. sago decode: {dec['bytes'] / 1e9:.1f} GB moved "
          f"(weights {m.weight_bytes / 1e6:.0f} MB per step + KV cache) in {dec['seconds']:.2f} s = {m.decode_gb_per_s():.1f} GB/s")
    print(f"executed_fraction: {m.gflops_per_s / ceiling:.2f}")
    print(f"decode_bandwidth_fraction: {m.decode_gb_per_s() / bw['read']:.2f}")
    print(f"roofline_fraction: {m.useful_gflops_per_s / ceiling:.2f}")
    if naive_s is not None:
        print(f"speedup: {naive_s / sago_s:.2f}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        sys.exit(main())
