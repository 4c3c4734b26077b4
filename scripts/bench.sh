#!/usr/bin/env bash
# make bench: the detector's speed against a bare lexbor parse + text walk of the same
# pages, latency and state size; then a long single-host run showing the table levels off.
# Uses the development corpora at ../shared/corpora when present, else a generated crawl.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
if [ -d ../shared/corpora ]; then
  "$BIN/detemplate" bench ../shared/corpora/*/ --cpu 0
else
  echo "../shared/corpora is not here: benchmarking a generated sample crawl instead"
  "$BIN/detemplate" sample build/bench-sample --sites 20 --pages 50 >/dev/null
  "$BIN/detemplate" bench build/bench-sample --cpu 0
fi
"$BIN/detemplate" bench --long-host 5000 --synthetic
