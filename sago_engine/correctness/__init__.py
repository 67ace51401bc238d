"""Correctness of stored replies against their prompts' references, beside the six axes (never in SGS).

Modules (docs/ARCHITECTURE.md has the full map):

* ``scorers`` — the named, versioned scorers (pure functions of reply and reference) and the
  per-dataset defaults.
* ``judge``   — the LLM-judge scorer (any backend; raw answers kept, strict YES/NO parsing).
* ``compare`` — what users compare: accuracy, paired change, flip rates with McNemar's exact
  test, PromptBench's PDR, SCORE's consistency rate, and whether s_X predicts flips (AUROC).
* ``rescore`` — ``python -m precompute rescore STORE --correctness``: verdicts for stored replies.
* ``inspect_scorers`` — an Inspect task's own offline scorer (inspect_ai's code) on stored replies; the
  scorers it cannot run stored "not run" with the reason.
"""
