"""``--plan``'s numbers per model: replies to generate (new vs stored), judge calls, tokens, cost, memory.

Counts are exact (they are the counts ``runner.run_model`` generates, except model-input no-ops,
which only the model's tokenizer finds at run time). Tokens are estimated: the input tokens of a
local model from its tokenizer on a sample of the inputs, of an API model at ``CHARS_PER_TOKEN``;
the output tokens are bounded by the reply cap. Memory is estimated from the model's config.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sago_engine.pricing import cost_usd

#: Characters per token assumed for inputs sago cannot tokenize (API models): English text, the
#: rule of thumb OpenAI and Anthropic state (about 4 characters, 3/4 of a word, per token).
CHARS_PER_TOKEN = 4.0
#: Inputs a tokenizer encodes to estimate the tokens of all of them (evenly spaced over the plan).
TOKEN_SAMPLE = 256
#: Bytes per parameter (and per cached value) of each dtype.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: Memory beyond weights, KV cache and the prefill's hidden states: the runtime, tokenizer, the
#: semantic filter's encoder, temporary buffers (a stated allowance, bytes).
RUNTIME_BYTES = 1.5e9


@dataclass(frozen=True)
class ReplyCounts:
    """What one model's run generates over the plan's prompts (a shard's, with ``--shard``)."""

    prompts_new: int
    """Prompts not finished in the store (pending units)."""
    replies_new: int
    """Replies a run generates now: per pending prompt its base asked ``repeats`` times and every
    variant it answers (``Plan.to_generate``)."""
    replies_stored: int
    """Replies of the prompts already finished (never generated again)."""
    judge_calls: int
    """With ``[judge]``: two judge calls (variant reply, base reply) per social-register variant of
    the pending prompts; 0 without."""


def replies_per_prompt(repeats: int, n_variants: int, samples: int = 1) -> int:
    """Replies a run generates for one prompt with ``n_variants`` variants to answer: its base and each
    variant ``samples`` times (k; 1 for greedy decoding) and its base ``repeats − 1`` more times (the
    noise floor's repeats). The count ``runner.run_model`` generates."""
    return repeats - 1 + samples * (1 + n_variants)


def reply_counts(plan, repeats: int, prompt_ids: Sequence[str], done: Iterable[str], judge: bool,
                 samples: int = 1) -> ReplyCounts:
    """``ReplyCounts`` of a model asking each base prompt ``repeats`` times (``ModelConfig.repeats``)
    and, for a sampled run, its base and every variant ``samples`` times (``ModelConfig.samples``;
    ``replies_per_prompt``).

    Args:
        plan: the ``Plan``; prompt_ids: the prompts this run covers (its shard's); done: prompt ids
            finished in the store for this run (``Store.done_units``); judge: the config has ``[judge]``.
    """
    finished = set(done)
    new = stored = n_new = calls = 0
    for pid in prompt_ids:
        vs = plan.to_generate(pid)
        n = replies_per_prompt(repeats, len(vs), samples)
        if pid in finished:
            stored += n
            continue
        n_new += 1
        new += n
        calls += 2 * sum(v.spec.family == "social_register" for v in vs) if judge else 0
    return ReplyCounts(n_new, new, stored, calls)


def input_texts(plan, repeats: int, prompt_ids: Iterable[str], samples: int = 1) -> list[str]:
    """Every input a model reads for ``prompt_ids``: each base prompt ``repeats − 1`` times and, ``samples``
    times each, the base prompt and its variants (``replies_per_prompt``); an LLM rewrite not yet
    written counts as its base prompt's text. A local sampled run reads each input once (its k
    samples share one prefill): pass ``samples=1`` for it."""
    base = {p.prompt_id: p.text for p in plan.prompts}
    out: list[str] = []
    for pid in prompt_ids:
        asks = [base[pid]] + [(v.text or base[pid]) if v.meta.get("pending_rewrite") else v.text
                              for v in plan.to_generate(pid)]
        out += [base[pid]] * (repeats - 1) + asks * samples
    return out


def input_tokens(texts: Sequence[str], encode: Callable[[str], Sequence[int]] | None = None,
                 sample: int = TOKEN_SAMPLE) -> tuple[int, str]:
    """Estimated input tokens of ``texts`` and how they were estimated.

    With ``encode`` (a model's ``encode_prompt``: the chat template rendered, so its tokens count):
    ``sample`` inputs evenly spaced are encoded; tokens = n · t₀ + Σchars · (Σ_s tok − n_s · t₀) / Σ_s chars,
    t₀ the tokens of an empty prompt (the template). Without: Σchars / ``CHARS_PER_TOKEN``.
    Returns ``(tokens, how)`` — ``how`` one phrase for the plan's line.
    """
    chars = sum(len(t) for t in texts)
    if not texts:
        return 0, "no inputs"
    if encode is None:
        return math.ceil(chars / CHARS_PER_TOKEN), f"≈ {CHARS_PER_TOKEN:g} characters per token"
    step = max(1, len(texts) // sample)
    picked = texts[::step][:sample]
    t0 = len(encode(""))
    s_chars = sum(len(t) for t in picked)
    s_tok = sum(len(encode(t)) for t in picked)
    per_char = (s_tok - len(picked) * t0) / s_chars if s_chars else 0.0
    return round(len(texts) * t0 + chars * per_char), f"tokenizer on {len(picked)} of {len(texts)} inputs"


def plan_cost(tokens_in: int, tokens_out: int, m) -> float | None:
    """USD at the model's prices (``price_in_per_mtok`` / ``price_out_per_mtok``; ``pricing.cost_usd``),
    None when the config sets none."""
    p_in, p_out = getattr(m, "price_in_per_mtok", None), getattr(m, "price_out_per_mtok", None)
    if p_in is None and p_out is None:
        return None
    return cost_usd(tokens_in, tokens_out, p_in, p_out)


@dataclass(frozen=True)
class MemoryNeed:
    """Estimated peak memory of a local model's run (bytes)."""

    weights: float
    kv_cache: float
    hidden_states: float
    runtime: float = RUNTIME_BYTES

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.hidden_states + self.runtime


def parameter_count(config) -> int:
    """Parameters of a decoder-only transformer from its (text) config: embeddings (twice unless tied),
    per layer attention (q, o: H·H; k, v: H·kv) and a gated MLP (3·H·I), norms left out.

    An estimate (±10 % on Llama, Qwen, Gemma, SmolLM configs); raises AttributeError without
    ``hidden_size`` / ``num_hidden_layers`` / ``vocab_size``."""
    c = config.get_text_config() if hasattr(config, "get_text_config") else config
    h, n_layers, vocab = int(c.hidden_size), int(c.num_hidden_layers), int(c.vocab_size)
    inter = int(getattr(c, "intermediate_size", None) or 4 * h)
    heads = int(getattr(c, "num_attention_heads", None) or 1)
    head_dim = int(getattr(c, "head_dim", None) or h // heads)
    kv = int(getattr(c, "num_key_value_heads", None) or heads) * head_dim
    q = heads * head_dim
    per_layer = h * q + q * h + 2 * h * kv + 3 * h * inter
    tied = bool(getattr(c, "tie_word_embeddings", getattr(config, "tie_word_embeddings", True)))
    return n_layers * per_layer + vocab * h * (1 if tied else 2)


def memory_need(config, dtype: str, batch_size: int, input_tokens_max: int, cap: int) -> MemoryNeed:
    """``MemoryNeed`` of one decoding batch: weights in ``dtype``; the KV cache of ``batch_size`` rows of
    ``input_tokens_max + cap`` positions (2 · L · kv · bytes each); the prefill's hidden states, which
    the run keeps for Δ-Cos ((L+1) · H per input position, float32)."""
    c = config.get_text_config() if hasattr(config, "get_text_config") else config
    b = DTYPE_BYTES.get(dtype, 4)
    n_layers, h = int(c.num_hidden_layers), int(c.hidden_size)
    heads = int(getattr(c, "num_attention_heads", None) or 1)
    kv = int(getattr(c, "num_key_value_heads", None) or heads) * int(getattr(c, "head_dim", None) or h // heads)
    positions = batch_size * (input_tokens_max + cap)
    return MemoryNeed(weights=parameter_count(config) * b, kv_cache=2.0 * n_layers * kv * b * positions,
                      hidden_states=(n_layers + 1) * h * 4.0 * batch_size * input_tokens_max)


def memory_available(device: str) -> tuple[float | None, str]:
    """Memory a run on ``device`` can use now and where it comes from: a CUDA device's free memory
    (``torch.cuda.mem_get_info``), else this machine's available RAM (``psutil``), lowered to the
    cgroup limit where one is set (``memlimit.cgroup_memory_limit``)."""
    if str(device).startswith("cuda"):
        try:
            import torch

            if torch.cuda.is_available():
                idx = int(device.split(":")[1]) if ":" in device else 0
                free, _ = torch.cuda.mem_get_info(idx)
                return float(free), f"free on {device}"
        except Exception:  # noqa: BLE001 - no GPU here: say so
            pass
        return None, f"{device} not visible here"
    import psutil

    from sago_engine.runtime.memlimit import cgroup_memory_limit

    avail = float(psutil.virtual_memory().available)
    limit, _ = cgroup_memory_limit()
    if limit is not None:
        used = float(psutil.Process().memory_info().rss)
        if limit - used < avail:
            return max(0.0, limit - used), "under this process's cgroup memory limit"
    return avail, "available RAM"


def gib(x: float) -> str:
    """``"12.3 GiB"``."""
    return f"{x / 2**30:.1f} GiB"
