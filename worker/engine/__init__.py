"""The engine: pure; a page and its host's table in, an outcome out. No I/O, no logging."""
