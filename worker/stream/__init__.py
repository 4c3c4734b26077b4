"""The stream shell: a Faust worker between pages.raw and pages.clean / templates.events / pages.dead.

app.py      the Faust app, topics and the agent (decode -> pipeline.decide -> send)
state.py    the per-host state on the changelog: page deltas, snapshots, rebuild (pure)
tansu.py    the client-side workaround for the Tansu test broker (off against Kafka)
kafka_io.py plain aiokafka producer/consumer helpers for the produce/consume commands
commands.py the CLI commands: worker, broker, produce, consume, bench-stream
bench.py    the stream benchmark
"""
