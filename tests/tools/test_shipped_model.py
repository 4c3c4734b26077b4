"""The shipped page-level weights are trained on ../shared/crawl, never on the evaluation corpora.

Retraining with `detemplate train-pagelevel` on the crawl, with the engine's defaults,
must give the shipped file exactly (the training is deterministic): the weights in the
package are what that command makes, nothing tuned by hand or on ../shared/corpora.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from detemplate.cli import main

CRAWL = Path(__file__).resolve().parents[3] / "shared" / "crawl" / "pages.jsonl.gz"


@pytest.mark.corpora
@pytest.mark.slow
def test_shipped_weights_are_the_crawl_trained_ones(tmp_path: Path) -> None:
    if not CRAWL.is_file():
        pytest.skip(f"the training crawl is not at {CRAWL}")
    out = tmp_path / "model.json"
    assert main(["train-pagelevel", str(CRAWL), "-o", str(out)]) == 0
    shipped = json.loads(resources.files("detemplate.engine.detectors").joinpath("data/pagelevel.json").read_text())
    assert json.loads(out.read_text()) == shipped
