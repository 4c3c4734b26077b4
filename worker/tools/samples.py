"""Deterministic synthetic sites: pages with a shared template and known content.

The sample crawl of `make demo` and `detemplate sample`, the long-host benchmark and the
tests all build their pages here (nothing is copied from real crawls).

    site = make_site("blog.example", 20, seed=1, layout="blog")
    site[3].page   # RawPage
    site[3].gold   # the article text: one line per heading, paragraph and list item

The gold does not depend on where the segmenter cuts blocks: compare it with kept text
after normalising whitespace (`norm`), e.g. `all(g in norm(kept) for g in sp.gold_blocks)`:
a block's segments are joined by single spaces, so each gold piece is a substring.

Every page has a template shared across the site's pages (a header with the site name,
a tagline and a date, a nav bar, a sidebar with link lists and a "most read" box, a
footer with legal text and links) with small variations (the nav item of the page's
section is marked active, the date changes every page, "most read" rotates every 10
pages), and page-specific content (random but deterministic headings, paragraphs with
in-article links, a list) inside one known container (`SitePage.content_selector`).

`redesign=k` switches the template (class names, labels, footer text) from page index k
on: the site's redesign. The content container keeps its selector.

Randomness comes from `random.Random(str)`, which seeds through SHA-512, so a site is
the same in every process and on every machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from pathlib import Path

from ..engine.model import RawPage

WORDS = """
able acid aged also area army away baby back ball band bank base bath bear beat bell
belt best bill bird blow blue boat body bomb bond bone book boom born boss both bowl
bulk burn bush busy call calm came camp card care case cash cast cell chat chip city
club coal coat code cold come cook cool cope copy core cost crew crop dark data date
dawn days dead deal dean dear debt deep deny desk dial diet disc disk does done door
dose down draw drew drop drug dual duke dust duty each earn ease east easy edge else
even ever evil exit face fact fail fair fall farm fast fate fear feed feel feet fell
felt file fill film find fine fire firm fish five flat flow food foot form fort four
free from fuel full fund gain game gate gave gear gene gift girl give glad goal goes
gold golf gone good gray grew grey grow gulf hair half hall hand hang hard harm hate
have head hear heat held hell help here hero high hill hire hold hole holy home hope
host hour huge hung hunt hurt idea inch into iron item jack jane jean john join jump
jury just keen keep kent kept kick kill kind king knee knew know lack lady laid lake
land lane last late lead left less life lift like line link list live load loan lock
long look lord lose loss lost love luck made mail main make male many mark mass matt
meal mean meat meet menu mere mike mile milk mill mind mine miss mode mood moon more
most move much must name navy near neck need news next nice nick nine none nose note
okay once only onto open oral over pace pack page paid pain pair palm park part pass
past path peak pick pink pipe plan play plot plug plus poll pool poor port post pull
pure push race rail rain rank rare rate read real rear rely rent rest rice rich ride
ring rise risk road rock role roll roof room root rose rule rush ruth safe said sake
sale salt same sand save seat seed seek seem seen self sell send sent sept ship shop
shot show shut sick side sign site size skin slip slow snow soft soil sold sole some
song soon sort soul spot star stay step stop such suit sure take tale talk tall tank
tape task team tech tell tend term test text than that them then they thin this thus
till time tiny told tone tony took tool tour town tree trip true tune turn twin type
unit upon used user vary vast very vice view vote wage wait wake walk wall want ward
warm wash wave ways weak wear week well went were west what when whom wide wife wild
will wind wine wing wire wise wish with wood word wore work yard yeah year your zero
""".split()

LAYOUTS = ("blog", "docs", "news")

# Per layout and template version: class names, nav labels, footer text. Version 1 is
# the redesign: every class and label differs, so every template segment changes.
_THEMES: dict[tuple[str, int], dict[str, str]] = {
    ("blog", 0): {
        "header": "site-header",
        "nav": "main-nav",
        "side": "sidebar",
        "foot": "site-footer",
        "box": "widget",
        "most": "most-read",
        "active": "active",
        "tagline": "Notes on software, gardens and long walks",
        "legal": "All content on this site is licensed under a Creative Commons Attribution licence unless "
        "stated otherwise. Opinions are the author's own.",
        "container": "article",
        "container_class": "post-content",
    },
    ("blog", 1): {
        "header": "top-bar",
        "nav": "menu-primary",
        "side": "rail",
        "foot": "bottom",
        "box": "panel",
        "most": "popular",
        "active": "current",
        "tagline": "A fresh look: writing about code and the outdoors",
        "legal": "Copyright the author. Reproduction of any material without written permission is not "
        "allowed; quotations with a link back are welcome.",
        "container": "article",
        "container_class": "post-content",
    },
    ("docs", 0): {
        "header": "docs-header",
        "nav": "docs-nav",
        "side": "toc-tree",
        "foot": "docs-footer",
        "box": "toc-section",
        "most": "see-also",
        "active": "is-active",
        "tagline": "Reference manual and user guide for the toolkit",
        "legal": "This documentation is released under the MIT licence. Built with a static site "
        "generator from the project's repository.",
        "container": "div",
        "container_class": "markdown-body",
    },
    ("docs", 1): {
        "header": "navbar",
        "nav": "navbar-links",
        "side": "sidebar-menu",
        "foot": "page-footer",
        "box": "menu-group",
        "most": "related",
        "active": "selected",
        "tagline": "Documentation, version two, rewritten from scratch",
        "legal": "Documentation licensed under Apache 2.0. Found a mistake? Open an issue on the "
        "tracker and tell us which page is wrong.",
        "container": "div",
        "container_class": "markdown-body",
    },
    ("news", 0): {
        "header": "masthead",
        "nav": "sections",
        "side": "aside-col",
        "foot": "colophon",
        "box": "module",
        "most": "most-read",
        "active": "on",
        "tagline": "Independent reporting from the valley since 1921",
        "legal": "Copyright The Valley Gazette Ltd. All rights reserved. Registered in England, company "
        "number 01234567, registered office at 1 High Street.",
        "container": "div",
        "container_class": "story-body",
    },
    ("news", 1): {
        "header": "brand-header",
        "nav": "section-links",
        "side": "right-rail",
        "foot": "legal-footer",
        "box": "card",
        "most": "trending",
        "active": "here",
        "tagline": "The Gazette, now with more of what matters to you",
        "legal": "Published by Gazette Media Group. Use of this site constitutes acceptance of our user "
        "agreement and privacy policy and cookie statement.",
        "container": "div",
        "container_class": "story-body",
    },
}

_NAV = {
    0: ("Home", "About", "Archive", "Projects", "Contact"),
    1: ("Start", "Who we are", "Back issues", "Work", "Write to us"),
}
_SIDE_LISTS = {
    0: (
        ("Categories", ("Software", "Gardening", "Walking", "Books", "Travel")),
        ("Archives", ("January 2024", "February 2024", "March 2024", "April 2024")),
    ),
    1: (("Topics", ("Code", "Plants", "Hiking", "Reading", "Trips")), ("By year", ("2021", "2022", "2023", "2024"))),
}
_FOOT_LINKS = {
    0: ("Privacy policy", "Terms of use", "Cookie settings", "Accessibility"),
    1: ("Your privacy", "Terms and conditions", "Manage cookies", "Site map"),
}


@dataclass(frozen=True)
class SitePage:
    """One generated page and what a perfect detector would keep.

    page: the raw page.
    gold_blocks: the text of each heading, paragraph and list item of the content, its text
        nodes joined by single spaces (how the pipeline joins a block's segments).
    template_texts: texts that only occur in the template (site name, tagline, nav labels,
        footer legal text and links): a detector must not keep them once it has learned.
    content_selector: CSS selector of the content container.
    version: template version (0, or 1 after a redesign).
    """

    page: RawPage
    gold_blocks: tuple[str, ...]
    template_texts: tuple[str, ...]
    content_selector: str
    version: int = 0
    links: tuple[str, ...] = field(default=(), repr=False)

    @property
    def gold(self) -> str:
        """The content text, one line per heading, paragraph and list item."""
        return "\n".join(self.gold_blocks)


def gold_text(site_page: SitePage) -> str:
    """The page's content text (same as `site_page.gold`)."""
    return site_page.gold


def norm(text: str) -> str:
    """Whitespace-normalised text: every run of whitespace (newlines too) is one space."""
    return " ".join(text.split())


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _words(rng: random.Random, lo: int, hi: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]


def _sentence(rng: random.Random, lo: int = 6, hi: int = 14) -> str:
    words = _words(rng, lo, hi)
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def _site_name(host: str) -> str:
    return host.split(".")[0].replace("-", " ").title() + " Journal"


def _content(rng: random.Random, host: str, paragraphs: int) -> tuple[str, list[str], list[str]]:
    """The article: HTML, its gold block texts, and its in-article link URLs."""
    html: list[str] = []
    gold: list[str] = []
    links: list[str] = []
    title = " ".join(_words(rng, 4, 8)).capitalize()
    html.append(f"<h1>{_esc(title)}</h1>")
    gold.append(title)
    list_at = rng.randrange(1, paragraphs + 1)
    for i in range(paragraphs):
        if i and i % 3 == 0:
            heading = " ".join(_words(rng, 2, 5)).capitalize()
            html.append(f"<h2>{_esc(heading)}</h2>")
            gold.append(heading)
        before = _sentence(rng)
        if rng.random() < 0.6:
            anchor = " ".join(_words(rng, 2, 4))
            after = " ".join(_words(rng, 3, 8)) + "."
            href = f"https://{host}/ref/{'-'.join(anchor.split())}.html"
            links.append(href)
            # Spaces around the link: the text nodes join back to the gold with single spaces.
            html.append(f'<p>{_esc(before)} <a href="{href}">{_esc(anchor)}</a> {_esc(after)}</p>')
            gold.append(f"{before} {anchor} {after}")
        else:
            more = _sentence(rng)
            html.append(f"<p>{_esc(before)} {_esc(more)}</p>")
            gold.append(f"{before} {more}")
        if i + 1 == list_at:
            html.append("<ul>")
            for _ in range(rng.randint(3, 5)):
                item = " ".join(_words(rng, 3, 6))
                html.append(f"<li>{_esc(item)}</li>")
                gold.append(item)
            html.append("</ul>")
    return "\n".join(html), gold, links


def _page(host: str, index: int, seed: int, layout: str, version: int, paragraphs: int) -> SitePage:
    rng = random.Random(f"{host}|{seed}|{layout}|{index}")
    theme = _THEMES[(layout, version)]
    nav = _NAV[version]
    side_lists = _SIDE_LISTS[version]
    foot_links = _FOOT_LINKS[version]
    name = _site_name(host)
    section = index % len(nav)
    day = date(2024, 1, 1) + timedelta(days=index)
    url = f"https://{host}/{nav[section].lower().replace(' ', '-')}/{index:05d}.html"

    # "Most read": five titles from a fixed pool of the site's, rotating every 10 pages.
    pool_rng = random.Random(f"{host}|{seed}|most-read|{version}")
    pool = [" ".join(_words(pool_rng, 3, 6)).capitalize() for _ in range(12)]
    start = (index // 10) % len(pool)
    most_read = [pool[(start + k) % len(pool)] for k in range(5)]

    body, gold, links = _content(rng, host, paragraphs)

    nav_items = "".join(
        f'<li class="{theme["active"]}"><a href="/{label.lower()}/">{_esc(label)}</a></li>'
        if i == section
        else f'<li><a href="/{label.lower()}/">{_esc(label)}</a></li>'
        for i, label in enumerate(nav)
    )
    boxes = "".join(
        f'<div class="{theme["box"]}"><h3>{_esc(title)}</h3><ul>'
        + "".join(f'<li><a href="/{title.lower()}/{i}/">{_esc(item)}</a></li>' for i, item in enumerate(items))
        + "</ul></div>"
        for title, items in side_lists
    )
    most = (
        f'<div class="{theme["box"]} {theme["most"]}"><h3>Most read</h3><ol>'
        + "".join(f'<li><a href="/popular/{k}/">{_esc(t)}</a></li>' for k, t in enumerate(most_read))
        + "</ol></div>"
    )
    footer_links = "".join(f'<li><a href="/{k}/">{_esc(t)}</a></li>' for k, t in enumerate(foot_links))
    container = theme["container"]
    html = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{_esc(gold[0])} | {_esc(name)}</title>
<style>body {{ font-family: serif; }} .{theme["active"]} {{ font-weight: bold; }}</style>
<script>window.analytics = {{"page": {index}}};</script>
</head>
<body>
<header class="{theme["header"]}">
  <div class="brand"><a class="site-name" href="/">{_esc(name)}</a>
    <span class="tagline">{_esc(theme["tagline"])}</span> <span class="today">{day.isoformat()}</span></div>
  <nav class="{theme["nav"]}"><ul>{nav_items}</ul></nav>
</header>
<div class="layout">
  <main>
    <{container} class="{theme["container_class"]}">
{body}
    </{container}>
  </main>
  <aside class="{theme["side"]}">{boxes}{most}</aside>
</div>
<!-- page {index} generated for tests -->
<footer class="{theme["foot"]}">
  <p class="legal">{_esc(theme["legal"])}</p>
  <ul class="footer-links">{footer_links}</ul>
</footer>
</body>
</html>
"""
    template_texts = (
        name,
        theme["tagline"],
        *nav,
        theme["legal"],
        *foot_links,
        *(t for t, _ in side_lists),
        *(i for _, items in side_lists for i in items),
    )
    return SitePage(
        page=RawPage(url=url, html=html, host=host, source=f"factory:{host}:{index}"),
        gold_blocks=tuple(gold),
        template_texts=template_texts,
        content_selector=f"{container}.{theme['container_class']}",
        version=version,
        links=tuple(links),
    )


def make_site(
    host: str,
    n_pages: int,
    seed: int = 0,
    layout: str = "blog",
    redesign: int | None = None,
    paragraphs: int = 5,
) -> list[SitePage]:
    """`n_pages` pages of one site, in crawl order; the template changes from index `redesign` on."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    return [
        _page(host, i, seed, layout, 1 if redesign is not None and i >= redesign else 0, paragraphs)
        for i in range(n_pages)
    ]


SHOP_STYLES = ("table", "list", "dl", "deep", "box")


@dataclass(frozen=True)
class ShopPage:
    """One generated product page and the values on it that are content (its title, author,
    price and attribute values), each of which a detector must keep."""

    page: RawPage
    values: tuple[str, ...]


def make_shop(host: str, n_pages: int, seed: int = 0, style: str = "table") -> list[ShopPage]:
    """`n_pages` product pages of one bookshop, in crawl order: a header, a nav bar, a
    breadcrumb, the product (title, author, price, five attributes and a delivery time that
    is the same on every product, a description of 8 to 120 words), a "customers also
    bought" list of other products and a footer. Attribute values recur across products,
    some on most of them (a format on 60% of the pages, a language on 80%), as a shop's do.
    `style` is the attributes' markup: a table of th/td rows, a list of "Label: value" lines,
    a dl, ("deep") the table with the title, price and attributes in one element and the
    description nested in another, or ("box") the table with the title, author, price, the
    basket button and a delivery notice that is the same on every product in one block (no
    block element between them: a buy box whose text is mostly the shop's)."""
    if style not in SHOP_STYLES:
        raise ValueError(f"style must be one of {SHOP_STYLES}")
    rng = random.Random(f"{host}|{seed}|shop")
    publishers = [f"{rng.choice(WORDS).title()} {rng.choice(['Press', 'Books', 'House'])}" for _ in range(15)]
    authors = [f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()}son" for _ in range(120)]
    dates = [f"{rng.randint(1, 28)} {rng.choice(['March', 'April', 'May', 'June'])} {rng.randint(2019, 2021)}"
             for _ in range(40)]
    titles = [" ".join(_words(rng, 2, 5)).title() for _ in range(n_pages)]
    nav = "".join(f'<li><a href="/c/{w}/">{w.title()}</a></li>' for w in WORDS[:10])
    out = []
    for i in range(n_pages):
        r = random.Random(f"{host}|{seed}|shop|{i}")
        author = r.choice(authors[: r.randint(5, len(authors))])
        price = f"{r.randint(5, 40)}.{r.choice(['00', '50', '99'])} EUR"
        attrs = [
            ("Publisher", r.choice(publishers)),
            ("Release date", r.choice(dates)),
            ("Format", r.choices(["Paperback", "Hardcover", "Ebook"], [6, 3, 1])[0]),
            ("Language", r.choices(["English", "German", "French"], [8, 1, 1])[0]),
            ("ISBN", f"978{r.randint(10**9, 10**10 - 1)}"),
            ("Delivery", "2 to 3 working days"),  # the same on every product: the shop's, not the book's
        ]
        if style == "list":
            table = '<ul class="specs">' + "".join(
                f'<li><span class="label">{k}:</span> <span class="value">{_esc(v)}</span></li>' for k, v in attrs
            ) + "</ul>"
        elif style == "dl":
            table = '<dl class="details">' + "".join(f"<dt>{k}</dt><dd>{_esc(v)}</dd>" for k, v in attrs) + "</dl>"
        else:
            table = '<table class="attributes">' + "".join(
                f"<tr><th>{k}</th><td>{_esc(v)}</td></tr>" for k, v in attrs
            ) + "</table>"
        description = " ".join(_words(r, 8, 120)).capitalize() + "."
        if style == "box":
            info = (
                f'<div class="buy-box"><h1 class="product-title">{_esc(titles[i])}</h1><p class="by">by '
                f'<a href="/a/{i}/">{_esc(author)}</a></p><p class="price">{price}</p><button>Add to basket</button>'
                "<p>Free delivery on orders over 20 EUR. Usually dispatched within two working days.</p></div>"
                f"{table}"
            )
        else:
            info = (
                f'<h1 class="product-title">{_esc(titles[i])}</h1><p class="by">by '
                f'<a href="/a/{i}/">{_esc(author)}</a></p>'
                f'<div class="buy"><span class="price">{price}</span> <button>Add to basket</button></div>{table}'
            )
        text = f'<div class="description"><h2>Description</h2><p>{_esc(description)}</p></div>'
        if style == "deep":
            product = f'<div class="product"><div class="info">{info}</div><div class="tabs">{text}</div></div>'
        else:
            product = f'<div class="product">{info}{text}</div>'
        also = "".join(f'<li><a href="/p/{j}/">{_esc(titles[j])}</a></li>' for j in r.sample(range(n_pages), 4))
        html = (
            f"<!DOCTYPE html><html><head><title>{_esc(titles[i])} - Bookshop</title></head><body>"
            '<header><a href="/">Bookshop</a><form><input name="q"><button>Search</button></form></header>'
            f'<nav class="menu"><ul>{nav}</ul></nav>'
            '<div class="crumbs"><a href="/">Home</a> &gt; <a href="/books/">Books</a></div>'
            f'<main>{product}<section class="also"><h3>Customers also bought</h3><ul>{also}</ul></section></main>'
            "<footer><p>Copyright 2024 Bookshop Ltd. All rights reserved.</p>"
            "<p>Free delivery on orders over 20 EUR. Questions? Call us.</p></footer></body></html>"
        )
        values = (titles[i], author, price, *(v for _, v in attrs[:-1]))
        out.append(ShopPage(RawPage(url=f"https://{host}/p/{i}.html", html=html, host=host,
                                    source=f"factory:{host}:{i}"), values))
    return out


def interleave(*sites: list[SitePage]) -> list[SitePage]:
    """Round-robin merge of several sites' pages, as a crawl interleaves hosts."""
    out: list[SitePage] = []
    for i in range(max((len(s) for s in sites), default=0)):
        out.extend(s[i] for s in sites if i < len(s))
    return out


def write_jsonl(pages: Iterable[RawPage | SitePage], path: str | Path, gz: bool = False) -> Path:
    """Write pages as raw-page JSONL (`{"url", "host", "html"}` per line), gzipped if asked."""
    path = Path(path)
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for p in pages:
            page = p.page if isinstance(p, SitePage) else p
            fh.write(json.dumps({"url": page.url, "host": page.host, "html": page.html}, ensure_ascii=False))
            fh.write("\n")
    return path


def write_warc(pages: Iterable[RawPage | SitePage], path: str | Path) -> Path:
    """Write pages as a WARC.gz of HTTP response records, one gzip member per record."""
    path = Path(path)
    with open(path, "wb") as fh:
        for n, p in enumerate(pages):
            page = p.page if isinstance(p, SitePage) else p
            body = page.html.encode("utf-8")
            http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            http += f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body
            head = (
                "WARC/1.0\r\nWARC-Type: response\r\n"
                f"WARC-Target-URI: {page.url}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
                f"WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-{n:012d}>\r\n"
                "Content-Type: application/http; msgtype=response\r\n"
                f"Content-Length: {len(http)}\r\n\r\n"
            ).encode("ascii")
            fh.write(gzip.compress(head + http + b"\r\n\r\n"))
    return path


SAMPLE_LAYOUTS = ("blog", "docs", "news")


def sample_crawl(sites: int = 6, pages: int = 40, seed: int = 0) -> list[SitePage]:
    """A crawl of `sites` generated hosts with `pages` pages each, interleaved as a crawler
    would. The first host has a second page type as well: a `/docs/` section in the docs
    layout, one page after every four of its blog pages (pages // 4 of them), so the
    crawl shows a host with two templates (two template clusters)."""
    made = [
        make_site(f"site{n + 1}.{SAMPLE_LAYOUTS[n % len(SAMPLE_LAYOUTS)]}.example", pages, seed=seed + n,
                  layout=SAMPLE_LAYOUTS[n % len(SAMPLE_LAYOUTS)])
        for n in range(sites)
    ]
    if made and pages >= 4:
        made[0] = _with_section(made[0], "docs", pages // 4, seed + 1000)
    return interleave(*made)


def _with_section(site: list[SitePage], layout: str, n_pages: int, seed: int) -> list[SitePage]:
    """`site` with `n_pages` pages of another layout under /<layout>/ of the same host,
    one after every four of its own."""
    host = site[0].page.host
    prefix = f"https://{host}/"
    extra = [
        replace(sp, page=replace(sp.page, url=sp.page.url.replace(prefix, f"{prefix}{layout}/", 1)))
        for sp in make_site(host, n_pages, seed=seed, layout=layout)
    ]
    out: list[SitePage] = []
    for i, sp in enumerate(site):
        out.append(sp)
        if i % 4 == 3 and extra:
            out.append(extra.pop(0))
    return out + extra


def cmd_sample(args: argparse.Namespace) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    crawl = sample_crawl(args.sites, args.pages, args.seed)
    write_warc(crawl, out / "crawl.warc.gz")
    # pages.jsonl.gz + gold.jsonl.gz: the corpus format `detemplate eval` reads.
    write_jsonl(crawl, out / "pages.jsonl.gz", gz=True)
    with gzip.open(out / "gold.jsonl.gz", "wt", encoding="utf-8") as fh:
        for sp in crawl:
            fh.write(json.dumps({"url": sp.page.url, "content": sp.gold}, ensure_ascii=False) + "\n")
    print(
        f"wrote {len(crawl)} pages of {args.sites} generated sites to {out}/: crawl.warc.gz, "
        "pages.jsonl.gz (the same pages as JSONL) and gold.jsonl.gz (their article text)"
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sample",
        help="write a sample crawl of generated sites (WARC.gz and JSONL) to try the other commands on",
        description=(
            "Generate a deterministic sample crawl: SITES sites (blog, docs and news layouts), PAGES pages "
            "each, with a shared template (header, nav, sidebar, footer) and page-specific articles, "
            "interleaved as a crawler delivers them; the first site also has a /docs/ section of PAGES/4 "
            "pages in another layout (a second page type: a second template cluster). Writes crawl.warc.gz, "
            "pages.jsonl.gz and gold.jsonl.gz (the article text of each page): a corpus folder `detemplate eval` reads."
        ),
    )
    p.add_argument("output", metavar="DIR", help="folder to write into (created)")
    p.add_argument("--sites", type=int, default=6, help="number of generated sites (default 6)")
    p.add_argument("--pages", type=int, default=40, help="pages per site (default 40)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=cmd_sample)
