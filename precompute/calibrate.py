"""``--plan --calibrate``: a short measured run of each local model on this machine, for the plan's time.

The model is loaded (timed) and answers about one decoding batch of the plan's first pending
inputs at the run's reply cap; the replies are scored as a run scores them (every axis, the
teacher-forced base replies where an option needs them), nothing is stored. Estimated time of the
run = load + replies × the measured seconds per reply. A load that built the model cache
(``models.cache``: de-quantizing a GGUF takes minutes, once) is left out of the estimate: the run
reads that cache. The semantic filter's encoder (BERTScore)
is loaded before the clock starts, as a run has it loaded after its plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from precompute.plan_estimate import replies_per_prompt
from precompute.records import backend_spec
from sago_engine.axis_spec import OPTION_AXIS_SPECS
from sago_engine.backends import get_backend
from sago_engine.measure.pipeline import option_axes_for
from sago_engine.measure.step import Scoring, force_base_replies, generate, prepare, score
from sago_engine.models.cache import cache_root

#: Replies a calibration measures at least (a batch smaller than this says little about the rate).
MIN_REPLIES = 8
#: Replies a calibration measures at most (a short measurement: one batch of at most this many).
MAX_REPLIES = 32


@dataclass(frozen=True)
class Calibration:
    """A measured sample of one model's run on this machine."""

    load_s: float
    """Seconds to build the backend (load the weights)."""
    replies: int
    """Replies generated and scored."""
    seconds: float
    """Seconds those replies took (generation and scoring)."""
    cache_built: bool = False
    """The load built the model cache (``models.cache``): a one-time cost that the run does not pay again."""

    @property
    def per_reply_s(self) -> float:
        return self.seconds / max(1, self.replies)

    def estimate_s(self, replies: int) -> float:
        """Estimated seconds of a run of ``replies`` replies: load (unless it built the cache) + replies ×
        seconds per reply."""
        return (0.0 if self.cache_built else self.load_s) + replies * self.per_reply_s if replies else 0.0


def calibrate(cfg, m, plan, prompt_ids: Sequence[str], backend_factory: Callable | None = None,
              n_replies: int | None = None) -> Calibration:
    """Load model ``m``, answer and score about ``n_replies`` of its pending inputs (default: its
    ``batch_size`` within [``MIN_REPLIES``, ``MAX_REPLIES``]), in plan order; nothing is written.

    Raises what building the backend raises (``ModelUnavailableError``, ``ApiFatalError`` …).
    """
    from sago_engine.models.bertscore import get_encoder

    get_encoder()  # loaded before the clock, as in a run
    target = n_replies or min(MAX_REPLIES, max(MIN_REPLIES, int(getattr(m, "batch_size", None) or MIN_REPLIES)))
    prompts = {p.prompt_id: p for p in plan.prompts}
    k = m.samples if m.sampling is not None else 1  # a sampled model is timed as it runs: k samples per input
    cached = set(cache_root().iterdir())
    t0 = time.perf_counter()
    backend = (backend_factory or get_backend)(backend_spec(cfg, m))
    load = time.perf_counter() - t0
    built = bool(set(cache_root().iterdir()) - cached)
    try:
        items, n = [], 0
        for pid in prompt_ids:
            p = prompts[pid]
            vs = [v for v in plan.to_generate(pid) if not v.meta.get("pending_rewrite")]
            it = prepare(backend, pid, p.dataset, p.text, vs[: max(0, (target - n - m.repeats + 1) // k - 1)],
                         check_input=not m.is_api)
            items.append(it)
            n += replies_per_prompt(m.repeats, len(it.variants), k)
            if n >= target:
                break
        caps = frozenset(backend.capabilities)
        options = tuple(o for o in option_axes_for(cfg.axis_options, caps)
                        if "bert_baseline" not in OPTION_AXIS_SPECS[o].needs)
        scoring = Scoring("calibration", cfg.normalizers, caps, options)
        t1 = time.perf_counter()
        answered = generate(backend, items, cfg.max_new_tokens_for(m), repeats=m.repeats, keyed_repeats=m.is_api,
                            samples=k, seed=cfg.seed if m.sampling is not None else None)
        score(force_base_replies(backend, answered) if scoring.forces_base else answered, scoring)
        seconds = time.perf_counter() - t1
    finally:
        backend.close()
    return Calibration(load, n, seconds, built)
