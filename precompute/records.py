"""What identifies and records a model's run: its run id, its ``runs`` record, its backend spec."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from precompute.config import RunConfig
from precompute.model_config import ModelConfig
from precompute.plan import Plan, rewriter_settings
from sago_engine import runrecord
from sago_engine.measure.judge import JUDGE_TEMPLATE_ID
from sago_engine.measure.storerows import axis_options_record, run_record, utc_now
from sago_engine.runrecord import library_versions, local_decoding_record
from sago_engine.seeds import SAMPLE_SEED_RULE

#: ModelConfig fields of API backends that can change an answer (so they are part of the run id);
#: concurrency, timeouts, retries and prices cannot, so changing them resumes the same run.
RUN_ID_API_FIELDS: tuple[str, ...] = ("base_url", "api_version", "top_logprobs", "omit_params", "thinking_budget",
                                       "reasoning_effort", "server_model", "server_extra_body")


def judge_key(cfg: RunConfig) -> dict | None:
    """What of ``[judge]`` enters the run id: the section (backend, model, kwargs, max_new_tokens)
    without ``device``/``batch_size``, plus the template id. None without a judge."""
    if cfg.judge is None:
        return None
    kw = {k: v for k, v in cfg.judge["kwargs"].items() if k not in ("device", "batch_size")}
    return {"backend": cfg.judge["backend"], "model": cfg.judge["model"], "max_new_tokens": cfg.judge["max_new_tokens"],
            "kwargs": kw, "template_id": JUDGE_TEMPLATE_ID}


def run_id_for(cfg: RunConfig, m: ModelConfig, plan: Plan) -> str:
    """Deterministic run key (``runrecord.run_id``): model, backend, dtype, decoding, seed, R_X, the
    semantic filter's settings and the plan signature.

    The decoding part holds the model's effective reply cap (``cfg.max_new_tokens_for(m)``); a
    ``label`` joins the hash when set (two labelled runs of one model never share an id). The
    answer-changing API settings (``RUN_ID_API_FIELDS``; for hybrid not ``base_url``: shards
    may use different servers of the same weights, checked by the log-prob check) and hf_local's
    ``chat_template_kwargs`` and ``template_date`` join the hash only when set, and
    ``judge_key`` only when a ``[judge]`` is set, and the sampled-decoding settings
    (``ModelEntry.sampling``) only when the run is sampled, so the run ids of plain greedy hf_local
    runs (and of existing stores) are unchanged.
    """
    extras: list[dict] = []  # each only when set
    api = {k: getattr(m, k) for k in RUN_ID_API_FIELDS if getattr(m, k) is not None
           and not (k == "base_url" and m.backend == "hybrid")}  # hybrid: any server of the same weights
    if api:
        extras.append(api)
    if getattr(m, "chat_template_kwargs", None) is not None:  # explicit template variables change the prompt
        extras.append({"chat_template_kwargs": dict(sorted(m.chat_template_kwargs.items()))})
    if getattr(m, "template_date", None) is not None:  # the day a clock-reading template sees
        extras.append({"template_date": m.template_date})
    jk = judge_key(cfg)
    if jk is not None:
        extras.append({"judge": jk})
    if m.label is not None:
        extras.append({"label": m.label})
    if m.sampling is not None:  # greedy runs keep their ids
        extras.append({"sampling": m.sampling})
    return runrecord.run_id((m.key, m.backend, m.dtype), cfg.max_new_tokens_for(m), cfg.seed, cfg.normalizers,
                            (cfg.filter, plan.signature), extras)


def run_model_record(cfg: RunConfig, m: ModelConfig) -> dict | None:
    """The run record's ``config.run_model``: which ``[[models]]`` entry made the run, for a run
    with a ``label`` or its own ``max_new_tokens`` (None otherwise, so older records are unchanged).

    Returns:
        ``{"key": <zoo key / model name>, "label": <runs.model>, "max_new_tokens": <effective cap>}``.
        Two runs whose records are equal except ``label`` and the cap are a reply-cap ablation
        pair (``sago_engine.scoring.runpairs.cap_pairs``).
    """
    if m.label is None and m.max_new_tokens is None:
        return None
    return {"key": m.key, "label": m.name, "max_new_tokens": cfg.max_new_tokens_for(m)}


def config_record(cfg: RunConfig, plan: Plan, judge, m: ModelConfig | None = None) -> dict:
    """The run record's ``config``: the TOML as read; with ``[[data.sources]]`` also ``data_sources``
    (``Plan.sources``: what each read); with ``[judge]``/``[rewriter]`` also an
    ``llm`` entry (judge model, template id and backend info; rewriter generator and template);
    for a labelled run or one with its own cap also ``run_model`` (``run_model_record``)."""
    rm = run_model_record(cfg, m) if m is not None else None
    if plan.sources:  # what each [[data.sources]] entry read (file digest, split, rows, scorer), beside the TOML
        cfg = replace(cfg, raw={**cfg.raw, "data_sources": plan.sources})
    if cfg.judge is None and cfg.rewriter is None:
        return cfg.raw if rm is None else {**cfg.raw, "run_model": rm}
    llm: dict = {}
    if judge is not None:
        info = judge.backend.info()
        llm["judge"] = {"model": judge.model, "template_id": judge.template_id, "max_new_tokens": judge.max_new_tokens,
                        "label": judge.label,
                        "backend_info": {k: info.get(k) for k in ("backend", "model_id", "source", "weights_sha256",
                                                                  "dtype", "device", "decoding", "chat_template")
                                         if k in info}}
    if cfg.rewriter is not None:
        gens = sorted({v.generator for vs in plan.variants.values() for v in vs if v.generator.startswith("llm:")})
        llm["rewriter"] = {"generators": gens, "template_ids": [t["template_id"] for t in plan.templates],
                           "settings": rewriter_settings(cfg.rewriter), "model": cfg.rewriter["model"]}
    return {**cfg.raw, "llm": llm, **({"run_model": rm} if rm is not None else {})}


def model_run_record(cfg: RunConfig, m: ModelConfig, plan: Plan, run_id: str, backend: Any, judge,
                     options: tuple[str, ...], bert_baseline: float | None) -> dict:
    """The ``runs`` record of model ``m``'s run as it starts (status "running"; ``storerows.run_record``).

    Its decoding record holds the reply cap, for API backends the backend's settings (and the
    SDK's version among the versions), for local ones ``runrecord.local_decoding_record``;
    ``base_repeats`` when the base prompt is asked more than once (noise floor); for a sampled run
    ``greedy: false`` and ``sampling`` (``ModelEntry.sampling`` and how each sample's seed is
    derived, ``seeds.SAMPLE_SEED_RULE``).
    """
    cap = cfg.max_new_tokens_for(m)
    info = backend.info()
    versions = library_versions()
    if m.is_api:
        decoding = {**info.get("decoding", {}), "max_new_tokens": cap,
                    "top_logprobs": info.get("top_logprobs"), "api": {k: v for k, v in info.items() if k not in (
                        "decoding", "capabilities", "backend", "model_id")}}
        if info.get("sdk"):
            versions[info["sdk"]] = info.get("sdk_version", "?")
    else:
        decoding = local_decoding_record(info, cap, m.batch_size)
    if m.sampling is not None:  # sampled decoding (greedy runs keep their record)
        decoding.update(greedy=False, sampling={**decoding.get("sampling", {}), **m.sampling,
                                                "seed_rule": SAMPLE_SEED_RULE})
    if m.repeats > 1:  # noise floor: the base prompt is asked k times (runs without repeats keep their record)
        decoding["base_repeats"] = m.repeats
    return run_record(run_id=run_id, model=m.name, backend=m.backend, info=info,
                      dtype=None if m.is_api else m.dtype, device=str(info.get("device", m.device)), decoding=decoding,
                      seed=cfg.seed, normalizers=cfg.normalizers, semantic_filter=plan.filter_info,
                      capabilities=backend.capabilities, versions=versions,
                      config=config_record(cfg, plan, judge, m), started_at=utc_now(), status="running",
                      axis_options=axis_options_record(options, bert_baseline))


def backend_spec(cfg: RunConfig, m: ModelConfig) -> dict:
    """The ``get_backend`` spec of a model: its backend settings that are set (``BackendSettings.spec``:
    unset ones keep the backend's defaults; hf_local's dtype, device and batch size always) and, for
    a backend that takes it (API backends, hybrid), the run seed. Never a key: API backends read
    theirs from the environment."""
    s = m.settings
    spec = {"backend": m.backend, "model": m.key, **s.spec()}
    if s.takes_run_seed:
        spec["seed"] = cfg.seed
    return spec
