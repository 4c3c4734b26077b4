"""detemplate.engine.detectors.clusters: page path sets, the MDL cost, TEXT-MDL / MinHash / LSH clustering,
the streaming assigner, and the `detemplate clusters` command."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from detemplate.cli import main
from detemplate.engine.detectors.clusters import (
    CLUSTER_DROPPED,
    CLUSTER_NEW,
    EVICTED,
    EXPIRED,
    HostClusters,
    MinHasher,
    cluster_keys,
    page_paths,
)
from detemplate.engine.errors import ConfigError, StateError
from detemplate.engine.keys import is_tagged_key
from detemplate.engine.model import Outcome
from detemplate.engine.page import parse, segment_tree
from detemplate.engine.params import ClusterParams, EngineParams, SegmentParams
from detemplate.engine.pipeline import decide, process_page
from detemplate.engine.table import HostTable
from detemplate.io.codec import encode_clean
from detemplate.state.memory import MemoryStore
from detemplate.tools.clusters import (
    FEATURES,
    METHODS,
    BatchParams,
    band_hashes,
    cluster_pages,
    clustering_cost,
    jaccard_estimate,
    noncontent_paths,
    support,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import SitePage, make_site, write_jsonl

HOST = "mixed.example"


def mixed_host(n: int = 24) -> tuple[list[SitePage], list[str]]:
    """Two sites with different layouts, the second rewritten to the first one's host, interleaved."""
    blog = make_site(HOST, n, seed=3, layout="blog")
    news = make_site("other.example", n, seed=4, layout="news")
    pages: list[SitePage] = []
    truth: list[str] = []
    for a, b in zip(blog, news, strict=True):
        moved = replace(b.page, host=HOST, url=b.page.url.replace("other.example", HOST))
        pages += [a, replace(b, page=moved)]
        truth += ["blog", "news"]
    return pages, truth


def features(pages: list[SitePage], kind: str = "both", path_mode: str = "tag") -> list[frozenset[int]]:
    sp = SegmentParams(path_mode=path_mode)
    return [page_paths(segment_tree(parse(p.page.html, sp), sp), kind) for p in pages]


def purity(labels: tuple[int, ...] | list[int], truth: list[str]) -> float:
    groups: dict[int, Counter[str]] = {}
    for lab, t in zip(labels, truth, strict=True):
        groups.setdefault(lab, Counter())[t] += 1
    return sum(c.most_common(1)[0][1] for c in groups.values()) / len(truth)


# -- page description ---------------------------------------------------------------------


def test_page_paths_kinds() -> None:
    pages, _ = mixed_host(2)
    blocks = segment_tree(parse(pages[0].page.html, SegmentParams()), SegmentParams())
    only_blocks = page_paths(blocks, "blocks")
    only_segs = page_paths(blocks, "segments")
    both = page_paths(blocks, "both")
    assert only_blocks and only_segs
    assert both == only_blocks | only_segs
    assert not only_blocks & only_segs  # element paths never collide with text paths
    assert {seg.key for b in blocks for seg in b.segments} == only_segs
    with pytest.raises(ConfigError):
        page_paths(blocks, "words")


def test_noncontent_paths_follow_the_mode_of_supports() -> None:
    # Paths 1, 2 on all four pages; 3 on two; each page has its own 10+i (support 1).
    pages = [{1, 2, 3, 10}, {1, 2, 3, 11}, {1, 2, 12}, {1, 2, 13}]
    assert support(pages) == Counter({1: 4, 2: 4, 3: 2, 10: 1, 11: 1, 12: 1, 13: 1})
    ess = noncontent_paths(pages)
    # Page 0: supports 4,4,2,1 -> mode 4 -> {1, 2}. Page 2: 4,4,1 -> mode 4.
    assert ess == [frozenset({1, 2})] * 4
    # A page of unique paths has mode 1: every path counts (the paper); min_support 2 drops them.
    pages2 = [{1, 20, 21, 22}, {1, 30}]
    assert noncontent_paths(pages2)[0] == frozenset({1, 20, 21, 22})
    assert noncontent_paths(pages2, min_support=2)[0] == frozenset({1})


# -- the MDL cost ---------------------------------------------------------------------------


def test_cost_counts_by_hand() -> None:
    ess = [frozenset({1, 2}), frozenset({1, 2}), frozenset({1, 3})]
    singletons = clustering_cost(ess, [0, 1, 2])
    assert (singletons.paths, singletons.clusters, singletons.template_ones) == (3, 3, 6)
    assert (singletons.plus, singletons.minus) == (0, 0)
    one = clustering_cost(ess, [0, 0, 0])
    # Template {1, 2} (in more than half of 3 pages); page 2 lacks 2 (-1) and has 3 (+1).
    assert (one.clusters, one.template_ones, one.plus, one.minus) == (1, 2, 1, 1)
    assert one.bits < singletons.bits


@pytest.mark.parametrize("method", METHODS)
def test_mdl_cost_decreases_monotonically_and_matches_brute_force(method: str) -> None:
    pages, _ = mixed_host(16)
    feats = features(pages, "both", "tag_class")
    result = cluster_pages(feats, BatchParams(method=method))
    costs = result.costs
    # TEXT-HASH and LSH first merge pages with equal signatures (one step), then by MDL.
    assert len(costs) >= (3 if method == "mdl" else 2)
    assert all(later < earlier for earlier, later in pairwise(costs))
    # The incremental cost equals the cost of the final labels computed from scratch.
    ess = noncontent_paths(feats, BatchParams().min_support)
    assert clustering_cost(ess, result.labels).bits == pytest.approx(costs[-1], rel=1e-9, abs=1e-6)
    # Template paths are exactly the non-content paths of more than half the members.
    for cluster in result.clusters:
        counts = support([ess[i] for i in cluster.members])
        assert {k for k, _ in cluster.template} == {k for k, n in counts.items() if 2 * n > len(cluster.members)}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.frozensets(st.integers(0, 30), max_size=12), min_size=1, max_size=14),
    st.sampled_from(METHODS),
    st.integers(1, 3),
)
def test_any_input_costs_fall_and_match_brute_force(pages: list[frozenset[int]], method: str, min_support: int) -> None:
    result = cluster_pages(pages, BatchParams(method=method, min_support=min_support))
    assert all(later < earlier for earlier, later in pairwise(result.costs))
    ess = noncontent_paths(pages, min_support)
    assert clustering_cost(ess, result.labels).bits == pytest.approx(result.costs[-1], rel=1e-9, abs=1e-6)
    assert sorted(i for c in result.clusters for i in c.members) == list(range(len(pages)))


def test_mdl_greedy_stops_at_a_local_minimum() -> None:
    """No single merge of the final clusters lowers the cost (TEXT-MDL looks at every pair)."""
    pages, _ = mixed_host(8)
    feats = features(pages)
    ess = noncontent_paths(feats, 2)
    result = cluster_pages(feats, BatchParams(method="mdl"))
    labels = list(result.labels)
    final = clustering_cost(ess, labels).bits
    k = len(result.clusters)
    for a in range(k):
        for b in range(a + 1, k):
            merged = [a if lab == b else lab for lab in labels]
            assert clustering_cost(ess, merged).bits >= final - 1e-6


# -- clustering separates two layouts on one host -------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", FEATURES)
def test_two_layouts_on_one_host_are_separated(method: str, kind: str) -> None:
    pages, truth = mixed_host(24)
    # Class names are what tell the factory's layouts apart; tag-only paths are the same.
    result = cluster_pages(features(pages, kind, "tag_class"), BatchParams(method=method, features=kind))
    assert purity(result.labels, truth) == 1.0
    # ... and not by cutting everything into singletons: each layout is mostly one cluster.
    assert len(result.clusters[0].members) >= 20
    assert len(result.clusters[1].members) >= 20


def test_hash_variants_score_fewer_pairs_than_text_mdl() -> None:
    pages, _ = mixed_host(24)
    feats = features(pages, "both", "tag_class")
    evals = {m: cluster_pages(feats, BatchParams(method=m)).pair_evaluations for m in METHODS}
    n = len(pages)
    assert evals["mdl"] >= n * (n - 1) // 2
    assert evals["minhash"] < evals["mdl"]
    assert evals["lsh"] < evals["mdl"]


def test_clustering_is_deterministic_and_handles_tiny_inputs() -> None:
    pages, _ = mixed_host(6)
    feats = features(pages)
    for method in METHODS:
        a = cluster_pages(feats, BatchParams(method=method))
        b = cluster_pages(list(feats), BatchParams(method=method))
        assert a == b
        assert cluster_pages([], BatchParams(method=method)).clusters == ()
        one = cluster_pages(feats[:1], BatchParams(method=method))
        assert one.labels == (0,) and one.costs[-1] == one.costs[0]


def test_params_are_validated() -> None:
    with pytest.raises(ConfigError):
        BatchParams(method="kmeans")
    with pytest.raises(ConfigError):
        BatchParams(bands=0)
    with pytest.raises(ConfigError):
        ClusterParams(threshold=0.0)
    with pytest.raises(ConfigError):
        ClusterParams(max_clusters=0)


# -- MinHash and LSH --------------------------------------------------------------------------


def test_minhash_estimates_jaccard() -> None:
    rng = random.Random(7)
    hasher = MinHasher(256, seed=3)
    for overlap in (0.1, 0.5, 0.9):
        common = {rng.getrandbits(64) for _ in range(int(1000 * overlap))}
        a = common | {rng.getrandbits(64) for _ in range(1000 - len(common))}
        b = common | {rng.getrandbits(64) for _ in range(1000 - len(common))}
        true = len(a & b) / len(a | b)
        est = jaccard_estimate(hasher.signature(a), hasher.signature(b))
        assert abs(est - true) < 0.1, (overlap, true, est)
    # The signature of a union is the slot-wise minimum of the signatures.
    a = {1, 2, 3}
    b = {3, 4, 5}
    assert np.array_equal(hasher.signature(a | b), np.minimum(hasher.signature(a), hasher.signature(b)))


def test_lsh_candidate_pairs_contain_the_truly_similar_pairs() -> None:
    """Pages of one layout share an LSH bucket with each other; the two layouts do not."""
    pages, truth = mixed_host(12)
    feats = features(pages, "both", "tag_class")
    ess = noncontent_paths(feats, 2)
    hasher = MinHasher(128, seed=1)
    bands = 32
    buckets: dict[tuple[int, int], set[int]] = {}
    for i, keys in enumerate(ess):
        for band, h in enumerate(band_hashes(hasher.signature(keys), bands)):
            buckets.setdefault((band, h), set()).add(i)
    candidates = {(i, j) for group in buckets.values() for i in group for j in group if i < j}
    n = len(ess)
    similar = set()
    for i in range(n):
        for j in range(i + 1, n):
            jac = len(ess[i] & ess[j]) / len(ess[i] | ess[j])
            if jac >= 0.8:
                similar.add((i, j))
    assert similar  # same-layout pages are close ...
    assert similar <= candidates  # ... and LSH finds every such pair
    assert all(truth[i] == truth[j] for i, j in similar)
    # Banding is what makes it cheap: cross-layout pairs are not candidates.
    assert not any(truth[i] != truth[j] for i, j in candidates)


# -- the streaming assigner -------------------------------------------------------------------


def stream(pages: list[SitePage], params: ClusterParams) -> tuple[HostClusters, list[int]]:
    hc = HostClusters(params)
    sp = SegmentParams(path_mode="tag_class")
    cids = [hc.assign(page_paths(segment_tree(parse(p.page.html, sp), sp), params.features)).cid for p in pages]
    return hc, cids


def test_stream_assigner_separates_layouts_and_is_deterministic() -> None:
    pages, truth = mixed_host(20)
    params = ClusterParams()
    hc1, cids1 = stream(pages, params)
    hc2, cids2 = stream(pages, params)
    assert cids1 == cids2
    assert hc1.to_bytes() == hc2.to_bytes()
    assert purity(cids1, truth) == 1.0
    assert len(set(cids1)) == 2


def test_stream_assigner_reports_new_clusters() -> None:
    pages, _ = mixed_host(4)
    hc = HostClusters(ClusterParams())
    sp = SegmentParams(path_mode="tag_class")
    news = [hc.assign(page_paths(segment_tree(parse(p.page.html, sp), sp), "blocks")).new for p in pages]
    assert news == [True, True, False, False, False, False, False, False]


def random_page(rng: random.Random, kind: int) -> set[int]:
    """A synthetic path set: 40 paths of its kind plus 5 random ones."""
    return {kind * 1000 + i for i in range(40)} | {rng.getrandbits(60) for _ in range(5)}


def test_stream_assigner_is_bounded_and_expires() -> None:
    params = ClusterParams(max_clusters=3, tb=10, n=1.0)
    hc = HostClusters(params)
    rng = random.Random(1)
    seen = []
    for page in range(60):
        a = hc.assign(random_page(rng, page % 7))  # seven kinds round robin: more than the bound
        seen.append(a)
        assert len(hc.clusters) <= 3
    assert any(a.dropped for a in seen)
    # Expiry: a kind not seen for more than its lifetime (10 pages here, n=1: flat) is gone.
    hc = HostClusters(params)
    first = hc.assign(random_page(rng, 0)).cid
    for _ in range(11):
        hc.assign(random_page(rng, 1))
    a = hc.assign(random_page(rng, 1))
    assert first in {d[0] for d in a.dropped} or first not in {c.cid for c in hc.clusters}
    assert first not in {c.cid for c in hc.clusters}
    back = hc.assign(random_page(rng, 0))
    assert back.new and back.cid != first


def test_clusters_expire_like_segments_a_big_cluster_outlives_a_one_page_one() -> None:
    params = ClusterParams()  # the segment table's lifetime: 20 pages for 1 page, ~500 from 10 on
    assert [params.lifetime(p) for p in (1, 2, 10)] == [20, 51, 499]
    hc = HostClusters(params)
    rng = random.Random(3)
    cids = {hc.assign(random_page(rng, 0)).cid for _ in range(10)}
    assert len(cids) == 1
    big = cids.pop()
    small = hc.assign(random_page(rng, 1)).cid
    dropped = []
    for _ in range(40):
        a = hc.assign(random_page(rng, 2))
        dropped += [(d[0], d[2], hc.clock) for d in a.dropped]
    # The one-page cluster (page 11) goes on the first page more than 20 pages later.
    assert dropped == [(small, EXPIRED, 32)]
    assert big in {c.cid for c in hc.clusters}


def test_stream_assigner_round_trips_through_bytes() -> None:
    params = ClusterParams(max_clusters=4, tb=5)
    rng = random.Random(2)
    pages = [random_page(rng, rng.randrange(6)) for _ in range(120)]
    whole = HostClusters(params)
    ref = [whole.assign(p) for p in pages]
    # Restart from bytes after every page: the same assignments, the same bytes.
    hc = HostClusters(params)
    got = []
    for p in pages:
        hc = HostClusters.from_bytes(hc.to_bytes(), params)
        got.append(hc.assign(p))
    assert got == ref
    assert hc.to_bytes() == whole.to_bytes()
    assert len(whole.to_bytes()) <= 4 * (64 * 4 + 20) + 24


def test_stream_state_rejects_bad_bytes() -> None:
    params = ClusterParams()
    hc = HostClusters(params)
    hc.assign({1, 2, 3})
    data = hc.to_bytes()
    with pytest.raises(StateError):
        HostClusters.from_bytes(b"XXXX" + data[4:], params)
    with pytest.raises(StateError):
        HostClusters.from_bytes(data[:-3], params)
    with pytest.raises(StateError):
        HostClusters.from_bytes(data, ClusterParams(num_perm=32, bands=8))
    with pytest.raises(StateError):
        HostClusters.from_bytes(b"", params)


def test_replay_repeats_assign_from_cid_and_signature() -> None:
    for follow in (False, True):
        params = ClusterParams(max_clusters=3, tb=3, follow=follow)
        rng = random.Random(5)
        pages = [random_page(rng, rng.randrange(5)) for _ in range(150)]
        live = HostClusters(params)
        replayed = HostClusters(params)
        for p in pages:
            a = live.assign(p)
            # The signature travels only when the state took it in: a new cluster, or follow.
            assert bool(a.signature) == (a.new or follow)
            replayed.replay(a.cid, a.signature)
            assert replayed.to_bytes() == live.to_bytes()
        with pytest.raises(StateError):
            replayed.replay(replayed.next_id + 3, b"")  # a cluster it never opened


# -- in the engine: cluster ids, events, state --------------------------------------------------


def engine_run(pages: list[SitePage], params: EngineParams) -> tuple[HostTable, list[Outcome]]:
    table = HostTable(params.table)
    return table, [decide(p.page, table, params) for p in pages]


def test_engine_puts_each_page_type_in_its_own_cluster_and_says_so() -> None:
    pages, truth = mixed_host(20)
    table, outs = engine_run(pages, EngineParams())
    cids = [o.cluster for o in outs]
    assert all(o.clean is not None and o.clean.cluster == o.cluster for o in outs)
    assert None not in cids and purity(cids, truth) == 1.0 and len(set(cids)) == 2
    # The host's first page type is no event; the second is one, on its first page.
    news = [e for o in outs for e in o.events if e.type == CLUSTER_NEW]
    assert len(news) == 1 and news[0].url == pages[1].page.url and news[0].cluster == cids[1]
    assert news[0].details["clusters"] == 2 and 0.0 <= news[0].details["similarity"] < 0.8
    # The table's own events carry the cluster of the page that caused them.
    learned = [e for o in outs for e in o.events if e.type == "template.learned"]
    assert learned and all(e.cluster is not None for e in learned)
    rec = json.loads(encode_clean(outs[3].clean))  # type: ignore[arg-type]
    assert rec["cluster"] == cids[3]
    # The assigner's state is kept with the table and survives its bytes.
    restored = HostTable.from_bytes(table.to_bytes(), EngineParams().table)
    assert restored.to_bytes() == table.to_bytes() and isinstance(restored.clusters, bytes)
    more = make_site(HOST, 3, seed=3, layout="blog")
    assert decide(more[0].page, restored, EngineParams()).cluster == cids[0]


def test_engine_with_clusters_off_writes_no_cluster() -> None:
    params = EngineParams(clusters=ClusterParams(enabled=False))
    pages, _ = mixed_host(6)
    table, outs = engine_run(pages, params)
    assert all(o.cluster is None and o.clean is not None and o.clean.cluster is None for o in outs)
    assert table.clusters is None
    assert "cluster" not in json.loads(encode_clean(outs[0].clean))  # type: ignore[arg-type]
    assert not any(e.type.startswith("template.cluster") for o in outs for e in o.events)
    # Cluster ids do not touch the verdicts unless clusters.statistics is on.
    _, with_ids = engine_run(pages, EngineParams())
    assert [o.clean.text for o in outs] == [o.clean.text for o in with_ids]  # type: ignore[union-attr]


def test_engine_drops_clusters_with_events() -> None:
    params = EngineParams(clusters=ClusterParams(max_clusters=1))
    pages, _ = mixed_host(4)
    _, outs = engine_run(pages, params)
    dropped = [e for o in outs for e in o.events if e.type == CLUSTER_DROPPED]
    # One cluster allowed and two layouts alternating: every page after the first evicts.
    assert len(dropped) == len(pages) - 1
    assert all(e.details["reason"] == EVICTED and e.details["clusters"] == 1 for e in dropped)
    assert [e.details["dropped_cluster"] for e in dropped] == list(range(len(pages) - 1))
    params = EngineParams(clusters=ClusterParams(tb=3, n=1.0))
    blog = make_site(HOST, 8, seed=3, layout="blog")
    news, _ = mixed_host(1)
    _, outs = engine_run([news[1], *blog], params)  # the news page type is not seen again
    expired = [e for o in outs for e in o.events if e.type == CLUSTER_DROPPED]
    assert len(expired) == 1 and expired[0].details["reason"] == EXPIRED and expired[0].details["cluster_pages"] == 1
    assert expired[0].page_no == 5  # unseen for more than 3 of the host's pages


def test_cluster_statistics_count_each_segment_under_its_cluster() -> None:
    params = EngineParams(clusters=ClusterParams(statistics=True))
    pages, _ = mixed_host(8)
    table, outs = engine_run(pages, params)
    for o in outs:
        n = sum(1 for k in o.applied if not is_tagged_key(k))
        assert o.applied[len(o.applied) - n :] == tuple(cluster_keys(list(o.applied[:n]), o.cluster))  # type: ignore[arg-type]
    # The cluster keys of one page type reach DF 8 (its 8 pages), while segments the two
    # types share reach 16; the host's events count segment keys only, as with statistics off.
    last = outs[-1].applied
    n = sum(1 for k in last if not is_tagged_key(k))
    assert max(table.df(k) for k in last[len(last) - n :]) == 8
    assert max(table.df(k) for k in last[:n]) == 16
    off_table, off_outs = engine_run(pages, EngineParams())
    assert table.template_count == off_table.template_count
    assert [e.details for o in outs for e in o.events] == [e.details for o in off_outs for e in o.events]


def test_cluster_statistics_without_pagelets() -> None:
    from detemplate.engine.params import PageletParams

    params = EngineParams(pagelets=PageletParams(enabled=False, events=False), clusters=ClusterParams(statistics=True))
    pages, _ = mixed_host(6)
    _, outs = engine_run(pages, params)
    for o in outs:
        assert o.clean is not None
        n = sum(1 for k in o.applied if not is_tagged_key(k))
        # The segment keys, the layout keys, then as many cluster keys as segment keys.
        assert o.applied[len(o.applied) - n :] == tuple(cluster_keys(list(o.applied[:n]), o.cluster))  # type: ignore[arg-type]


def test_table_bytes_with_a_bad_cluster_section_are_refused() -> None:
    pages, _ = mixed_host(3)
    table, _ = engine_run(pages, EngineParams())
    data = table.to_bytes()
    assert data[HostTable(EngineParams().table).nbytes() + 16 * len(table) : ][:4] == b"DTC1"
    with pytest.raises(StateError):
        HostTable.from_bytes(data[: len(data) - len(table.clusters.to_bytes())] + b"JUNK", EngineParams().table)
    # A state written before clusters existed (no section) loads; the host starts its clusters.
    bare = HostTable.from_bytes(data[: len(data) - len(table.clusters.to_bytes())], EngineParams().table)
    assert bare.clusters is None
    assert decide(pages[0].page, bare, EngineParams()).cluster == 0
    # A cluster section these params cannot read (another num_perm) starts the clusters again.
    other = EngineParams(clusters=ClusterParams(num_perm=32, bands=8))
    t2 = HostTable.from_bytes(data, other.table)
    assert decide(pages[0].page, t2, other).cluster == 0


# -- the command -------------------------------------------------------------------------------


def test_clusters_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages, truth = mixed_host(10)
    src = write_jsonl(pages, tmp_path / "pages.jsonl")
    assert main(["clusters", str(src), "--json", "--path-mode", "tag_class"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["host"] for r in records} == {HOST}
    assert [r["pages"] for r in records][:2] == [10, 10]
    assert sum(r["pages"] for r in records) == 20
    top = records[0]
    assert top["top_paths"] and all(p["pages"] > 5 for p in top["top_paths"])
    assert len(top["sample_urls"]) == 3
    url_kind = {p.page.url: t for p, t in zip(pages, truth, strict=True)}
    assert len({url_kind[u] for u in top["sample_urls"]}) == 1
    assert main(["clusters", str(src), "--method", "mdl", "--path-mode", "tag_class"]) == 0
    out = capsys.readouterr().out
    assert f"{HOST}: 20 pages -> 2 clusters (mdl" in out


def test_clusters_command_stream_reports_the_engines_clusters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pages, truth = mixed_host(10)
    src = write_jsonl(pages, tmp_path / "pages.jsonl")
    assert main(["clusters", str(src), "--method", "stream", "--json", "--samples", "10"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["cluster"], r["pages"], r["live"]) for r in records] == [(0, 10, True), (1, 10, True)]
    url_kind = {p.page.url: t for p, t in zip(pages, truth, strict=True)}
    for r in records:  # the same ids as the clean pages of `detemplate run`
        assert len({url_kind[u] for u in r["sample_urls"]}) == 1
    assert main(["clusters", str(src), "--method", "stream", "--param", "clusters.max_clusters=1"]) == 0
    out = capsys.readouterr().out
    assert f"{HOST}: 20 pages -> 20 clusters (stream" in out and "1 live at the end, 38 cluster events" in out
    assert main(["clusters", str(src), "--method", "stream", "--param", "clusters.enabled=false"]) == 2


def test_the_sample_crawl_has_a_host_with_two_page_types_and_the_engine_sees_them() -> None:
    from detemplate.tools.samples import sample_crawl

    crawl = sample_crawl(sites=3, pages=12)
    first = [sp for sp in crawl if sp.page.host == "site1.blog.example"]
    assert len(crawl) == 3 * 12 + 3 and len(first) == 15
    store = MemoryStore()
    outs = {sp.page.url: process_page(sp.page, store, EngineParams()) for sp in crawl}
    docs = {outs[sp.page.url].cluster for sp in first if "/docs/" in sp.page.url}
    blog = {outs[sp.page.url].cluster for sp in first if "/docs/" not in sp.page.url}
    assert len(docs) == 1 and len(blog) == 1 and docs != blog
    new = [e for o in outs.values() for e in o.events if e.type == CLUSTER_NEW]
    assert [(e.host, e.cluster) for e in new] == [("site1.blog.example", docs.pop())]
