#!/usr/bin/env bash
# Starts the dashboard (installs what is needed the first time).
#
#   bash scripts/dashboard.sh                 local: http://127.0.0.1:8501 only, any store, Live page
#   bash scripts/dashboard.sh STORE.duckdb    the same, opened on that store (as SAGO_STORE=STORE.duckdb)
#   bash scripts/dashboard.sh --share DIR     meeting: reachable from the network, read-only, stores
#                                             from DIR only, no Live page, no writes
#   bash scripts/dashboard.sh --share DIR --live   the same plus the Live page (runs models, saves probes)
#   bash scripts/dashboard.sh --share DIR --store NAME   visitors land on DIR/NAME (else on DIR's
#                                             sago_demo.duckdb, else on DIR's only store; several stores
#                                             and none named: visitors pick one). A DIR without any
#                                             store gets a copy of data/sago_demo.duckdb.
# Optional password in share mode: sago_password = "…" in .streamlit/secrets.toml; a file that does not
# parse, or a password that is not a non-empty string, refuses to share.
# Other arguments go to `streamlit run` (e.g. --server.port 8600).
set -euo pipefail
here="$PWD"  # a store named on the command line is relative to the caller's folder
cd "$(dirname "$0")/.."
share="" live=0 store="" open_store="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --share) [ $# -ge 2 ] || { echo "--share needs a folder" >&2; exit 2; }; share="$2"; shift 2 ;;
    --share=*) share="${1#--share=}"; shift ;;
    --live) live=1; shift ;;
    --store) [ $# -ge 2 ] || { echo "--store needs a file name" >&2; exit 2; }; store="$2"; shift 2 ;;
    --store=*) store="${1#--store=}"; shift ;;
    *.duckdb) open_store="$1"; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done
# a store named on the command line (as `sago dashboard STORE`): local mode only, and it must exist
if [ -n "$open_store" ]; then
  case "$open_store" in /*) ;; *) open_store="$here/$open_store" ;; esac
  [ -z "$share" ] || { echo "$open_store: with --share DIR, name a store of DIR with --store NAME" >&2; exit 2; }
  [ -f "$open_store" ] || { echo "$open_store: no such store file" >&2; exit 2; }
  export SAGO_STORE="$(cd "$(dirname "$open_store")" && pwd)/$(basename "$open_store")"
fi
[ -n "${SAGO_SKIP_SETUP:-}" ] || bash scripts/setup.sh  # SAGO_SKIP_SETUP=1: tests (venv already set up)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# OpenMP's idle threads sleep instead of spinning: a busy neighbour on the machine then does not
# multiply the Live page's latency (sago_engine/runtime/threads.py); a value set by the caller is kept
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}" KMP_BLOCKTIME="${KMP_BLOCKTIME:-0}"
# load the Live page's default model and the BERTScore encoder in the background at start (0: don't)
export SAGO_LIVE_WARMUP="${SAGO_LIVE_WARMUP:-1}"
unset SAGO_SHARE_DIR SAGO_LIVE
address=127.0.0.1
opts=()
if [ -n "$share" ]; then
  [ -d "$share" ] || { echo "--share: $share is not a folder" >&2; exit 2; }
  export SAGO_SHARE_DIR="$(cd "$share" && pwd)"
  if [ -n "$store" ]; then
    case "$store" in */*) echo "--store: give a file name inside $share, not a path" >&2; exit 2 ;; esac
    [ -f "$SAGO_SHARE_DIR/$store" ] || { echo "--store: $store is not a file in $share" >&2; exit 2; }
    export SAGO_STORE="$SAGO_SHARE_DIR/$store"
  elif ! ls "$SAGO_SHARE_DIR"/*.duckdb >/dev/null 2>&1 && [ -f data/sago_demo.duckdb ]; then
    cp data/sago_demo.duckdb "$SAGO_SHARE_DIR/"
    echo "--share: $share held no store; copied the demo store into it (visitors land on it)" >&2
  fi
  [ "$live" = 1 ] && export SAGO_LIVE=1
  address=0.0.0.0
  # fail closed: a meeting password that exists but cannot be read stops here (dashboard/password.py)
  .venv/bin/python -m dashboard.password ${extra[@]+"${extra[@]}"} || exit 2
  # no tracebacks (server paths) for visitors; never rerun on file changes
  opts+=(--client.showErrorDetails type --server.runOnSave false --server.fileWatcherType none)
elif [ "$live" = 1 ]; then
  echo "--live only matters with --share DIR (local mode always has the Live page)" >&2
elif [ -n "$store" ]; then
  echo "--store only matters with --share DIR (local mode: SAGO_STORE=/path/run.duckdb or the sidebar)" >&2
fi
exec .venv/bin/python -m streamlit run app.py --server.headless true --server.address "$address" \
  --browser.gatherUsageStats false --client.toolbarMode viewer --client.showSidebarNavigation false \
  ${opts[@]+"${opts[@]}"} ${extra[@]+"${extra[@]}"}
