#!/usr/bin/env bash
# make bench: every speed figure README gives, in one run on one machine (the machine's
# speed moves between runs, so figures taken apart do not compare):
#   1. the engine against the parse + text floor, resiliparse and trafilatura, one core;
#   2. `run --jobs 2` against `--jobs 1`, the outputs compared;
#   3. the stream worker against the offline engine on a fresh bundled broker, outputs compared
#      (the small pages also over a run six times as long);
#   4. a long single-host run showing the host's table levels off.
# On the development corpora and crawl at ../shared when present, else on a generated
# sample crawl (built here, in build/bench-sample). Installs the `bench` extra (resiliparse,
# trafilatura) into .venv first, so that `bench` times them; where it cannot, `bench` says
# they were skipped. Prints figures; asserts nothing about time.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

if ! "$BIN/python" -c "import resiliparse, trafilatura" 2>/dev/null; then
  echo "== installing the bench extra (resiliparse, trafilatura) into .venv"
  "$BIN/pip" install --quiet -e '.[bench]' || echo "could not install them: bench times the engine and the floor only"
fi

SHARED=../shared
if [ -d "$SHARED/corpora" ] && [ -f "$SHARED/crawl/pages.jsonl.gz" ]; then
  CORPORA=("$SHARED"/corpora/*/ "$SHARED/crawl")
  CRAWL="$SHARED/crawl/pages.jsonl.gz"
  SMALL="$SHARED/corpora/site-antsr-pkgdown/pages.jsonl.gz"
  # The small pages once more over a run six times as long (each host's pages again under
  # new URLs): the worker's figure there is lower (docs/stream.md, "A longer run of the same
  # benchmark").
  STREAMS=("--corpus $SMALL --hosts 8 --partitions 4" "--corpus $CRAWL --hosts 1"
           "--corpus $SMALL --hosts 8 --partitions 4 --rounds 6")
else
  echo "$SHARED/corpora and $SHARED/crawl are not here: measuring a generated sample crawl instead"
  "$BIN/detemplate" sample build/bench-sample --sites 40 --pages 100 >/dev/null
  CORPORA=(build/bench-sample)
  CRAWL=build/bench-sample/pages.jsonl.gz
  STREAMS=("--corpus $CRAWL --hosts 1")
fi

echo
echo "== 1. the engine, the floor and the other extractors, one core: detemplate bench"
"$BIN/detemplate" bench "${CORPORA[@]}" --cpu 0 --repeat 3

echo
echo "== 2. run --jobs 2 against --jobs 1: scripts/measure_jobs.py"
# Three rounds: the median of two is their mean, which one slow round pulls along.
"$BIN/python" scripts/measure_jobs.py "$CRAWL" --jobs 2 --rounds 3

echo
echo "== 3. the stream worker against offline: detemplate bench-stream"
for args in "${STREAMS[@]}"; do
  # shellcheck disable=SC2086  # the arguments split on purpose
  "$BIN/detemplate" bench-stream --no-recovery $args 2>&1 | grep -v " INFO "
done

echo
echo "== 4. one host's table over a long run: detemplate bench --long-host"
"$BIN/detemplate" bench --long-host 5000 --synthetic
