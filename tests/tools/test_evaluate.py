"""The eval metric, checked against the reference scorer, and the eval and bench engines."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest
from detemplate.cli import main
from detemplate.engine.errors import ConfigError
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams
from detemplate.tools import bench, evaluate
from detemplate.tools.evaluate import GoldPage, page_prf, page_removal, score_texts, tokens

from tests.factories import interleave, make_site

SHARED = Path(__file__).resolve().parents[3] / "shared"
SCORE_PY = SHARED / "tools" / "score.py"
REAL_CORPUS = SHARED / "corpora" / "site-rust-cookbook-mdbook"


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    """../shared/tools/score.py, imported as a module."""
    if not SCORE_PY.is_file():
        pytest.skip(f"reference scorer {SCORE_PY} is absent: nothing to compare with")
    spec = importlib.util.spec_from_file_location("reference_score", SCORE_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_gz_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def assert_same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key


def synthetic_corpus(folder: Path, pages_per_site: int = 14) -> Path:
    """A two-host corpus folder in the ../shared/corpora format, gold from the generator."""
    sites = interleave(
        make_site("blog.example", pages_per_site, seed=3, layout="blog"),
        make_site("docs.example", pages_per_site, seed=4, layout="docs", redesign=pages_per_site - 4),
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_gz_jsonl(
        folder / "pages.jsonl.gz",
        [{"url": sp.page.url, "host": sp.page.host, "html": sp.page.html} for sp in sites],
    )
    # Leave the first page without gold: it is in the stream but not scored.
    write_gz_jsonl(folder / "gold.jsonl.gz", [{"url": sp.page.url, "content": sp.gold} for sp in sites[1:]])
    return folder


# -- the metric, by hand -----------------------------------------------------------------


def test_tokens_are_lowercased_unicode_word_runs() -> None:
    assert tokens("Straße ÉCOLE_9, x-y  café!") == Counter({"straße": 1, "école_9": 1, "x": 1, "y": 1, "café": 1})
    assert tokens("") == Counter()
    assert tokens(None) == Counter()
    assert tokens("a A a") == Counter({"a": 3})


def test_page_scores_use_multiset_overlap() -> None:
    # kept: a a b c (4), gold: a b b d (4), shared: a b (2)
    p, r, f = page_prf(tokens("a a b c"), tokens("a b b d"))
    assert (p, r) == (0.5, 0.5)
    assert f == pytest.approx(0.5)
    p, r, f = page_prf(tokens("a b"), tokens("a b c d"))
    assert (p, r) == (1.0, 0.5)
    assert f == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("kept", "gold", "expected"),
    [
        ("", "", (1.0, 1.0, 1.0)),  # nothing to keep, nothing kept
        ("", "some gold", (0.0, 0.0, 0.0)),  # everything dropped
        ("kept text", "", (0.0, 1.0, 0.0)),  # kept text where the gold is empty
        ("x y", "z", (0.0, 0.0, 0.0)),  # no overlap: P + R = 0
    ],
)
def test_page_scores_empty_conventions(kept: str, gold: str, expected: tuple[float, float, float]) -> None:
    assert page_prf(tokens(kept), tokens(gold)) == expected


def test_removal_counts_non_gold_tokens_removed() -> None:
    full = tokens("home about news story words here footer legal")
    gold = tokens("story words here")
    # noise: home about news footer legal (5); kept noise: home footer (2)
    assert page_removal(full, gold, tokens("home story words footer")) == pytest.approx(1 - 2 / 5)
    assert page_removal(full, gold, tokens("story words here")) == 1.0
    assert page_removal(full, gold, full) == 0.0
    assert page_removal(tokens("story words"), tokens("story words"), tokens("")) is None


def test_removal_counts_repeated_tokens_once_per_occurrence() -> None:
    # "news" is once gold and twice template; keeping it twice keeps one noise occurrence.
    full = tokens("news news news story")
    gold = tokens("news story")
    assert page_removal(full, gold, tokens("news news story")) == pytest.approx(0.5)


def test_score_texts_conventions() -> None:
    gold = [
        GoldPage("u1", "alpha beta"),
        GoldPage("u2", "gamma"),  # absent from the output: missing, scored as empty
        GoldPage("u3", "", must_keep=("Delta Echo", "foxtrot", "...")),  # "..." has no tokens
    ]
    s = score_texts(gold, {"u1": "alpha beta", "u3": "delta echo"})
    assert s.pages == 2
    assert s.missing == 1
    assert (s.precision, s.recall, s.f1) == (0.5, 0.5, 0.5)
    assert s.keep_values == 2
    assert s.keep_recall == 0.5


def test_fulltext_drops_scripts_styles_and_noscript() -> None:
    html = (
        "<html><head><title>Title words</title><style>p{color:red}</style></head>"
        "<body><p>Visible<b>bold</b></p><script>var hidden = 1;</script>"
        "<noscript>enable js</noscript><div>tail</div></body></html>"
    )
    assert tokens(evaluate.fulltext(html)) == tokens("Visible bold tail")


# -- agreement with the reference scorer ------------------------------------------------------


def test_scorer_agrees_with_reference_on_edge_cases(reference: ModuleType, tmp_path: Path) -> None:
    corpus = tmp_path / "edge"
    corpus.mkdir()
    write_gz_jsonl(
        corpus / "gold.jsonl.gz",
        [
            {"url": "a", "content": "The quick brown fox, the QUICK dog. Straße 12_b"},
            {"url": "b", "content": "only gold here"},  # missing from the output
            {"url": "c", "content": ""},  # empty gold, non-empty output
            {"url": "d", "content": ""},  # empty gold, empty output
            {"url": "e", "content": "some content"},  # output text is null
            {"url": "f", "content": "content text field"},  # output uses content_text
            {"url": "g", "content": "last line wins"},  # output has two lines
            {"url": "h", "content": "", "must_keep": ["Price 12 EUR", "in stock", "!!"]},
            {"url": "i", "content": "日本語 テキスト と english"},
            {"url": "a", "content": "a gold line repeated for a url"},
        ],
    )
    output = write_jsonl(
        tmp_path / "out.jsonl",
        [
            {"url": "a", "text": "the quick brown fox the quick cat straße 12_B extra"},
            {"url": "c", "text": "unexpected words"},
            {"url": "d", "text": ""},
            {"url": "e", "text": None},
            {"url": "f", "content_text": "content text"},
            {"url": "g", "text": "first"},
            {"url": "g", "text": "last line wins indeed"},
            {"url": "h", "text": "price 12 eur and more"},
            {"url": "i", "text": "日本語 english"},
            {"url": "z", "text": "a page without gold"},
        ],
    )
    ours = score_texts(evaluate.load_gold(corpus / "gold.jsonl.gz"), evaluate.load_output(output))
    theirs = reference.score(corpus, reference.load_out(output))
    assert theirs["missing"] == 1 and "keep_recall" in theirs  # the fixture does reach those branches
    assert_same(ours.as_dict(), theirs)


def test_eval_agrees_with_reference_on_its_own_output(reference: ModuleType, tmp_path: Path) -> None:
    corpus = synthetic_corpus(tmp_path / "synthetic")
    out_dir = tmp_path / "out"
    (result,) = evaluate.run_eval([corpus], EngineParams(), out_dir)
    output = out_dir / "synthetic.jsonl"
    theirs = reference.score(corpus, reference.load_out(output))
    assert_same(result.scores.as_dict(), theirs)
    # and the file read back through our own loader scores the same
    assert_same(
        score_texts(evaluate.load_gold(corpus / "gold.jsonl.gz"), evaluate.load_output(output)).as_dict(), theirs
    )
    # the detector learned the template: better than keeping everything
    assert result.fulltext.f1 is not None and result.scores.f1 is not None
    assert result.scores.f1 > result.fulltext.f1
    assert result.removal is not None and result.removal > 0.5
    # the split at the hosts' first pages partitions the scored pages
    assert result.first is not None and result.later is not None
    assert result.first.pages + result.later.pages == result.scores.pages
    assert result.first.pages == 2 * result.first_pages - 1  # two hosts, the very first page has no gold
    assert set(result.by_host) == {"blog.example", "docs.example"}
    assert sum(s.pages for s in result.by_host.values()) == result.scores.pages


@pytest.mark.corpora
def test_eval_agrees_with_reference_on_a_real_corpus(reference: ModuleType, tmp_path: Path) -> None:
    if not (REAL_CORPUS / "pages.jsonl.gz").is_file():
        pytest.skip(f"development corpus {REAL_CORPUS} is absent")
    (result,) = evaluate.run_eval([REAL_CORPUS], EngineParams(), tmp_path)
    theirs = reference.score(REAL_CORPUS, reference.load_out(tmp_path / f"{REAL_CORPUS.name}.jsonl"))
    assert theirs["pages"] > 100
    assert_same(result.scores.as_dict(), theirs)


def test_eval_output_is_what_run_writes(tmp_path: Path) -> None:
    """eval goes through the same engine as `detemplate run`: the same bytes come out."""
    corpus = synthetic_corpus(tmp_path / "synthetic")
    evaluate.run_eval([corpus], EngineParams(), tmp_path / "eval")
    assert main(["run", str(corpus / "pages.jsonl.gz"), "--output", str(tmp_path / "run.jsonl")]) == 0
    assert (tmp_path / "eval" / "synthetic.jsonl").read_bytes() == (tmp_path / "run.jsonl").read_bytes()


# -- anchors, report, command ------------------------------------------------------------------

README_TEXT = """
| corpus | system | P | R | F1 |
|---|---|---|---|---|
| synthetic | fulltext | 0.500 | 1.000 | 0.667 |
| synthetic | trafilatura | 0.900 | 0.950 | 0.924 |
| other | trafilatura | 0.800 | 0.800 | 0.800 |

| corpus | what | pages |
|---|---|---|
| synthetic | a made-up corpus | 28 |
"""


def test_parse_anchors_reads_the_results_table_only() -> None:
    anchors = evaluate.parse_anchors(README_TEXT)
    assert anchors == {
        "synthetic": {"fulltext": (0.5, 1.0, 0.667), "trafilatura": (0.9, 0.95, 0.924)},
        "other": {"trafilatura": (0.8, 0.8, 0.8)},
    }


def test_parse_anchors_of_the_real_readme() -> None:
    readme = SHARED / "corpora" / "README.md"
    if not readme.is_file():
        pytest.skip(f"{readme} is absent")
    anchors = evaluate.parse_anchors(readme.read_text(encoding="utf-8"))
    folders = [p.name for p in (SHARED / "corpora").iterdir() if p.is_dir()]
    assert folders
    for name in folders:
        assert "fulltext" in anchors.get(name, {}), name


def test_report_and_chart(tmp_path: Path) -> None:
    corpus = synthetic_corpus(tmp_path / "corpora" / "synthetic")
    (tmp_path / "corpora" / "README.md").write_text(README_TEXT, encoding="utf-8")
    results = evaluate.run_eval([corpus], EngineParams())
    anchors = evaluate.find_anchors([corpus])
    assert set(anchors) == {"synthetic", "other"}
    report, chart = evaluate.write_report(results, anchors, tmp_path / "report")
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = report.read_text(encoding="utf-8")
    assert "| synthetic |" in text
    assert "README trafilatura" in text and "0.924" in text
    assert f"**{results[0].scores.f1:.3f}**" in text


def test_eval_command_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = synthetic_corpus(tmp_path / "synthetic")
    assert main(["eval", str(corpus), "--json", "--param", "table.template_df=4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["corpora"]
    assert row["corpus"] == "synthetic"
    assert row["pages"] == 28 and row["scores"]["pages"] == 27
    assert doc["summary"][0]["F1"] == pytest.approx(row["scores"]["F1"])


def test_eval_command_table_and_bad_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = synthetic_corpus(tmp_path / "synthetic")
    assert main(["eval", str(corpus), "--by-host"]) == 0
    out = capsys.readouterr().out
    assert "synthetic" in out and "macro, all 1 corpora" in out
    assert "docs.example" in out
    assert main(["eval", str(tmp_path / "nowhere")]) == 2
    assert "not a corpus folder" in capsys.readouterr().err


def held_first(urls: list[str]) -> list[str]:
    """The output order of pages decided in this order: a host's first page goes out just before
    its second (engine/firstpages.py), a lone one at the end."""
    out: list[str] = []
    held: dict[str, str] = {}
    seen: set[str] = set()
    for url in urls:
        host = urlsplit(url).hostname or ""
        if host not in seen:
            seen.add(host)
            held[host] = url
            continue
        if host in held:
            out.append(held.pop(host))
        out.append(url)
    return out + list(held.values())


def test_eval_decides_the_pages_in_the_order_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--order url` and `--order shuffled` decide a corpus's pages as a crawl in that order
    would come: the output records follow it, each host's page numbers count in it, and a
    shuffle is the same for the same seed."""
    corpus = synthetic_corpus(tmp_path / "synthetic")
    given = [page.url for page in evaluate.load_corpus(corpus).pages]

    def urls(order: str, seed: int = 0) -> list[str]:
        out = tmp_path / f"{order}-{seed}"
        argv = ["eval", str(corpus), "--order", order, "--seed", str(seed), "--output-dir", str(out), "--json"]
        assert main(argv) == 0
        doc = json.loads(capsys.readouterr().out)
        assert (doc["order"], doc["seed"]) == (order, seed if order == "shuffled" else None)
        records = [json.loads(line) for line in (out / "synthetic.jsonl").read_text().splitlines()]
        for host in {r["host"] for r in records}:  # the host's pages numbered in the order decided
            assert [r["page_no"] for r in records if r["host"] == host] == list(
                range(1, sum(r["host"] == host for r in records) + 1))
        return [r["url"] for r in records]

    assert urls("input") == held_first(given) != given
    assert urls("url") == held_first(sorted(given)) != held_first(given)
    shuffled = urls("shuffled", seed=1)
    assert sorted(shuffled) == sorted(given) and shuffled not in (given, sorted(given))
    assert urls("shuffled", seed=1) == shuffled
    assert urls("shuffled", seed=2) != shuffled
    with pytest.raises(ConfigError, match="unknown page order"):
        evaluate.reorder([], "backwards")


# -- bench engine (figures are printed, never asserted on time) ------------------------------


def test_parse_and_walk_takes_any_markup() -> None:
    bench.parse_and_walk("<html><body><p>a<b>b</b>c</p><!-- x --><div>d</div></body></html>")
    bench.parse_and_walk("plain text, no markup")
    bench.parse_and_walk("")


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert bench.percentile(values, 50) == 50.0
    assert bench.percentile(values, 99) == 99.0
    assert bench.percentile([3.0], 99) == 3.0


def test_bench_speed_rows_and_state(tmp_path: Path) -> None:
    corpus = evaluate.load_corpus(synthetic_corpus(tmp_path / "synthetic"))
    rows, stores = bench.measure_speed([corpus], EngineParams(), repeat=2)
    (row,) = rows
    assert row.pages == 28 and len(row.detector_s) == len(row.floor_s) == 2
    assert len(row.latencies_s) == 2 * 28
    states = bench.host_states(corpus, stores["synthetic"])
    assert {s.host for s in states} == {"blog.example", "docs.example"}
    for s in states:
        table = stores["synthetic"].get(s.host)
        assert table is not None
        assert s.table_bytes == table.nbytes() == len(table.to_bytes())
        assert s.pages == 14
        assert s.batch_bytes == pytest.approx(24 * s.page_bytes / 14)
    _seconds, data, total = bench.rocks_pass(corpus, EngineParams(), tmp_path / "rocks")
    assert 0 < data <= total


def test_other_extractors_are_timed_on_the_same_pages_where_installed(tmp_path: Path) -> None:
    corpus = evaluate.load_corpus(synthetic_corpus(tmp_path / "synthetic"))
    extractors, notes = bench.other_extractors()
    names = {e.name for e in extractors}
    assert len(names) + len(notes) == 2
    assert all("not installed" in note and "skipped" in note for note in notes)
    for extractor in extractors:
        row, ran = bench.measure_extractor([corpus], extractor, repeat=3)
        if extractor.name == "trafilatura":  # one round over a subset: it is slow
            assert row.pages == len(corpus.pages[:: bench.TRAFILATURA_EVERY]) and len(row.detector_s) == 1
            assert f"every {bench.TRAFILATURA_EVERY}th page" in ran
        else:
            assert row.pages == 28 and len(row.detector_s) == len(row.floor_s) == 3
        assert len(row.latencies_s) == row.pages * len(row.detector_s)
        assert ran.startswith(f"{extractor.name}: ")


def test_an_extractor_that_is_not_installed_is_skipped_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in ("resiliparse", "resiliparse.parse.html", "resiliparse.extract.html2text", "trafilatura"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    extractors, notes = bench.other_extractors()
    assert extractors == []
    assert [note.split()[0] for note in notes] == ["resiliparse", "trafilatura"]
    corpus_dir = synthetic_corpus(tmp_path / "synthetic")
    assert main(["bench", str(corpus_dir), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "resiliparse is not installed" in out and "trafilatura is not installed" in out
    assert main(["bench", str(corpus_dir), "--repeat", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["others"] == [] and len(doc["others_skipped"]) == 2
    assert main(["bench", str(corpus_dir), "--repeat", "1", "--json", "--no-others"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["others"] == [] and doc["others_skipped"] == []


def test_the_detector_against_an_extractor_is_the_ratio_of_their_ratios_to_the_floor() -> None:
    # The machine twice as slow in the extractor's pass: its floor rounds slow down with it,
    # so the comparison still says the detector takes 1.5 times the extractor's time.
    detector = bench.SpeedRow("all", 100, [3.0, 3.2, 3.0], [1.0, 1.0, 1.0], [], [])
    other = bench.SpeedRow("resiliparse", 100, [4.0, 4.0, 4.4], [2.0, 2.0, 2.0], [], [])
    best, median = bench.versus(detector, other)
    assert best == pytest.approx((1.0 / 3.0) / (2.0 / 4.0))
    assert median == pytest.approx((1.0 / 3.0) / (2.0 / 4.0))
    faster = bench.SpeedRow("all", 100, [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [], [])
    assert bench.versus(faster, other)[0] == pytest.approx(2.0)


def test_bench_prints_the_detector_against_each_extractor_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = bench.Extractor("plain", lambda html: html.upper())
    monkeypatch.setattr(bench, "other_extractors", lambda: ([plain], []))
    corpus_dir = synthetic_corpus(tmp_path / "synthetic")
    assert main(["bench", str(corpus_dir), "--repeat", "1"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "the detector against plain" in x]
    assert line.rstrip().endswith("x")
    assert main(["bench", str(corpus_dir), "--repeat", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (entry,) = doc["others"]
    (detector,) = doc["speed"]  # one corpus: its row is every page's
    assert entry["name"] == "plain"
    assert entry["detector_vs_best"] == pytest.approx(detector["ratio_best"] / entry["ratio_best"])
    assert entry["detector_vs_median"] == pytest.approx(detector["ratio_median"] / entry["ratio_median"])


def test_an_extractor_that_fails_on_a_page_is_timed_all_the_same(tmp_path: Path) -> None:
    corpus = evaluate.load_corpus(synthetic_corpus(tmp_path / "synthetic"))

    def failing(html: str) -> object:
        raise ValueError("cannot read this page")

    row, _ran = bench.measure_extractor([corpus], bench.Extractor("failing", failing), repeat=2)
    assert len(row.latencies_s) == 2 * 28 and len(row.detector_s) == 2


def test_long_host_table_levels_off() -> None:
    """On a host whose content never repeats, expiry keeps the table from growing with the crawl."""
    n = 1200
    run = bench.long_host_run(bench.long_host_pages([], None, True, n), EngineParams(), n)
    assert [p.pages for p in run.points][-1] == n and len(run.points) == 20
    sizes = [p.table_bytes for p in run.points]
    # Every segment the content adds dies within Tb*N pages, so the second half of the run
    # holds no more than the first half's peak plus a little slack for template churn.
    assert max(sizes[10:]) <= 1.2 * max(sizes[:10])
    # and far smaller than a cache of one 24-page batch of the host's pages
    assert run.max_bytes < 0.5 * run.points[-1].batch_bytes


def test_eval_table_flags_a_corpus_below_keeping_all_text() -> None:
    def result(name: str, f1: float, full: float) -> evaluate.CorpusResult:
        return evaluate.CorpusResult(
            name, 10, 1, 0, evaluate.TextScores(10, 0, f1, f1, f1), evaluate.TextScores(10, 0, full, 1.0, full),
            0.5, 10, 1.0,
        )

    table = evaluate.format_table([result("kept-well", 0.95, 0.80), result("harmed", 0.70, 0.80)])
    flagged = [line for line in table.splitlines() if "BELOW FULLTEXT" in line]
    assert len(flagged) == 1
    lines = table.splitlines()
    assert lines[lines.index(flagged[0]) - 1].startswith("harmed")


def test_eval_measures_and_flags_text_the_walk_loses() -> None:
    # Every block kept is the walk's text: recall under the page text's is lost before any
    # decision. A title run into its date ("TerminalMay" once) lost two gold words.
    page = RawPage(
        "https://x.example/a", "<html><body><div><h1>Hello Terminal<span>May 24</span></h1>"
        "<p>Body text of the page.</p></div></body></html>", "x.example",
    )
    gold = GoldPage(page.url, "Hello Terminal May 24 Body text of the page.")
    corpus = evaluate.Corpus("one", Path("one"), (page,), (gold,))
    result = evaluate.evaluate_corpus(corpus)
    assert result.blocks is not None and result.blocks.recall == 1.0
    assert result.walk_loss() == 0.0
    assert "TEXT LOST BY THE WALK" not in evaluate.format_table([result])
    lossy = dataclasses.replace(result, blocks=evaluate.TextScores(1, 0, 1.0, 0.8, 0.89))
    assert lossy.walk_loss() == pytest.approx(0.2)
    assert "TEXT LOST BY THE WALK: all blocks recall 0.800, the page's text 1.000" in evaluate.format_table([lossy])
    assert lossy.as_dict()["blocks"]["R"] == 0.8


def test_bench_times_a_crawl_without_gold_where_eval_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crawl = synthetic_corpus(tmp_path / "crawl")
    (crawl / "gold.jsonl.gz").unlink()  # a crawl: pages, no gold
    with pytest.raises(ConfigError, match=r"gold\.jsonl\.gz is missing"):
        evaluate.load_corpus(crawl)
    assert evaluate.load_corpus(crawl, gold=False).gold == ()
    assert main(["bench", str(crawl), "--repeat", "1", "--no-others", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["speed"][0]["pages"] == 28
    assert main(["eval", str(crawl)]) == 2  # eval needs the gold, and says so
    assert "gold.jsonl.gz is missing" in capsys.readouterr().err
