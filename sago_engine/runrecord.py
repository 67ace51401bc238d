"""Run records shared by the offline runner and the live page: the run id, library versions and the run fingerprint."""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Mapping, Sequence
from typing import Any

from sago_engine.seeds import stable_hash

#: ``runs.decoding`` keys that record how a local backend computes (``HFLocalBackend.info()``)
#: without entering the run id: a resume under other values is listed (``Store.upsert_run``).
ENGINE_DECODING_KEYS = ("linear_kernel", "threads", "drop_finished_fraction", "kv_cache", "prefill_buckets",
                        "packed_weights")

VERSION_PACKAGES = ("sago", "torch", "transformers", "gguf", "accelerate", "sacrebleu", "bert-score", "duckdb", "numpy", "scipy")


def run_id(identity: Sequence[Any], max_new_tokens: int, seed: int, normalizers: Mapping[str, float],
           scope: Sequence[Any], extras: Sequence[Mapping[str, Any]] = ()) -> str:
    """The one run-id formula of sago: 16 hex characters of ``seeds.stable_hash`` (sha256) over, in order,
    ``identity``, the decoding record ``{"greedy": True, "max_new_tokens": max_new_tokens}``, ``seed``,
    ``normalizers`` (R_X per axis), ``scope`` and ``extras``.

    Args:
        identity: what model ran: the runner's ``(zoo key, backend, dtype)``; a Live probe's
            ``("live", model name)``.
        max_new_tokens: the run's effective reply cap (tokens, ≥ 1).
        seed: the run seed.
        normalizers: axis → R_X.
        scope: what was measured: the runner's ``(semantic filter settings, plan signature)``; a
            probe's ``(prompt id, measured variant ids)``.
        extras: settings that change an answer, each a dict, appended only when set (so runs
            without them keep their ids): API settings, template variables, judge, label, sampling.
    Returns:
        The run id (lower-case hex, 16 characters); equal settings give equal ids on every machine.
    """
    return stable_hash(*identity, {"greedy": True, "max_new_tokens": max_new_tokens}, seed, normalizers, *scope,
                       *extras, length=16)


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that can change a number (recorded per run)."""
    import sago_engine

    out = {"sago": sago_engine.__version__}
    for p in VERSION_PACKAGES[1:]:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = "not installed"
    return out


def fingerprint(record: dict) -> str:
    """A short readable signature of what produced the numbers (like sacrebleu's Signature)."""
    v = record.get("versions", {})
    r = record.get("normalizers", {})
    rs = ",".join(f"{k}={r[k]:g}" for k in sorted(r))
    return (f"sago:{v.get('sago','?')}|model:{record['model']}@{str(record.get('weights_sha256') or '?')[:12]}"
            f"|dtype:{record.get('dtype')}|greedy|max_new:{record['decoding']['max_new_tokens']}"
            f"|seed:{record['seed']}|R:{rs}|torch:{v.get('torch','?')}|transformers:{v.get('transformers','?')}")


def local_decoding_record(info: dict, max_new_tokens: int, batch_size: int | None) -> dict:
    """The ``runs.decoding`` record of a local (hf_local) run, shared by the runner and the live page.

    Args:
        info: ``HFLocalBackend.info()`` (a backend without these keys records only the basics).
        max_new_tokens: the generation cap of the run.
        batch_size: prompts per generate call.
    Returns:
        ``{"greedy": True, "max_new_tokens", "batch_size", "generation_config" (the neutral
        settings passed to ``generate``), "model_generation_config_ignored" (the model folder's
        own defaults, not applied), "chat_template" (``PromptRenderer.template_record()``: template
        sha256, every render variable, the pinned date, how the user's text is encoded; a base model:
        ``{"template": None, ...}``), "linear_kernel" (``"onednn"`` | ``"torch"``, ``sago_engine.runtime.kernels``),
        "threads" (torch's CPU threads), "thread_choice" (what that count rests on: source, CPU affinity,
        cgroup quota, OMP_WAIT_POLICY; ``sago_engine.runtime.threads``; not watched on a resume), "drop_finished_fraction" (when finished rows leave a
        decoding batch, ``HFLocalBackend.DROP_FINISHED_FRACTION``), "kv_cache" (``"preallocated"``:
        ``hf_local.kvcache``; a stored ``"dynamic"`` is transformers' ``DynamicCache``), "prefill_buckets"
        (``{"max_pad_fraction", "min_rows"}``; a stored None: one padded prefill per batch), "packed_weights" (``{"rows", "mkl",
        "onednn", "bytes", "memory_bytes", "memory_source"}``, ``sago_engine.runtime.kernels.pack_linear_weights``;
        absent when packing is off or does not apply), "context_length" (tokens of prompt + reply the
        model's positions cover, ``backends.context.context_length``; a longer prompt is an error
        row)}``; keys the backend does not report are left out.
    """
    dec = {k: v for k, v in (info.get("decoding") or {}).items() if k not in ("greedy", "batch_size", "max_new_tokens")}
    out = {"greedy": True, "max_new_tokens": max_new_tokens, "batch_size": batch_size, **dec}
    if info.get("chat_template") is not None:
        out["chat_template"] = info["chat_template"]
    for key in (*ENGINE_DECODING_KEYS, "thread_choice"):
        if info.get(key) is not None:
            out[key] = info[key]
    if info.get("context_length") is not None:
        out["context_length"] = int(info["context_length"])
    return out
