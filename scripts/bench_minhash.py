"""Our numpy MinHash against datasketch on one corpus: ms per page signature and Jaccard error.

python scripts/bench_minhash.py ../shared/corpora/site-lenskit-docs [DATASKETCH_DIR]
"""

import random
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
sys.path.append(
    sys.argv[2] if len(sys.argv) > 2 else ""
)  # a folder holding datasketch, e.g. pip install --target DIR datasketch
import datasketch
import numpy as np
from detemplate.engine.detectors.clusters import MinHasher, page_paths
from detemplate.engine.page import parse, segment_tree
from detemplate.engine.params import SegmentParams
from detemplate.tools.clusters import jaccard_estimate
from detemplate.tools.evaluate import load_corpus

print("datasketch", datasketch.__version__ if hasattr(datasketch, "__version__") else "?")
sp = SegmentParams()
corpus = load_corpus(sys.argv[1])
sets = [page_paths(segment_tree(parse(p.html, sp), sp), "both") for p in corpus.pages]
print("pages", len(sets), "mean paths", sum(map(len, sets)) / len(sets))
h = MinHasher(128, 1)
for _round in range(2):
    t = time.perf_counter()
    sig_np = [h.signature(s) for s in sets]
    tn = time.perf_counter() - t
    t = time.perf_counter()
    sig_ds = []
    for s in sets:
        m = datasketch.MinHash(num_perm=128, seed=1)
        m.update_batch([k.to_bytes(8, "little") for k in s])
        sig_ds.append(m)
    td = time.perf_counter() - t
    t = time.perf_counter()
    bulk = datasketch.MinHash.bulk([[k.to_bytes(8, "little") for k in s] for s in sets], num_perm=128, seed=1)
    tb = time.perf_counter() - t
    print(
        f"numpy {tn * 1000 / len(sets):.3f} ms/page  datasketch update_batch {td * 1000 / len(sets):.3f} ms/page  "
        f"bulk {tb * 1000 / len(sets):.3f} ms/page"
    )
# estimation error against the true Jaccard on random pairs
rng = random.Random(0)
en, ed = [], []
for _ in range(2000):
    i, j = rng.randrange(len(sets)), rng.randrange(len(sets))
    a, b = sets[i], sets[j]
    true = len(a & b) / len(a | b)
    en.append(abs(jaccard_estimate(sig_np[i], sig_np[j]) - true))
    ed.append(abs(sig_ds[i].jaccard(sig_ds[j]) - true))
print(
    f"mean |error| numpy {np.mean(en):.4f} datasketch {np.mean(ed):.4f}; "
    f"p95 {np.percentile(en, 95):.4f} {np.percentile(ed, 95):.4f}"
)
