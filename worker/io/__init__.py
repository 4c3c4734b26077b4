"""Input and output: sources (WARC, JSONL, folders of HTML) and the codec of every output record."""
