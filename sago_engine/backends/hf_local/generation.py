"""Generation of a local model: prompts into length-sorted batches, and one decoding batch — prefill,
the batched greedy loop, finished rows leaving the batch.

Sampled decoding (``be.sampling`` with temperature > 0) runs the same loop: each row draws its
token with its own seeded generator (``sampling.SampledStepStats``), so a sampled reply is the same
whatever batch it is decoded in.

Decoding is plain greedy with ``neutral_generation_config`` (the model folder's
``generation_config.json`` is recorded but never applied), so every generated token is the argmax
of the step logits whose statistics ``statistics.StepStats`` records.

Finished rows leave the batch: once ``HFLocalBackend.DROP_FINISHED_FRACTION`` of a batch's rows
have emitted EOS, its ``generate`` call stops (``RowsFinished``), those rows are done, and the
others continue in a new ``generate`` call from the same KV cache (``Cache.batch_select_indices``),
so no decode step is spent on a finished row and token statistics are computed only for real reply
tokens (greedy tokens identical to a batch that never drops a row and to the naive batch-1 loop:
tests/integration/backends/test_backend.py, benchmarks/README.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from sago_engine.runtime import progress

from ...types import GenerationResult
from ..context import check_context, over_context_result
from .engine import LocalEngine
from .kvcache import preallocated_cache
from .prefill import NewCache, Prefill, prefill_batch
from .sampling import SampledStepStats, row_generators
from .statistics import StepStats, user_states

__all__ = ["NEUTRAL_DECODING", "neutral_generation_config", "RowsFinished", "generate", "generate_batch", "prefill_once"]

#: Every decoding setting that can change which token greedy search picks, at its neutral value
#: (no penalties, no forced/suppressed/bad tokens, no length rules). A model folder's own
#: ``generation_config.json`` (e.g. Qwen2.5-Instruct's ``repetition_penalty: 1.05``) is never
#: used: SAGO (arXiv 2610.01428) §Decoding is plain greedy, the argmax of the model's logits.
NEUTRAL_DECODING: dict[str, Any] = {
    "do_sample": False, "num_beams": 1, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0,
    "min_p": None, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0, "length_penalty": 1.0, "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "suppress_tokens": None,
    "begin_suppress_tokens": None, "sequence_bias": None, "forced_bos_token_id": None,
    "forced_eos_token_id": None, "min_length": 0, "min_new_tokens": None, "renormalize_logits": False,
    "remove_invalid_values": False, "exponential_decay_length_penalty": None, "stop_strings": None,
    "guidance_scale": None, "watermarking_config": None, "num_beam_groups": 1, "diversity_penalty": 0.0,
    "max_time": None,
}


def neutral_generation_config(eos_ids: Sequence[int], pad_id: int | None,
                              max_new_tokens: int | None = None) -> GenerationConfig:
    """A fresh ``transformers.GenerationConfig`` for plain greedy decoding.

    Args:
        eos_ids: token ids that stop generation (the model's EOS set).
        pad_id: padding token id.
        max_new_tokens: generation cap (None: unset, as stored on the model).
    Returns:
        ``GenerationConfig`` with ``NEUTRAL_DECODING`` plus eos/pad/max_new_tokens and nothing
        else (source: transformers ``GenerationConfig``; every other field is unset and so
        takes the library default, none of which changes a greedy choice).
    """
    return GenerationConfig(**NEUTRAL_DECODING, eos_token_id=list(eos_ids), pad_token_id=pad_id,
                            max_new_tokens=max_new_tokens)


class StepTick(LogitsProcessor):
    """A logits processor that reports each decoding step to ``sink`` as (tokens so far, cap) and
    returns the scores unchanged (``progress.stepping``): a sign of life between finished replies."""

    def __init__(self, start: int, cap: int, sink) -> None:
        self.k, self.cap, self.sink = start, cap, sink

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.k += 1
        self.sink(min(self.k, self.cap), self.cap)
        return scores


class RowsFinished(StoppingCriteria):
    """A ``transformers.StoppingCriteria`` that stops one ``generate`` call once ``fraction`` of its
    rows (at least one, not all) have emitted an EOS after column ``start``, so ``generate_batch``
    can drop them and continue the others from the KV cache."""

    def __init__(self, start: int, eos: torch.Tensor, fraction: float) -> None:
        self.start, self.eos, self.fraction = start, eos, fraction

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.BoolTensor:
        done = torch.isin(input_ids[:, self.start:], self.eos).any(1)
        n = int(done.sum())
        stop = 0 < n < len(done) and n >= max(1.0, self.fraction * len(done))
        return torch.full((len(done),), stop, dtype=torch.bool, device=input_ids.device)


def generate(be: LocalEngine, prompts: list[str], max_new_tokens: int,
             seeds: Sequence[int] | None = None) -> list[GenerationResult]:
    """``HFLocalBackend.generate``: prompts encoded (``prompt_layout``), refused when over the context
    (``context.over_context_result``), sorted by length into batches of ``be.batch_size``, each
    decoded by ``be.generate_batch``; a failing batch is retried one prompt at a time, and a prompt
    that fails alone (or does not encode) becomes an error row. Results in input order.
    ``seeds``: per prompt its reply's seed, for a sampled backend (required there, ignored by a
    greedy one).

    Raises:
        ValueError: ``max_new_tokens < 1``; a sampled backend without one seed per prompt.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    sampled = not be.sampling.greedy
    if sampled and (seeds is None or len(seeds) != len(prompts)):
        raise ValueError(f"sampled decoding (temperature {be.sampling.temperature:g}) needs one seed per prompt "
                         f"(sago_engine.seeds.sample_seed), got {'none' if seeds is None else len(seeds)} "
                         f"for {len(prompts)} prompts")
    row_seeds = list(seeds) if sampled else [None] * len(prompts)
    out: list[GenerationResult | None] = [None] * len(prompts)
    encoded: list[list[int] | None] = []
    spans: list[tuple[int, int] | None] = []
    for i, p in enumerate(prompts):
        try:
            ids, span = be.prompt_layout(p)
            if not ids:
                raise ValueError("prompt encodes to zero tokens")
            if check_context(len(ids), max_new_tokens, be.context_length):
                out[i] = over_context_result(len(ids), max_new_tokens, be.context_length)  # type: ignore[arg-type]
                ids, span = None, None
            encoded.append(ids)
            spans.append(span)
        except Exception as exc:  # one bad prompt becomes a row
            encoded.append(None)
            spans.append(None)
            out[i] = GenerationResult(text="", n_tokens=0, error=f"{type(exc).__name__}: {exc}")
    valid = [i for i, e in enumerate(encoded) if e is not None]
    progress.advance(len(prompts) - len(valid))  # error rows are finished replies
    for batch in be.batches([len(encoded[i]) for i in valid]):  # type: ignore[arg-type]
        idx = [valid[b] for b in batch]
        try:
            res = be.generate_batch([encoded[i] for i in idx], max_new_tokens,  # type: ignore[misc]
                                     [spans[i] for i in idx], seeds=[row_seeds[i] for i in idx] if sampled else None)
        except Exception:
            res = []
            for i in idx:
                try:
                    res.extend(be.generate_batch([encoded[i]], max_new_tokens, [spans[i]],  # type: ignore[list-item]
                                                  seeds=[row_seeds[i]] if sampled else None))
                except Exception as exc:
                    res.append(
                        GenerationResult(text="", n_tokens=0, error=f"{type(exc).__name__}: {exc}")
                    )
        for i, r in zip(idx, res):
            out[i] = r
    return out  # type: ignore[return-value]


@torch.inference_mode()
def generate_batch(be: LocalEngine, seqs: list[list[int]], max_new_tokens: int,
                   spans: Sequence[tuple[int, int] | None] | None = None, *, one_prefill: bool = False,
                   new_cache: NewCache = preallocated_cache, seeds: Sequence[int] | None = None
                   ) -> list[GenerationResult]:
    """Greedy (or, with ``seeds``, sampled) replies with white-box statistics for one decoding batch (``HFLocalBackend.generate``
    describes the results).

    Args:
        be: the backend (model, tokenizer, device, EOS and pad ids, ``DROP_FINISHED_FRACTION``).
        seqs: the batch's prompt token ids (B rows, each ≥ 1 token); max_new_tokens: the cap (≥ 1).
        spans: per row the token span [a, b) of the user's text, or None (no ``cos@user_*`` states).
        one_prefill, new_cache: as ``prefill.prefill_batch`` (the defaults are the production path; tests
            pass others to compare against it).
        seeds: per row its reply's seed: each row samples with its own generator (``be.sampling``);
            None = greedy.
    Returns:
        One ``GenerationResult`` per row, in row order.
    """
    t0 = time.perf_counter()
    if seeds is not None and len({tuple(s) for s in seqs}) < len(seqs):  # samples of one prompt
        pre = prefill_once(be, seqs, max_new_tokens, one_prefill=one_prefill, new_cache=new_cache)
    else:
        pre = prefill_batch(be, seqs, max_new_tokens, one_prefill=one_prefill, new_cache=new_cache)
    gens = row_generators(seeds) if seeds is not None else None
    new, lp, ent, prefill_hidden = _decode(be, pre, max_new_tokens, gens)
    spans = list(spans) if spans is not None else [None] * len(seqs)
    user = [user_states(prefill_hidden, pre.prefix_hidden, b, len(s), sp) for b, (s, sp) in enumerate(zip(seqs, spans))]
    hidden = torch.stack([h[:, -1, :] for h in prefill_hidden], dim=1).float()  # (B, L+1, H)
    return _results(be, new, lp, ent, hidden.cpu().numpy(), user, (time.perf_counter() - t0) / len(seqs))


def prefill_once(be: LocalEngine, seqs: list[list[int]], max_new_tokens: int, **kw) -> Prefill:
    """``prefill.prefill_batch`` over the distinct rows of ``seqs`` only, its ids, mask, KV cache and
    hidden states then repeated to one row per entry of ``seqs`` (``Cache.batch_select_indices``):
    the k samples of a prompt share its prefill and decode as k rows of one batch.

    Args / returns: as ``prefill.prefill_batch`` (``kw``: its ``one_prefill`` / ``new_cache``).
    """
    first: dict[tuple[int, ...], int] = {}
    rows = [first.setdefault(tuple(s), len(first)) for s in seqs]
    pre = prefill_batch(be, [list(t) for t in first], max_new_tokens, **kw)
    idx = torch.tensor(rows, dtype=torch.long, device=pre.ids.device)
    pre.cache.batch_select_indices(idx)
    own = None if pre.own_hidden is None else [h[idx] for h in pre.own_hidden]
    return Prefill(pre.ids[idx], pre.mask[idx], pre.cache, own, pre.prefix_hidden)


def _decode(be: LocalEngine, pre: Prefill, max_new_tokens: int, gens: list[torch.Generator] | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The greedy loop from a prefilled batch: decode until the cap, every row's EOS, or enough rows
    finished to drop them (they would otherwise keep decoding with the batch); then continue the
    rest from the same KV cache. With ``gens`` (one generator per row) each row samples its tokens
    (``sampling.SampledStepStats``; a row keeps its generator when others leave the batch).

    Returns:
        ``(new, lp, ent, prefill_hidden)``: new tokens (B, T_max) long (pad after a row's end), their
        log-probs and entropies (B, T_max) float32 (0 after a row's end), in the original row order;
        L+1 hidden-state tensors (B, S, H) of the prefill whose position -1 is every row's last
        prompt token.
    """
    ids, mask, cache, own_hidden = pre.ids, pre.mask, pre.cache, pre.own_hidden
    B = ids.shape[0]
    eos_t = torch.tensor(be.eos_ids, dtype=torch.long, device=be.device)
    pad = be.pad_id if be.pad_id is not None else be.eos_ids[0]
    new = torch.full((B, max_new_tokens), pad, dtype=torch.long)  # (B, T_max), original row order
    lp = torch.zeros((B, max_new_tokens), dtype=torch.float32)
    ent = torch.zeros((B, max_new_tokens), dtype=torch.float32)
    rows = torch.arange(B)  # original index of each row still decoding
    done, prefill_hidden = 0, None
    sink = progress.step_sink()
    while True:
        gc = neutral_generation_config(be.eos_ids, be.pad_id, max_new_tokens - done)
        gc.update(return_dict_in_generate=True, output_hidden_states=prefill_hidden is None)
        stop = StoppingCriteriaList([RowsFinished(ids.shape[1], eos_t, be.DROP_FINISHED_FRACTION)])
        stats = StepStats() if gens is None else SampledStepStats(be.sampling, [gens[i] for i in rows.tolist()])
        gen = be.model.generate(input_ids=ids, attention_mask=mask, generation_config=gc,
                                stopping_criteria=stop,
                                logits_processor=LogitsProcessorList([stats, *([StepTick(done, max_new_tokens, sink)]
                                                                               if sink else [])]),
                                cache=cache)
        if prefill_hidden is None:
            # first step: tuple of L+1 tensors (B, S, H) over the uncached part (S = 1 after
            # bucketed prefill: the own tokens before it are in own_hidden); position -1 is
            # the last real token of every row (left padding).
            prefill_hidden = gen.hidden_states[0]
            if own_hidden is not None:
                prefill_hidden = [torch.cat([o, g], dim=1) for o, g in zip(own_hidden, prefill_hidden)]
                own_hidden = None
        chunk = gen.sequences[:, ids.shape[1]:].cpu()  # (b, T) new tokens of the rows in `rows`
        T = chunk.shape[1]
        is_eos = torch.isin(chunk, eos_t.cpu())
        finished = is_eos.any(1)
        n_row = torch.where(finished, is_eos.int().argmax(1) + 1, torch.full_like(finished, T, dtype=torch.long))
        new[rows, done:done + T] = chunk
        # token statistics computed at each step (StepStats); kept only for the (row, step)
        # cells of real reply tokens (up to and including the first EOS)
        if T:
            r, t = (torch.arange(T) < n_row.unsqueeze(1)).nonzero(as_tuple=True)  # (row, step) cells
            # generate can run one step past its stop and drop it (transformers' deferred stop
            # check, on mps): the processor saw that step too; it is always the last
            if len(stats.logprobs) not in (T, T + 1):
                raise RuntimeError(f"{len(stats.logprobs)} step statistics for {T} generated tokens")
            lp[rows[r], done + t] = torch.stack(stats.logprobs[:T], dim=1).cpu()[r, t]
            ent[rows[r], done + t] = torch.stack(stats.entropies[:T], dim=1).cpu()[r, t]
        done += T
        keep = (~finished).nonzero().squeeze(1)
        if done >= max_new_tokens or len(keep) == 0:
            progress.advance(len(rows))  # every row still here ends now (EOS or the cap)
            break
        progress.advance(len(rows) - len(keep))  # rows that emitted EOS leave the batch
        cache = gen["cache"] if "cache" in gen else gen["past_key_values"]
        dev_keep = keep.to(be.device)
        if len(keep) < len(rows):
            cache.batch_select_indices(dev_keep)
        ids = gen.sequences[dev_keep]
        mask = torch.cat([mask[dev_keep], torch.ones((len(keep), T), dtype=mask.dtype, device=mask.device)], dim=1)
        rows = rows[keep]
    return new, lp, ent, prefill_hidden


def _results(be: LocalEngine, new: torch.Tensor, lp: torch.Tensor, ent: torch.Tensor, hidden: Any,
             user: list[tuple[Any, Any]], latency_s: float) -> list[GenerationResult]:
    """The batch's ``GenerationResult`` s: each row cut after its first EOS, decoded exactly as
    emitted (special tokens skipped; no strip, no tokenization-space clean-up)."""
    new_l = new.cpu().tolist()
    lp_np = lp.double().cpu().numpy()
    ent_np = ent.double().cpu().numpy()
    eos = set(be.eos_ids)
    results = []
    for b, toks in enumerate(new_l):
        n = len(toks)
        finish = "length"
        for t, tok in enumerate(toks):
            if tok in eos:
                n, finish = t + 1, "stop"
                break
        kept = toks[:n]
        text = be.tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        results.append(
            GenerationResult(
                text=text,
                n_tokens=n,
                token_logprobs=lp_np[b, :n].copy(),
                token_entropies=ent_np[b, :n].copy(),
                hidden_last=hidden[b].copy(),
                hidden_user_last=user[b][0],
                hidden_user_mean=user[b][1],
                finish_reason=finish,
                latency_s=latency_s,
                token_ids=kept,
            )
        )
    return results
