#!/usr/bin/env bash
# make demo: the whole product on a machine that has nothing but this clone.
#  1. build a sample crawl of generated sites (no crawl of your own needed),
#  2. clean it with `detemplate run` (the embedded default, RocksDB state),
#  3. stream the same crawl through a worker on the bundled Tansu broker and check that
#     pages.clean holds exactly the bytes the offline run wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/.venv/bin
D=demo
rm -rf "$D"
mkdir -p "$D"

echo "== 1. a sample crawl: 6 generated sites, 40 pages each (one also has a /docs/ section of another page type)"
"$BIN/detemplate" sample "$D/sample" --sites 6 --pages 40

echo
echo "== 2. detemplate run (offline, state in $D/state)"
"$BIN/detemplate" run "$D/sample/crawl.warc.gz" --output "$D/clean.jsonl" --events "$D/events.jsonl" --state "$D/state"
echo
echo "-- one cleaned page, block by block:"
"$BIN/python" - "$D/clean.jsonl" <<'PY'
import json, sys
rec = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")][30]
print(f"{rec['url']}  (page {rec['page_no']} of its host, template cluster {rec['cluster']})")
blocks = rec["blocks"]
shown = blocks[:6] + [b for b in blocks[6:] if b["verdict"] == "content"][:4] + blocks[-3:]
for b in blocks:
    if b in shown:
        print(f"  {b['verdict']:8s} {b['method']:9s} ratio {b['ratio']:.2f}  {b['text'][:60]}")
print(f"  ({len(blocks)} blocks, {rec['counts']['template_blocks']} template; "
      f"{len(rec['links']['template'])} template links, {len(rec['links']['content'])} content links)")
print("kept text:", rec["text"][:240].replace("\n", " / "), "...")
PY
echo
echo "-- template events (the first two templates learned, and each new page type):"
grep -m 2 '"template.learned"' "$D/events.jsonl"
grep '"template.cluster_new"' "$D/events.jsonl" || true
echo
echo "-- quality against the sample's gold content:"
"$BIN/detemplate" eval "$D/sample" >"$D/eval.txt"
head -3 "$D/eval.txt"

echo
echo "== 3. the same crawl through a stream worker on the bundled Tansu broker"
PORT=$("$BIN/python" -c 'from detemplate.tools.broker import free_port; print(free_port())')
export DETEMPLATE_BROKER="kafka://127.0.0.1:$PORT" DETEMPLATE_TANSU=1 DETEMPLATE_PARTITIONS=4 DETEMPLATE_OUT_PARTITIONS=4
export DETEMPLATE_SESSION_TIMEOUT_S=6 DETEMPLATE_REBALANCE_TIMEOUT_S=6 DETEMPLATE_METRICS_PORT=-1
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
"$BIN/detemplate" broker --port "$PORT" --partitions 4 >"$D/broker.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "Tansu test broker on" "$D/broker.log" && break; sleep 0.2; done
grep -q "Tansu test broker on" "$D/broker.log" || { cat "$D/broker.log"; echo "the broker did not start"; exit 1; }
echo "broker on 127.0.0.1:$PORT (log: $D/broker.log)"
"$BIN/detemplate" worker --data-dir "$D/worker-state" >"$D/worker.log" 2>&1 &
pids+=($!)
echo "worker started (log: $D/worker.log)"
"$BIN/detemplate" produce "$D/sample/crawl.warc.gz"
total=$(wc -l <"$D/clean.jsonl")
"$BIN/detemplate" consume --topic pages.clean --count "$total" --timeout 240 --output "$D/stream-clean.jsonl"
"$BIN/python" - "$D/clean.jsonl" "$D/stream-clean.jsonl" <<'PY'
import json, sys
offline = {json.loads(l)["url"]: l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8")}
stream = {json.loads(l)["url"]: l.rstrip("\n") for l in open(sys.argv[2], encoding="utf-8")}
same = sum(1 for url, line in offline.items() if stream.get(url) == line)
print(f"pages.clean: {len(stream)} pages; {same} of {len(offline)} byte-identical to the offline run")
sys.exit(0 if same == len(offline) else 1)
PY
echo
echo "demo done: outputs in $D/ (clean.jsonl, events.jsonl, stream-clean.jsonl, state/)"
