"""Page-level template detection: per-block templateness from the page alone (cold start)."""
