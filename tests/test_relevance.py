"""Topic relevance on a site with a template and sibling sections, in real ``scrapy crawl``
runs: background sampling, templates, trained and keyword topics, negatives, saved
topics, labels and their bad inputs."""

from __future__ import annotations

import json
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_project
from topicspider.storage import open_store
from topicspider.storage.labels import set_label

# Three sibling sections of one product's help: each with words of its own, all with
# the words every section shares.
SECTIONS = {
    "calc": ("电子表格", "单元格 公式 工作表 函数 图表 排序 筛选 透视表 引用 数值 求和 行列".split()),
    "writer": ("文字处理", "段落 页眉 页脚 样式 目录 脚注 批注 字体 文档 缩进 分页 书签".split()),
    "impress": ("演示文稿", "幻灯片 动画 放映 母版 切换 备注 演示 讲义 版式 旁白 计时 过渡".split()),
}
SHARED = "菜单 对话框 选项 设置 插入 格式 工具 编辑 视图 文件 窗口 命令".split()
PAGES_PER_SECTION = 12
# On every page: the navigation, a sidebar of popular words of every section, a footer.
SIDEBAR = "常用：单元格 公式 段落 幻灯片"
FOOTER = "版权所有 © 示例办公套件 帮助中心"


def section_page(section: str, number: int, rng: random.Random) -> str:
    name, words = SECTIONS[section]
    topic_words = rng.sample(words, 3)
    title = f"{name}：{''.join(topic_words[:2])}"
    sentences = []
    for _ in range(6):
        chosen = rng.sample(words, 3) + rng.sample(SHARED, 3)
        rng.shuffle(chosen)
        sentences.append(f"<p>在{name}中，{'、'.join(chosen)}的用法如下。</p>")
    nav = " | ".join(f'<a href="/{other}/index.html">{SECTIONS[other][0]}</a>' for other in SECTIONS)
    neighbours = [f"/{section}/{other}.html" for other in (number - 1, number + 1) if 1 <= other <= PAGES_PER_SECTION]
    links = "".join(f'<li><a href="{href}">{href}</a></li>' for href in neighbours)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head><body>'
            f"<div class=nav>{nav}</div><div class=side>{SIDEBAR}</div><h1>{title}</h1>{''.join(sentences)}"
            f"<ul>{links}</ul><div class=footer>{FOOTER}</div></body></html>")


@pytest.fixture
def office_site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    rng = random.Random(7)
    for section, (name, _) in SECTIONS.items():
        (root / section).mkdir(parents=True)
        for number in range(1, PAGES_PER_SECTION + 1):
            (root / section / f"{number}.html").write_text(section_page(section, number, rng), "utf-8")
        items = "".join(f'<li><a href="{n}.html">{name} {n}</a></li>' for n in range(1, PAGES_PER_SECTION + 1))
        (root / section / "index.html").write_text(
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{name}帮助</title></head><body>'
            f"<h1>{name}帮助</h1><ul>{items}</ul></body></html>", "utf-8")
    return root


def seeds(site: Any) -> str:
    return ",".join(f"{site.url}/{section}/index.html" for section in SECTIONS)


def scores(workdir: Path) -> dict[str, tuple[float, str]]:
    """Section page path -> (score, terms) from the fetch log."""
    found = {}
    for line in (workdir / "crawl.log").read_text("utf-8").splitlines():
        _, url, _, depth, score, terms = line.split("\t")
        path = url.split("/", 3)[3]
        if depth != "-" and score != "-" and not path.endswith("index.html"):
            found[path] = (float(score), terms)
    return found


def f1(chosen: set[str], wanted: set[str]) -> float:
    hits = len(chosen & wanted)
    return 2 * hits / (len(chosen) + len(wanted)) if chosen or wanted else 1.0


EVERY_PAGE = {"TOPIC_FOLLOW_ALL": True, "TOPIC_STORE_ALL": True}


def test_a_trained_topic_tells_sibling_sections_apart(office_site, serve, crawl):
    site = serve(office_site)
    train = ",".join(f"{site.url}/calc/{n}.html" for n in (2, 5, 8, 11))
    result = crawl(seeds(site), depth=2, train=train, settings=EVERY_PAGE)

    assert result.returncode == 0, result.stderr
    threshold = result.report["relevance_threshold"]
    found = scores(result.workdir)
    assert len(found) == 3 * PAGES_PER_SECTION
    relevant = {path for path, (score, _) in found.items() if score >= threshold}
    calc = {path for path in found if path.startswith("calc/")}
    assert f1(relevant, calc) >= 0.9, sorted(relevant)
    # The terms that weighed most are the section's own: no word every section shares, no
    # word of the sibling sections (the sidebar's "段落" and "幻灯片" on every page).
    top_terms = Counter(term.split()[0] for path in calc for term in found[path][1].split(", "))
    assert "单元格" in top_terms and "电子表格" in top_terms
    others = {*SHARED, *SECTIONS["writer"][1], *SECTIONS["impress"][1], "文字处理", "演示文稿"}
    assert not set(top_terms) & others, top_terms
    stored = dict(result.rows("SELECT url, relevance_terms FROM pages WHERE url LIKE '%/calc/3.html'"))
    assert list(stored.values())[0] == found["calc/3.html"][1]
    # The background sample was served to the crawl: no page downloaded twice.
    stats = result.stats
    assert stats["topic/background_pages"] >= 30 and stats["topic/background_reused"] >= 30
    paths = [path for path in site.paths() if path.endswith(".html")]
    assert len(paths) == len(set(paths)) == 3 * (PAGES_PER_SECTION + 1)
    assert "relevance threshold" in result.stdout


def test_page_analysis_processes_read_the_background_then_take_the_topic(office_site, serve, crawl):
    """The background is read (and its words counted) by the page-analysis processes
    started with the crawl, which then take the topic learnt from it: the same topic,
    and the same scores, as with pages read in the crawler's own process."""
    site = serve(office_site)
    train = ",".join(f"{site.url}/calc/{n}.html" for n in (2, 5, 8, 11))
    runs = []
    for processes in (0, 1):
        result = crawl(seeds(site), depth=2, train=train, settings={**EVERY_PAGE, "PAGE_PROCESSES": processes})
        assert result.returncode == 0, result.stderr
        runs.append((result.report["relevance_threshold"], scores(result.workdir)))
        (result.workdir / "topicspider.db").unlink()
    assert runs[0] == runs[1]
    assert len(runs[0][1]) == 3 * PAGES_PER_SECTION


def test_page_analysis_processes_that_die_while_the_background_is_read_end_the_crawl(office_site, serve, crawl,
                                                                                    tmp_path, monkeypatch):
    """The pool's failure, raised among the round's downloads, ends the crawl as such,
    not as an error in its start."""
    site = serve(office_site)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if any('spawn_main' in argument for argument in sys.orig_argv):\n"
        "    os._exit(3)  # a page-analysis process dies as it starts\n", "utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")])))
    result = crawl(seeds(site), depth=2, train=f"{site.url}/calc/2.html", settings={"PAGE_PROCESSES": 1})
    assert result.returncode == 1, result.stderr
    assert result.report["finish_reason"] == "page_analysis_failed"
    # As they started, or reading the background, whichever the crawl saw first.
    assert "topicspider: error: page-analysis processes died" in result.stderr, result.stderr[-3000:]
    assert result.report["pages_fetched"] == 0


def sampled(workdir: Path) -> list[str]:
    """The pages fetched before the crawl (samples, background), from the fetch log."""
    lines = (line.split("\t") for line in (workdir / "crawl.log").read_text("utf-8").splitlines())
    return sorted(fields[1].split("/", 3)[3] for fields in lines if fields[3] == "-" and "robots" not in fields[1])


def test_the_same_site_gives_the_same_background_however_fast_its_pages_come(office_site, serve, crawl):
    """The background is drawn at random among the links found so far: which links are
    found first must not depend on which page was downloaded first."""
    samples = []
    for slow in ("writer", "calc"):
        for section in SECTIONS:
            (office_site / section / "index.html.headers").unlink(missing_ok=True)
        (office_site / slow / "index.html.headers").write_text("Delay: 0.5\n", "utf-8")
        site = serve(office_site)
        result = crawl(seeds(site), depth=2, train=f"{site.url}/calc/2.html",
                       settings={"TOPIC_BACKGROUND_PAGES": 10, "TOPIC_FOLLOW_ALL": True})
        assert result.returncode == 0, result.stderr
        assert result.stats["topic/background_pages"] == 10
        samples.append(sampled(result.workdir))
        for name in ("topicspider.db", "crawl.log"):
            (result.workdir / name).unlink()
    assert samples[0] == samples[1]
    assert len(samples[0]) == 11 and {path.split("/")[0] for path in samples[0]} == set(SECTIONS)


def test_a_keyword_topic_ignores_the_sites_template(office_site, serve, crawl):
    site = serve(office_site)
    # The sidebar of every page holds two of the keywords.
    keywords = "电子表格,单元格,公式"
    with_template = crawl(seeds(site), depth=2, topic=keywords, settings=EVERY_PAGE)
    found = scores(with_template.workdir)
    relevant = {path for path, (score, _) in found.items() if score >= 0.6}
    assert with_template.stats["topic/template_blocks"] >= 2
    assert f1(relevant, {path for path in found if path.startswith("calc/")}) >= 0.9

    (with_template.workdir / "topicspider.db").unlink()
    (with_template.workdir / "crawl.log").unlink()
    without = crawl(seeds(site), depth=2, topic=keywords, settings={**EVERY_PAGE, "TOPIC_BACKGROUND_PAGES": 0})
    found = scores(without.workdir)
    assert all(score >= 0.6 for score, _ in found.values()), "the sidebar alone makes every page relevant"


def test_negatives_and_their_bad_inputs(office_site, serve, crawl, tmp_path):
    site = serve(office_site)
    train = ",".join(f"{site.url}/calc/{n}.html" for n in (2, 5, 8))
    negatives = ",".join(f"{site.url}/writer/{n}.html" for n in (3, 6))
    result = crawl(seeds(site), depth=2, train=train, negatives=negatives,
                   settings={**EVERY_PAGE, "TOPIC_BACKGROUND_PAGES": 0})
    assert result.returncode == 0, result.stderr
    assert "3 samples, 2 negatives, 0 background pages" in result.stderr
    found = scores(result.workdir)
    threshold = result.report["relevance_threshold"]
    assert all(score < threshold for path, (score, _) in found.items() if path.startswith("writer/"))

    empty = tmp_path / "empty.txt"
    empty.write_text("# none\n")
    cases = [
        ({"negatives": f"{site.url}/writer/99.html"}, f"negative {site.url}/writer/99.html could not be read: HTTP 404"),
        ({"negatives": str(tmp_path / "none.html")}, "is neither an http(s) URL nor a readable file"),
        ({"negatives": f"@{empty}"}, "no negatives given"),
    ]
    for arguments, message in cases:
        bad = crawl(seeds(site), depth=1, train=train, **arguments)
        assert bad.returncode == 2, bad.stderr
        assert message in bad.stderr and "topicspider: error: " in bad.stderr
    keywords = crawl(seeds(site), depth=1, topic="单元格", negatives=negatives)
    assert keywords.returncode == 2 and "negatives and labels refine a trained topic" in keywords.stderr


def train_topic(site: Any, workdir: Path, output: Path, *extra: str) -> Any:
    train = ",".join(f"{site.url}/calc/{n}.html" for n in (2, 5, 8, 11))
    return run_project([sys.executable, "-m", "scrapy", "topic-train", "-a", f"train={train}", "-a",
                        f"seeds={seeds(site)}", "-o", str(output), "-s", "DOWNLOAD_DELAY=0", *extra], workdir)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"segmenter": "jieba"}, "was trained with the jieba segmenter, and TOPIC_SEGMENTER is rjieba"),
        ({"kind": "forest"}, "is of an unknown kind 'forest'"),
        ({"version": 3}, "has version 3; this topicspider reads versions 1, 2"),
    ],
)
def test_saved_topics_of_another_kind_version_or_segmenter_are_refused(office_site, serve, crawl, tmp_path, change,
                                                                        message):
    site = serve(office_site)
    output = tmp_path / "topic.json"
    done = train_topic(site, tmp_path, output)
    assert done.returncode == 0, done.stderr
    output.write_text(json.dumps({**json.loads(output.read_text("utf-8")), **change}), "utf-8")
    requests_before = len(site.requests())

    result = crawl(seeds(site), depth=1, topic=f"@{output}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("topicspider: error: ")
    assert message in result.stderr
    assert len(site.requests()) == requests_before


def test_labels_retrain_a_saved_topic(office_site, serve, crawl, tmp_path):
    site = serve(office_site)
    first = tmp_path / "first.json"
    assert train_topic(site, tmp_path, first).returncode == 0
    result = crawl(seeds(site), depth=2, topic=f"@{first}", settings={**EVERY_PAGE, "CRAWL_LOG": ""})
    assert result.returncode == 0, result.stderr
    database = f"sqlite:///{result.workdir / 'topicspider.db'}"
    # A person marks pages, as the console does.
    store = open_store(database)
    ids = dict(store.transaction(lambda cursor, _: cursor.execute("SELECT url, id FROM pages").fetchall()))
    marks = {f"{site.url}/calc/3.html": True, f"{site.url}/calc/9.html": True, f"{site.url}/writer/4.html": False}
    for url, relevant in marks.items():
        store.transaction(lambda cursor, dialect, url=url, relevant=relevant: set_label(cursor, dialect, ids[url], relevant),
                          write=True)
    store.close()

    second = tmp_path / "second.json"
    done = train_topic(site, tmp_path, second, "-a", f"topic=@{first}", "-a", "labels=database",
                       "-s", f"DATABASE_URL={database}")
    # -a train and -a topic together are refused: labels retrain the saved topic alone.
    assert done.returncode == 2 and "give -a topic or -a train, not both" in done.stderr
    done = run_project([sys.executable, "-m", "scrapy", "topic-train", "-a", f"topic=@{first}", "-a", "labels=database",
                        "-o", str(second), "-s", f"DATABASE_URL={database}"], tmp_path)
    assert done.returncode == 0, done.stderr
    before, after = (json.loads(path.read_text("utf-8")) for path in (first, second))
    assert len(after["samples"]) == len(before["samples"]) + 2
    assert len(after["negatives"]) == len(before["negatives"]) + 1
    assert after["background"] == before["background"]
    assert [entry["source"] for entry in after["samples"][-2:]] == [f"{site.url}/calc/3.html", f"{site.url}/calc/9.html"]
    # Stored as text, labelled pages bring words, and no short blocks (crawled pages' blocks do).
    assert [entry["blocks"] for entry in after["samples"][-2:] + after["negatives"][-1:]] == [[], [], []]
    assert all(entry["blocks"] for entry in before["samples"])

    labels = tmp_path / "labels.txt"
    labels.write_text(f"{site.url}/calc/3.html relevant\n{site.url}/nowhere.html irrelevant\n", "utf-8")
    bad = run_project([sys.executable, "-m", "scrapy", "topic-train", "-a", f"topic=@{first}", "-a", f"labels=@{labels}",
                       "-o", str(tmp_path / "third.json"), "-s", f"DATABASE_URL={database}"], tmp_path)
    assert bad.returncode == 2
    assert f"labels name pages that are not in the database: {site.url}/nowhere.html" in bad.stderr
    assert not (tmp_path / "third.json").exists()
