#!/bin/sh
# Create detemplate's topics (idempotent). Run with the Kafka CLI on PATH or in /opt/kafka/bin
# (the apache/kafka image). Used by deploy/compose.yaml and the Kubernetes Job in topics-job.yaml.
#
# Environment (defaults in brackets):
#   BOOTSTRAP           broker list host:port                                   [kafka:9092]
#   PARTITIONS          partitions of pages.raw and of the state changelog      [16]
#   OUT_PARTITIONS      partitions of pages.clean, templates.events, pages.dead [$PARTITIONS]
#   REPLICATION         replication factor of every topic                       [3]
#   MIN_ISR             min.insync.replicas                                     [2, 1 if REPLICATION is 1]
#   RAW_RETENTION_MS    how long pages.raw is kept (a replay window)            [259200000 = 3 days]
#   OUT_RETENTION_MS    how long pages.clean and templates.events are kept      [604800000 = 7 days]
#   DEAD_RETENTION_MS   how long pages.dead is kept                             [1209600000 = 14 days]
#   APP_ID / TOPIC_*    as DETEMPLATE_APP_ID / DETEMPLATE_TOPIC_* of the workers
set -eu
BOOTSTRAP=${BOOTSTRAP:-kafka:9092}
PARTITIONS=${PARTITIONS:-16}
OUT_PARTITIONS=${OUT_PARTITIONS:-$PARTITIONS}
REPLICATION=${REPLICATION:-3}
if [ "$REPLICATION" -gt 1 ]; then MIN_ISR=${MIN_ISR:-2}; else MIN_ISR=${MIN_ISR:-1}; fi
RAW_RETENTION_MS=${RAW_RETENTION_MS:-259200000}
OUT_RETENTION_MS=${OUT_RETENTION_MS:-604800000}
DEAD_RETENTION_MS=${DEAD_RETENTION_MS:-1209600000}
APP_ID=${APP_ID:-detemplate}
TOPIC_RAW=${TOPIC_RAW:-pages.raw}
TOPIC_CLEAN=${TOPIC_CLEAN:-pages.clean}
TOPIC_EVENTS=${TOPIC_EVENTS:-templates.events}
TOPIC_DEAD=${TOPIC_DEAD:-pages.dead}
TOPIC_STATE=${TOPIC_STATE:-detemplate.state}

if command -v kafka-topics.sh >/dev/null 2>&1; then TOPICS=kafka-topics.sh; else TOPICS=/opt/kafka/bin/kafka-topics.sh; fi

create() {  # name partitions config...
    name=$1; parts=$2; shift 2
    set -- $(for c in "$@"; do printf -- '--config %s ' "$c"; done)
    "$TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists --topic "$name" \
        --partitions "$parts" --replication-factor "$REPLICATION" --config "min.insync.replicas=$MIN_ISR" "$@"
}

# Input: keyed by host; its partition count fixes which worker owns a host. Never change it
# on a running deployment (hosts would move to partitions whose state does not hold them).
create "$TOPIC_RAW" "$PARTITIONS" cleanup.policy=delete "retention.ms=$RAW_RETENTION_MS"
# State changelog: one partition per input partition, compacted and never deleted by time.
# Each host keeps 2K page deltas + 2 snapshots under fixed keys, so compaction bounds it.
create "$TOPIC_STATE" "$PARTITIONS" cleanup.policy=compact retention.ms=-1 \
    min.cleanable.dirty.ratio=0.2 segment.ms=3600000
create "$TOPIC_CLEAN" "$OUT_PARTITIONS" cleanup.policy=delete "retention.ms=$OUT_RETENTION_MS" compression.type=producer
create "$TOPIC_EVENTS" "$OUT_PARTITIONS" cleanup.policy=delete "retention.ms=$OUT_RETENTION_MS"
create "$TOPIC_DEAD" "$OUT_PARTITIONS" cleanup.policy=delete "retention.ms=$DEAD_RETENTION_MS"
# Faust's leader-election topic (it would be auto-created otherwise).
create "$APP_ID-__assignor-__leader" 1 cleanup.policy=delete

"$TOPICS" --bootstrap-server "$BOOTSTRAP" --describe --topic "$TOPIC_RAW"
