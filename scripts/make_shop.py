"""Write generated bookshops as corpus folders that `detemplate eval` scores by `must_keep`.

    python scripts/make_shop.py OUT_DIR [--pages 400]
    detemplate eval OUT_DIR/shop-*/

One folder a markup style (detemplate.tools.samples.SHOP_STYLES): pages.jsonl.gz in crawl
order and gold.jsonl.gz with each page's `must_keep` values (its title, author, price and
attribute values), which eval reports as `must_keep recall`. No real shop is in the
corpora of ../shared; these measure the class a shop's pages make: values that recur
across products, beside a description that holds most of the page's new text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detemplate.tools.samples import SHOP_STYLES, make_shop, write_jsonl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="folder to write the shop-STYLE folders into")
    parser.add_argument("--pages", type=int, default=400, help="product pages a shop (default 400)")
    args = parser.parse_args()
    for n, style in enumerate(SHOP_STYLES):
        folder = args.output / f"shop-{style}"
        folder.mkdir(parents=True, exist_ok=True)
        shop = make_shop(f"{style}.shop.example", args.pages, seed=n, style=style)
        write_jsonl([sp.page for sp in shop], folder / "pages.jsonl.gz", gz=True)
        with gzip.open(folder / "gold.jsonl.gz", "wt", encoding="utf-8") as fh:
            for sp in shop:
                fh.write(json.dumps({"url": sp.page.url, "must_keep": list(sp.values)}) + "\n")
        print(f"{folder}: {len(shop)} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
