"""Topic relevance without a crawler: segmentation, lexicons, training and scoring."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from topicspider.config import ConfigError
from topicspider.topic.lexicon import Lexicon, keywords_lexicon, parse_lexicon, train_lexicon
from topicspider.topic.score import LexiconTopic as Topic
from topicspider.topic.score import counts_cosine
from topicspider.topic.segment import Segmenter, read_user_dict
from topicspider.topic.topicfile import read_topic_file


@pytest.fixture(scope="module")
def segmenter() -> Segmenter:
    segmenter = Segmenter()
    segmenter.load()
    return segmenter


def test_terms_are_lower_cased_words_without_stopwords_numbers_or_punctuation(segmenter):
    terms = segmenter.terms("我们使用 Python 和 Excel 的公式来计算。The quick brown fox, 2024 年！")
    assert terms == ["python", "excel", "公式", "计算", "quick", "brown", "fox"]


def test_empty_and_symbol_only_text_have_no_terms(segmenter):
    assert segmenter.terms("") == []
    assert segmenter.terms("！？。，…… 12345 --- ==>") == []


def test_words_to_keep_are_never_split_or_dropped():
    plain = Segmenter()
    plain.load()
    assert "云原生平台" not in plain.terms("我们的云原生平台很好")
    keeping = Segmenter(keep=["云原生平台", "C"])
    keeping.load()
    terms = keeping.terms("我们的云原生平台很好，用 C 写的")
    assert "云原生平台" in terms and "c" in terms


def test_user_dictionary_lines(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("# comment\n云原生平台 10 n\n\n边缘计算\n", encoding="utf-8")
    assert read_user_dict(path) == ["云原生平台", "边缘计算"]
    with pytest.raises(ConfigError, match="cannot read TOPIC_USER_DICT"):
        read_user_dict(tmp_path / "missing.txt")


def test_rjieba_gives_the_same_terms_as_jieba(segmenter):
    fast = Segmenter("rjieba")
    text = ("在电子表格里，公式引用单元格；数据透视表汇总销售数据。Spreadsheet formulas reference cells. "
            "编辑 /boot/grub/grub.cfg 和 grub-pc，见 3.1.2 节与 v2.24 版的 50% 说明。")
    assert fast.terms(text) == segmenter.terms(text)
    assert {"grub", "cfg", "pc"} <= set(fast.terms(text))


def test_unknown_segmenter_is_refused():
    with pytest.raises(ConfigError, match="TOPIC_SEGMENTER must be one of jieba, rjieba, got 'hanlp'"):
        Segmenter("hanlp")


def test_lexicon_file_format():
    lexicon = parse_lexicon("# a topic\n电子表格 2.5\n\n公式\t1\nExcel 0.5\n公式 1\n", "t.txt")
    assert lexicon.weights == {"电子表格": 2.5, "公式": 2.0, "excel": 0.5}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no terms"),
        ("# only a comment\n\n", "holds no terms"),
        ("公式 heavy\n", "t.txt:1: weight must be a number, got 'heavy'"),
        ("公式 1\n单元格 0\n", "t.txt:2: weight must be a positive number, got '0'"),
        ("公式 -1\n", "weight must be a positive number"),
        ("公式 nan\n", "weight must be a positive number"),
        ("数据 透视 表 1\n", "t.txt:1: expected 'term weight'"),
    ],
)
def test_bad_lexicon_files_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_lexicon(text, "t.txt")


def test_unreadable_topic_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read topic file"):
        read_topic_file(tmp_path / "missing.txt")
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00garbage\xff")
    with pytest.raises(ConfigError, match="cannot read topic file"):
        read_topic_file(tmp_path / "binary.txt")


def test_keyword_lexicon():
    assert keywords_lexicon(["电子表格", " Excel ", ""]).weights == {"电子表格": 1.0, "excel": 1.0}
    with pytest.raises(ConfigError, match="no topic keywords"):
        keywords_lexicon([" ", ""])
    with pytest.raises(ConfigError, match="holds a space"):
        keywords_lexicon(["pivot table"])


def test_training_weight_is_average_tf_times_the_document_frequency_factor():
    documents = [["a", "a", "b", "c"], ["a", "b"], ["a", "d", "d", "d"]]
    lexicon = train_lexicon(documents, top_k=10)
    total = 3
    floor = 1 / math.log(total + 1)

    def expected(tfs: list[float], df: int) -> float:
        return (sum(tfs) / total) / (math.log(total / df) + floor)

    assert lexicon.weights["a"] == pytest.approx(expected([2 / 4, 1 / 2, 1 / 4], 3))
    assert lexicon.weights["b"] == pytest.approx(expected([1 / 4, 1 / 2], 2))
    assert lexicon.weights["d"] == pytest.approx(expected([3 / 4], 1))
    # A term in every sample beats a term as frequent overall that is in one sample.
    assert lexicon.weights["a"] > lexicon.weights["d"]


def test_training_keeps_the_top_k_terms_deterministically():
    documents = [["x", "y", "z", "w"], ["x", "y", "z", "w"]]
    assert list(train_lexicon(documents, top_k=2).weights) == ["w", "x"]
    assert train_lexicon(documents, top_k=2) == train_lexicon(list(reversed(documents)), top_k=2)


def test_training_from_one_sample_is_defined():
    lexicon = train_lexicon([["a", "b", "a"]], top_k=5)
    assert lexicon.weights["a"] == pytest.approx(2 / 3 * math.log(2))


def test_training_without_words_is_an_error():
    with pytest.raises(ConfigError, match="no words to learn"):
        train_lexicon([[], []], top_k=5)


def test_cosine_of_topic_term_counts_and_weights():
    lexicon = Lexicon({"a": 3.0, "b": 4.0})
    assert counts_cosine(Counter({"a": 1, "b": 1}), lexicon) == pytest.approx((3 + 4) / (math.sqrt(2) * 5))
    assert counts_cosine(Counter({"b": 2}), lexicon) == pytest.approx(4 / 5)
    assert counts_cosine(Counter(), lexicon) == 0.0


def test_counting_finds_the_topic_terms_that_terms_would():
    # A topic's words are kept whole and never dropped (Topic adds them), stopwords too.
    vocabulary = {"excel", "公式", "单元格", "我们", "更"}
    segmenter = Segmenter(keep=vocabulary)
    text = "Excel 电子表格：公式引用单元格，公式随单元格更新。我们的公式"
    counts = segmenter.count_tokens(segmenter.tokens(text), vocabulary)
    terms = [term for term in segmenter.terms(text) if term in vocabulary]
    assert counts == Counter(terms) == Counter({"公式": 3, "单元格": 2, "excel": 1, "我们": 1})


def test_rjieba_keeps_added_words_whole():
    fast = Segmenter("rjieba", keep=["云原生平台"])
    assert "云原生平台" in fast.terms("我们的云原生平台很好")


def test_relevance_is_title_weight_times_b_plus_body_weight_times_c(segmenter):
    topic = Topic(keywords_lexicon(["电子表格", "公式", "单元格"]), segmenter)
    # B, the title's cosine: 1/√3 ("电子表格" alone); C, the body's: 1 (each term once).
    relevance = topic.relevance("电子表格入门", ["在电子表格里，公式引用单元格。"])
    assert relevance.score == pytest.approx(4 / math.sqrt(3) + 1)
    weighted = Topic(topic.lexicon, segmenter, title_weight=1.0, body_weight=2.0)
    assert weighted.relevance("电子表格入门", ["在电子表格里，公式引用单元格。"]).score == pytest.approx(1 / math.sqrt(3) + 2)


def test_the_terms_that_weighed_most_sum_to_the_score(segmenter):
    topic = Topic(Lexicon({"电子表格": 3.0, "公式": 1.0, "单元格": 1.0}), segmenter)
    relevance = topic.relevance("电子表格", ["公式引用单元格，单元格"])
    terms = dict(relevance.terms)
    assert list(terms)[0] == "电子表格" and set(terms) == {"电子表格", "公式", "单元格"}
    assert sum(terms.values()) == pytest.approx(relevance.score)
    assert relevance.explain().startswith("电子表格 ")
    assert Topic(topic.lexicon, segmenter, explain_terms=1).relevance("电子表格", ["公式"]).terms[0][0] == "电子表格"


def test_off_topic_and_empty_pages_score_zero(segmenter):
    topic = Topic(keywords_lexicon(["电子表格", "公式"]), segmenter)
    assert topic.relevance("今日天气", ["明天多云转晴，气温回升。"]).score == 0.0
    assert topic.relevance("", []).score == 0.0


def test_only_the_first_max_chars_are_segmented(segmenter):
    topic = Topic(keywords_lexicon(["电子表格"]), segmenter, max_chars=100)
    filler = "天气晴朗。" * 40  # 200 characters
    assert topic.relevance("", ["电子表格" + filler]).score == 1.0
    assert topic.relevance("", [filler, "电子表格"]).score == 0.0


MIXED_TEXT = ("在电子表格里，公式引用单元格；数据透视表汇总销售数据。Spreadsheet Formulas reference CELLS. "
              "编辑 /boot/grub/grub.cfg 和 grub-pc，见 3.1.2 节与 v2.24 版的 50% 说明。的 了 a an the Excel excel "
              "我们的云原生平台很好，用 C 写的。")


def test_a_recurring_block_is_cut_once_and_forgotten_past_the_bound(monkeypatch):
    """A site template's blocks are cut once a process (the search index counts them on
    every page of the site), until the blocks remembered pass BLOCK_CACHE_CHARS."""
    segmenter = Segmenter("rjieba")
    blocks = ["首页 电子表格 文字处理 演示文稿", "版权所有 Spreadsheet Suite Inc.", "帮助 关于我们 联系方式"]
    assert segmenter.block_tokens(blocks[0]) is segmenter.block_tokens(blocks[0])
    monkeypatch.setattr("topicspider.topic.segment.BLOCK_CACHE_CHARS", 40)
    for _ in range(3):
        for block in blocks:
            assert segmenter.block_tokens(block) == segmenter.tokens(block)
            assert segmenter._block_chars <= 40 and len(segmenter._block_tokens) <= 2


@pytest.mark.parametrize("backend", ["jieba", "rjieba"])
def test_term_counts_count_what_terms_finds_cold_warm_and_past_the_cache(backend, monkeypatch):
    """Counted a distinct token at a time from a cache of each token's terms: the counts
    of :meth:`Segmenter.terms`, whether the tokens are new, cached, or the cache was
    emptied at its bound halfway through; search mode's, from the precise cut and the
    words found inside each distinct word, are those of the backend's own search mode."""
    segmenter = Segmenter(backend, keep=["云原生平台", "C"])
    segmenter.load()
    texts = [MIXED_TEXT, MIXED_TEXT.upper(), MIXED_TEXT[::2], MIXED_TEXT + " Grub GRUB grub"]
    for _ in range(2):
        for text in texts:
            assert segmenter.term_counts(text) == Counter(segmenter.terms(text))
            assert segmenter.counts_of_tokens(segmenter.tokens(text)) == Counter(segmenter.terms(text))
    monkeypatch.setattr("topicspider.topic.segment.TOKEN_CACHE_SIZE", 5)
    for text in texts:
        assert segmenter.term_counts(text) == Counter(segmenter.terms(text))
        assert segmenter.counts_of_tokens(segmenter.tokens(text)) == Counter(segmenter.terms(text))
        search = segmenter.search_term_counts(text)
        assert search == Counter(segmenter._terms(segmenter._loaded().cut_for_search(text)))
        assert segmenter.search_counts_of_tokens(segmenter.tokens(text)) == search
        assert set(segmenter.term_counts(text)) <= set(search)


@pytest.mark.parametrize("backend", ["jieba", "rjieba"])
def test_an_english_keyword_does_not_split_the_longer_words_that_hold_it(backend):
    """A keyword added to jieba's dictionary as such split every longer run of letters
    that starts with it: with "sheet" kept, "sheets" became "sheet" and "s", so a topic
    counted "sheet" on a page that only says "sheets" (and "document" in the title of
    every page of a site whose titles end in "documentation"), and the search index,
    cut with the same dictionary, lost "spreadsheets". A run of letters and digits is
    never split without the dictionary, so such a keyword is not added to it."""
    from topicspider.search.terms import document_terms

    topic = Topic(keywords_lexicon(["sheet", "grubcfg", "c++", "云原生平台"]), Segmenter(backend))
    topic.segmenter.load()
    text = "Spreadsheets and sheets; one sheet. grubcfgs, c++ 我们的云原生平台"
    assert topic.segmenter.count_tokens(topic.segmenter.tokens(text.lower()), topic.lexicon.weights) == Counter(
        {"sheet": 1, "c++": 1, "云原生平台": 1})
    assert {"spreadsheets", "sheets", "grubcfgs"} <= set(topic.segmenter.terms(text))
    assert topic.relevance("Sheets documentation", []).score == 0.0
    assert {"spreadsheets", "sheets", "grubcfgs"} <= set(document_terms("", text)), "the index cuts the same way"


@pytest.mark.parametrize("backend", ["jieba", "rjieba"])
def test_a_keyword_topic_cuts_the_text_as_it_is_and_counts_tokens_whatever_their_case(backend):
    """A keyword topic cut the lower-cased text, so that "iphone手机" is found in
    "iPhone手机"; but jieba's dictionary holds words with capitals ("C语言", "T恤"),
    which the lower-cased text split ("c" and "语言"), so the keyword "语言" was counted
    inside "C语言" (as "表格" is not inside "电子表格"), and the page's search index, cut
    from the text as it is, needed a second cut. The text is now cut as it is and each
    token counted lower-cased; only a keyword that the cut may find in lower-cased text
    alone (a cased letter in a word that is no run of ASCII letters and digits) makes
    the topic cut lower-cased text."""
    topic = Topic(keywords_lexicon(["debian", "policy", "电子表格", "sheet", "语言"]), Segmenter(backend))
    assert not topic.cuts_lower_case
    text = "Debian-Policy 的 DEBIAN 电子表格 Sheet sheets, 学习C语言"
    counts = topic.segmenter.count_tokens(topic.segmenter.tokens(text), topic.lexicon.weights)
    assert counts == Counter({"debian": 2, "policy": 1, "电子表格": 1, "sheet": 1})
    assert {term for term, _ in topic.relevance("Debian 的 C语言", [text]).terms} == {"debian", "policy", "电子表格", "sheet"}
    phones = Topic(keywords_lexicon(["iphone手机", "语言"]), Segmenter(backend))
    assert phones.cuts_lower_case
    assert dict(phones.relevance("新款iPhone手机", []).terms) == {"iphone手机": pytest.approx(4 / math.sqrt(2))}


@pytest.mark.parametrize("backend", ["jieba", "rjieba"])
def test_a_decimal_keyword_is_counted_once(backend):
    """rjieba keeps "python3.12" whole, as it keeps "debian-policy", and the words inside
    such a run are counted too; but a decimal is one word to jieba, the run itself, which
    was then counted a second time."""
    topic = Topic(keywords_lexicon(["python3.12", "debian"]), Segmenter(backend))
    text = "Python3.12 python3.12 debian-policy"
    counts = topic.segmenter.count_tokens(topic.segmenter.tokens(text.lower()), topic.lexicon.weights)
    assert counts == Counter({"python3.12": 2, "debian": 1})
