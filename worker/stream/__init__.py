"""The stream shell: a Faust worker between pages.raw and pages.clean / templates.events / pages.dead.

app.py      the Faust app, topics and the worker (decode -> engine.pipeline.decide -> send)
inbox.py    pages.raw records handed from the consumer's fetch to the worker a batch at a time
commits.py  offset commits that never pass over an unprocessed message
outputs.py  every output sized before it is sent: lean clean pages, dead letters that fit
store.py    Faust's RocksDB store, plus what to do with a corrupt partition database
tansu.py    the client-side workaround for the Tansu test broker (off against Kafka)
kafka_io.py plain aiokafka producer/consumer helpers for the produce/consume commands
metrics.py  Prometheus metrics, liveness and readiness endpoints
commands.py the CLI commands: worker, produce, consume
The per-host state's changelog records are state/changelog.py's.
"""
