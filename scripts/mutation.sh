#!/usr/bin/env bash
# Mutation testing (mutmut) over the method's core, one module at a time (docs/TESTING.md).
#
#   bash scripts/mutation.sh                 # every module of MODULES below
#   bash scripts/mutation.sh scoring stats   # only these
#   MUTATION_CHILDREN=1 bash scripts/mutation.sh access
#   MUTATION_GLOB="sago_engine.scoring.stats.x_holm__mutmut_*" bash scripts/mutation.sh stats   # some functions only
#
# Each module runs in its own scratch copy of the tracked files ($MUTATION_DIR/<name>, default
# /tmp/sago-mutation), with only that file mutated and only the test files that kill its mutants
# fast selected. Prints one line per module: killed / total, the score, survivors, wall time; the
# surviving mutants' names are in $MUTATION_DIR/<name>/survivors.txt (`mutmut show NAME` there).
# Exit status 1 when a module scores below $MUTATION_MIN (default 90) percent.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PY:-$ROOT/.venv/bin/python}
MUTMUT=${MUTMUT:-$ROOT/.venv/bin/mutmut}
OUT=${MUTATION_DIR:-/tmp/sago-mutation}
CHILDREN=${MUTATION_CHILDREN:-2}
MIN=${MUTATION_MIN:-90}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# name | file to mutate | mutant-name glob ("" = all of the file) | test files that kill its mutants
MODULES=(
  "scoring|sago_engine/scoring/scores.py||tests/unit/scoring/test_scoring.py"
  "stats|sago_engine/scoring/stats.py||tests/unit/scoring/test_stats_columns.py tests/unit/scoring/test_stats.py --deselect=tests/unit/scoring/test_stats.py::test_significance_page_holm_switch_shows_raw_and_adjusted --deselect=tests/unit/scoring/test_stats.py::test_stats_pages_render --deselect=tests/unit/scoring/test_stats.py::test_sample_size_on_synthetic_store --deselect=tests/unit/scoring/test_stats.py::test_data_driven_normalizers_and_rescaled_scores"
  "axes_activation|sago_engine/axes/activation.py||tests/unit/axes/test_axes_exact.py tests/unit/axes/test_axes.py --deselect=tests/unit/axes/test_axes.py::test_identical_everything_gives_zero_on_all_axes tests/unit/axes/test_axes_paper_code.py::test_cos_last_layer_two_layer_case"
  "axes_confidence|sago_engine/axes/confidence.py||tests/unit/axes/test_axes_exact.py tests/unit/axes/test_axes.py --deselect=tests/unit/axes/test_axes.py::test_identical_everything_gives_zero_on_all_axes"
  "axes_generation|sago_engine/axes/generation.py||tests/unit/axes/test_axes_exact.py tests/unit/axes/test_axes.py::test_bleu_known_value_by_hand tests/unit/axes/test_axes.py::test_bleu_brevity_penalty_by_hand tests/unit/axes/test_axes.py::test_bleu_conventions tests/unit/axes/test_axes.py::test_delta_bleu_range tests/unit/axes/test_axes.py::test_bleu_tokenizer_by_script tests/unit/axes/test_axes.py::test_bleu_chinese_one_character_change tests/unit/axes/test_axes.py::test_bleu_whitespace_is_not_a_change"
  "axes_mirroring|sago_engine/axes/mirroring.py||tests/unit/axes/test_axes_exact.py tests/unit/axes/test_axes.py --deselect=tests/unit/axes/test_axes.py::test_identical_everything_gives_zero_on_all_axes"
  "axes_mirroring_code|sago_engine/axes/mirroring_code.py||tests/unit/axes/test_axes_exact.py tests/unit/axes/test_axes_paper_code.py::test_noise_counts_by_hand tests/unit/axes/test_axes_paper_code.py::test_pairwise_thresholds_by_hand tests/unit/axes/test_axes_paper_code.py::test_code_mr_options_by_hand tests/unit/axes/test_axes_paper_code.py::test_code_mr_rows_and_plain_axes_unchanged"
  "axes_noise|sago_engine/axes/noise.py||tests/unit/axes/test_axes_exact.py tests/unit/axes/test_axes.py::test_noise_tolerance_per_axis_snaps_only_below_tol"
  "axes_pairs|sago_engine/axes/pairs.py||tests/unit/axes/test_axes_exact.py"
  "surface_noise|sago_engine/variants/surface_noise.py||tests/unit/variants/test_surface_noise.py tests/unit/variants/test_variants.py::test_fixed_vectors tests/unit/variants/test_variants.py::test_issue_equation_untouched_by_punctuation_noise tests/unit/variants/test_variants.py::test_region_of_only_protected_text_grows_to_the_nearest_word tests/unit/variants/test_variants.py::test_denoise_says_a_changed_protected_span_is_not_meaning_preserving tests/unit/variants/test_variants.py::test_markdown_protected_spans_and_denoise_of_broken_structure"
  "protected_spans|sago_engine/variants/_text.py|sago_engine.variants._text.x_protected_spans__mutmut_* sago_engine.variants._text.x__find_protected__mutmut_* sago_engine.variants._text.x__find_markdown__mutmut_* sago_engine.variants._text.x__core__mutmut_* sago_engine.variants._text.x__mask__mutmut_* sago_engine.variants._text.x__code_blocks__mutmut_* sago_engine.variants._text.x__math_and_numbers__mutmut_* sago_engine.variants._text.x__merge__mutmut_*|tests/unit/variants/test_protected_spans.py tests/unit/variants/test_variants.py::test_protected_spans_of_each_kind tests/unit/variants/test_variants.py::test_issue_equation_untouched_by_punctuation_noise tests/unit/variants/test_variants.py::test_markdown_protected_spans_and_denoise_of_broken_structure tests/unit/variants/test_variants.py::test_fixed_vectors"
  "suffstats|sago_engine/store/suffstats.py||tests/unit/store/test_suffstats.py"
  "scores|sago_engine/store/reads/scores.py||tests/unit/store/test_score_queries.py"
  "urlstate|dashboard/urlstate.py||tests/unit/dashboard/test_url_state_units.py"
  "parse_verdict|sago_engine/measure/judge.py|sago_engine.measure.judge.x_parse_verdict__mutmut_*|tests/integration/measure/test_judge.py::test_parse_verdict_edge_cases"
  "correctness_scorers|sago_engine/correctness/scorers.py||tests/unit/correctness/test_correctness_scorers.py"
  "access|dashboard/access.py||tests/unit/dashboard/test_access.py tests/integration/dashboard/test_app.py::test_confined_store_refuses_paths_out_of_the_shared_folder tests/integration/dashboard/test_app.py::test_access_mode_from_environment"
)

want=("$@")
status=0
mkdir -p "$OUT"
printf '%-14s %8s %8s %7s %9s %8s\n' module killed total score survived wall_s
for spec in "${MODULES[@]}"; do
  IFS='|' read -r name file glob tests <<<"$spec"
  glob=${MUTATION_GLOB:-$glob}
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  work="$OUT/$name"
  rm -rf "$work"
  mkdir -p "$work"
  # the tracked files (a scratch copy: mutmut writes mutants/ and its cache next to its config)
  git ls-files -z | grep -zv '^data/.*\.duckdb$' | xargs -0 cp --parents -t "$work"
  src=${file%%/*}
  {
    echo "[mutmut]"
    echo "source_paths=$src"
    echo "only_mutate=$file"
    echo "also_copy="
    for p in sago_engine dashboard precompute pages app.py data pytest.ini; do [ "$p" = "$src" ] || echo "    $p"; done
    printf "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n"
    echo "pytest_add_cli_args_test_selection="
    for t in $tests; do echo "    $t"; done
    echo "process_isolation=forkserver"
    echo "use_git_change_detection=false"
  } >"$work/setup.cfg"
  t0=$(date +%s)
  # shellcheck disable=SC2086  # each glob is one argument
  (cd "$work" && set -f && "$MUTMUT" run --max-children "$CHILDREN" $glob >"$work/run.log" 2>&1) || true
  wall=$(( $(date +%s) - t0 ))
  (cd "$work" && "$MUTMUT" results --all true >"$work/results.txt" 2>&1) || true
  read -r killed total survived < <("$PY" - "$work/results.txt" "$glob" <<'EOF'
import fnmatch, sys
rows = [ln.strip().rsplit(": ", 1) for ln in open(sys.argv[1]) if ": " in ln]
globs = sys.argv[2].split()
rows = [(n, s) for n, s in rows if not globs or any(fnmatch.fnmatch(n, g) for g in globs)]
killed = sum(s in ("killed", "timeout", "segfault", "caught by type check") for _, s in rows)
surv = [n for n, s in rows if s not in ("killed", "timeout", "segfault", "caught by type check")]
open(sys.argv[1].replace("results.txt", "survivors.txt"), "w").write("".join(f"{n}\n" for n in surv))
print(killed, len(rows), len(surv))
EOF
)
  score=$("$PY" -c "print(f'{100*$killed/max($total,1):.1f}')")
  printf '%-14s %8s %8s %6s%% %9s %8s\n' "$name" "$killed" "$total" "$score" "$survived" "$wall"
  if [ "$total" -eq 0 ] || "$PY" -c "import sys; sys.exit(0 if $killed*100 < $MIN*$total else 1)"; then status=1; fi
done
exit $status
