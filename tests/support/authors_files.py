"""Small results files in the exact column formats of the SAGO authors' released CSVs (written here,
not copied from them): a combined file of the newer format, one of the older format (with the
length-mirroring columns), a per-model file, a closed-model file, an older run that a later one
replaces, and a ``trash`` folder that must be skipped; and a small sago run of one of the paper's models
(``add_sago_run``) for the audit view."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

from sago_engine.store import open_store
from sago_engine.types import DEFAULT_NORMALIZERS

NEW = ["model", "prompt_id", "place", "strength", "category", "prompt_orig", "prompt_pert", "bertscore_prompt",
       "response_orig", "response_pert", "bleu", "bertscore_response", "activation_similarity", "delta_log_prob",
       "entropy_shift", "mirroring_rate", "delta_bleu", "delta_bertscore_prompt", "delta_bertscore_response",
       "delta_activation_similarity", "delta_mirroring_rate"]
OLD = ["model", "prompt_id", "place", "strength", "category", "prompt_orig", "prompt_pert", "bertscore_prompt",
       "response_orig", "response_pert", "bleu", "bertscore_response", "activation_similarity", "delta_log_prob",
       "entropy_shift", "jsd_drift", "mirroring_verdict", "mirroring_length_ratio", "mirroring_expected_ratio",
       "mirroring_rate_batch", "mirroring_rate", "delta_bleu", "delta_bertscore_prompt", "delta_bertscore_response",
       "delta_activation_similarity", "delta_jsd_drift", "delta_mirroring_rate"]
PER_MODEL = ["model", "prompt_id", "place", "strength", "category", "prompt_orig", "prompt_pert", "bertscore_prompt",
             "response_orig", "response_pert", "bleu", "bertscore_response", "activation_similarity", "delta_log_prob",
             "entropy_shift", "jsd_drift", "delta_bleu", "delta_bertscore_prompt", "delta_bertscore_response",
             "delta_activation_similarity", "delta_jsd_drift"]

P0 = "Who wrote the novel Dracula?"
P1 = "Which assistant helped Sherlock Holmes?"
G_HEAD, G_TAIL = "user\n", "\nmodel\n"
L_TAIL = "assistant\n\n"

GEMMA_ROWS = [  # spacing, G-2B: prompt 0 leaks a tail, prompt 1 (longest) none
    {"model": "G-2B", "prompt_id": "0", "place": "prefix", "strength": "0", "category": "alpaca",
     "prompt_orig": P0, "prompt_pert": P0, "bertscore_prompt": "1.0",
     "response_orig": "the novel Dracula?" + G_TAIL + "Bram Stoker wrote Dracula in 1897.",
     "response_pert": "the novel Dracula?" + G_TAIL + "Bram Stoker wrote Dracula in 1897.",
     "bleu": "100.00000000000004", "bertscore_response": "1.0", "activation_similarity": "0.99951171875",
     "delta_log_prob": "-0.0", "entropy_shift": "0.0", "mirroring_rate": "0", "delta_bleu": "0.0",
     "delta_bertscore_prompt": "0.0", "delta_bertscore_response": "0.0", "delta_activation_similarity": "0.0",
     "delta_mirroring_rate": "0.0"},
    {"model": "G-2B", "prompt_id": "0", "place": "prefix", "strength": "5", "category": "alpaca",
     "prompt_orig": P0, "prompt_pert": "     " + P0, "bertscore_prompt": "0.9871",
     "response_orig": "the novel Dracula?" + G_TAIL + "Bram Stoker wrote Dracula in 1897.",
     "response_pert": G_HEAD + "     " + P0 + G_TAIL + "Dracula   was   written by Bram Stoker.",
     "bleu": "12.5", "bertscore_response": "0.91", "activation_similarity": "0.9625",
     "delta_log_prob": "-312.5", "entropy_shift": "0.25", "mirroring_rate": "1", "delta_bleu": "-87.5",
     "delta_bertscore_prompt": "-0.0129", "delta_bertscore_response": "-0.09", "delta_activation_similarity": "-0.037109375",
     "delta_mirroring_rate": "1.0"},
    {"model": "G-2B", "prompt_id": "1", "place": "prefix", "strength": "0", "category": "alpaca",
     "prompt_orig": P1, "prompt_pert": P1, "bertscore_prompt": "1.0",
     "response_orig": "Doctor Watson assisted Holmes.", "response_pert": "Doctor Watson assisted Holmes.",
     "bleu": "100.00000000000004", "bertscore_response": "1.0", "activation_similarity": "1.0009765625",
     "delta_log_prob": "-0.0", "entropy_shift": "0.0", "mirroring_rate": "0", "delta_bleu": "0.0",
     "delta_bertscore_prompt": "0.0", "delta_bertscore_response": "0.0", "delta_activation_similarity": "0.0",
     "delta_mirroring_rate": "0.0"},
    {"model": "G-2B", "prompt_id": "1", "place": "prefix", "strength": "5", "category": "alpaca",
     "prompt_orig": P1, "prompt_pert": "  Which  assistant helped Sherlock Holmes?", "bertscore_prompt": "0.99",
     "response_orig": "Doctor Watson assisted Holmes.", "response_pert": "Doctor Watson assisted Holmes.",
     "bleu": "100.00000000000004", "bertscore_response": "1.0", "activation_similarity": "0.98",
     "delta_log_prob": "-4.25", "entropy_shift": "0.0625", "mirroring_rate": "0", "delta_bleu": "0.0",
     "delta_bertscore_prompt": "-0.01", "delta_bertscore_response": "0.0",
     "delta_activation_similarity": "-0.0209765625", "delta_mirroring_rate": "0.0"},
]

OLD_GEMMA_ROWS = [dict(r, response_pert="An older run's reply.") for r in GEMMA_ROWS[:2]]

LLAMA_LENGTH_ROWS = [  # older format, L3.1-8B; prompt 1 contains "assistant", its leak starts inside it
    {"model": "L3.1-8B", "prompt_id": "1", "place": "global", "strength": "1.0", "category": "hotpot_qa",
     "prompt_orig": P1, "prompt_pert": P1, "bertscore_prompt": "1.0",
     "response_orig": "assistant helped Sherlock Holmes?" + L_TAIL + "Dr. John Watson.",
     "response_pert": "assistant helped Sherlock Holmes?" + L_TAIL + "Dr. John Watson.",
     "bleu": "100.00000000000004", "bertscore_response": "1.0", "activation_similarity": "0.99951171875",
     "delta_log_prob": "0.0", "entropy_shift": "0.0", "jsd_drift": "", "mirroring_verdict": "YES",
     "mirroring_length_ratio": "1.0", "mirroring_expected_ratio": "1.0", "mirroring_rate_batch": "1.0",
     "mirroring_rate": "1.0", "delta_bleu": "0.0", "delta_bertscore_prompt": "0.0",
     "delta_bertscore_response": "0.0", "delta_activation_similarity": "0.0", "delta_jsd_drift": "",
     "delta_mirroring_rate": "0.0"},
    {"model": "L3.1-8B", "prompt_id": "1", "place": "global", "strength": "0.25", "category": "hotpot_qa",
     "prompt_orig": P1, "prompt_pert": "Holmes's assistant?", "bertscore_prompt": "0.9",
     "response_orig": "assistant helped Sherlock Holmes?" + L_TAIL + "Dr. John Watson.",
     "response_pert": "The assistant of Holmes was Dr. Watson, a former army doctor.",
     "bleu": "4.2", "bertscore_response": "0.88", "activation_similarity": "0.9",
     "delta_log_prob": "31.5", "entropy_shift": "0.125", "jsd_drift": "", "mirroring_verdict": "NO",
     "mirroring_length_ratio": "3.33", "mirroring_expected_ratio": "0.25", "mirroring_rate_batch": "0.0",
     "mirroring_rate": "0.0", "delta_bleu": "-95.8", "delta_bertscore_prompt": "-0.1",
     "delta_bertscore_response": "-0.12", "delta_activation_similarity": "-0.09951171875", "delta_jsd_drift": "",
     "delta_mirroring_rate": "-1.0"},
]

SALAD = "Rowalmynh GCạch QEcosystem rowið matchingalahið المصitinh näaph쉞료zed tailingsola arjanghlenzo 丝ruction"
SALAD2 = "Gluten-quo Rorcaand xorsلاهzu료 irmad baralabane واخرщенко dioxide бالنسبة렘 rowalkealah lalah.ณาletuble"
SALAD_ROWS = [  # per-model file of the older layout, G4-E4B: token salad on both sides
    {"model": "G4-E4B", "prompt_id": str(i), "place": "global", "strength": s, "category": "alpaca",
     "prompt_orig": p, "prompt_pert": p if s == "0" else p.upper(), "bertscore_prompt": "1.0",
     "response_orig": SALAD, "response_pert": SALAD if s == "0" else SALAD2,
     "bleu": "100.00000000000004" if s == "0" else "3.1", "bertscore_response": "1.0" if s == "0" else "0.81",
     "activation_similarity": "1.0", "delta_log_prob": "0.0" if s == "0" else "-22.0",
     "entropy_shift": "0.0" if s == "0" else "0.18", "jsd_drift": "", "delta_bleu": "0.0" if s == "0" else "-96.9",
     "delta_bertscore_prompt": "0.0", "delta_bertscore_response": "0.0" if s == "0" else "-0.19",
     "delta_activation_similarity": "0.0" if s == "0" else "-0.09", "delta_jsd_drift": ""}
    for i, p in enumerate([P0, P1]) for s in ("0", "50")
]

GPT_ROWS = [  # closed model, politeness: no activations, no leak detection
    {"model": "gpt-5.4", "prompt_id": "0", "place": "suffix", "strength": s, "category": "alpaca",
     "prompt_orig": P0, "prompt_pert": P0 if s == "0" else P0 + " You useless machine.", "bertscore_prompt": "1.0",
     "response_orig": "Bram Stoker.", "response_pert": "Bram Stoker." if s == "0" else "It was Bram Stoker.",
     "bleu": "100.00000000000004" if s == "0" else "42.0", "bertscore_response": "1.0",
     "activation_similarity": "", "delta_log_prob": "", "entropy_shift": "0.0" if s == "0" else "0.5",
     "mirroring_rate": "0.0", "delta_bleu": "0.0" if s == "0" else "-58.0", "delta_bertscore_prompt": "0.0",
     "delta_bertscore_response": "0.0" if s == "0" else "-0.05", "delta_activation_similarity": "",
     "delta_mirroring_rate": "0.0"}
    for s in ("0", "-10")
]


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> Path:
    """Write ``rows`` with exactly ``columns`` (pandas-style quoting: minimal, "" inside quotes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in columns})
    return path


def make_clone(root: Path) -> Path:
    """A folder laid out like a clone of the authors' repository, holding the files above."""
    res = root / "results"
    write_csv(res / "spacing/run_multi_alpaca_20260101_000000/full_results_all_models.csv", NEW, OLD_GEMMA_ROWS)
    write_csv(res / "spacing/run_multi_alpaca_20260102_000000/full_results_all_models.csv", NEW, GEMMA_ROWS)
    write_csv(res / "spacing/run_multi_alpaca_20260102_000000/G-2B_results.csv", PER_MODEL, GEMMA_ROWS)
    write_csv(res / "length_variation/run_multi_hotpot_qa_20260103_120000/full_results_all_models.csv", OLD,
              LLAMA_LENGTH_ROWS)
    write_csv(res / "letter_case/run_multi_alpaca_20260104_000000/G4-E4B_results.csv", PER_MODEL, SALAD_ROWS)
    write_csv(res / "closed_models/run_gpt_5_4_alpaca_politeness_20260425_192102/full_results_all_models.csv",
              NEW, GPT_ROWS)
    write_csv(res / "trash/run_multi_alpaca_20250101_000000/full_results_all_models.csv", NEW, GEMMA_ROWS)
    return root


def add_sago_run(path):
    """A sago run of Gemma-2B-IT (the paper_code label) with hand-set deltas: 2 prompts; plain axes
    and the authors' option axes, one Δ-Prob beyond R (−500 nats: Δ/R = −2 unclipped)."""
    run = "run-sago-g2b"
    cfg = json.dumps({"run_model": {"key": "google/gemma-2b-it"}})
    rows = {  # (prompt, variant) → axis → Δ
        ("sago:0", "sago:0/v0"): {"bleu": -50.0, "prob": -100.0, "cos": -0.2, "prob@base_reply": -500.0,
                                  "cos@last_layer": -0.5},
        ("sago:0", "sago:0/v1"): {"bleu": -30.0},
        ("sago:1", "sago:1/v0"): {"bleu": -20.0, "prob": -50.0, "cos": -0.1, "prob@base_reply": -125.0,
                                  "cos@last_layer": -0.3},
    }
    deltas = []
    for (pid, vid), vals in rows.items():
        for ax, d in vals.items():
            r = DEFAULT_NORMALIZERS[ax.split("@")[0]]
            deltas.append((run, "alpaca", pid, vid, ax, d, max(-1.0, min(1.0, d / r)), True, None, None))
    with open_store(path, read_only=False) as st:
        st.insert_df("runs", pd.DataFrame([{"run_id": run, "model": "Gemma-2B-IT · paper code", "backend": "hf_local",
                                            "seed": 1, "normalizers": json.dumps(DEFAULT_NORMALIZERS),
                                            "status": "complete", "fingerprint": "sago|g2b", "config": cfg}]))
        st.insert_df("prompts", pd.DataFrame([{"prompt_id": p, "dataset": "alpaca", "source_id": p[-1], "text": p}
                                              for p in ("sago:0", "sago:1")]))
        st.insert_df("variants", pd.DataFrame([{"variant_id": v, "prompt_id": p, "family": "surface_noise",
                                                "subtype": "spacing", "strength": 1.0, "position": "GLOBAL",
                                                "text": v, "seed": 0, "kept": True} for p, v in rows]))
        st.insert_df("deltas", pd.DataFrame(deltas, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                             "delta", "delta_norm", "available", "reason", "detector"]))

