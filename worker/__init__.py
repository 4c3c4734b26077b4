"""detemplate: per-host web page template detection for crawl pipelines."""

__version__ = "0.1.0"
