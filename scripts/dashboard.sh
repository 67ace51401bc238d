#!/usr/bin/env bash
# Installs what is needed (first time only) and starts the dashboard on the bundled demo store.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/python -m streamlit run app.py --server.headless true --browser.gatherUsageStats false --client.toolbarMode minimal "$@"
