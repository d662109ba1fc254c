"""Full-text search over the stored pages, with no Scrapy dependency.

The index is an inverted index in two plain tables of the storage database
(``search_docs``, ``search_postings``), written in the same transaction as the pages, so
that SQLite and MySQL/MariaDB behave alike on a stock server. Neither engine's own full
text search fits: InnoDB's FULLTEXT drops words shorter than ``innodb_ft_min_token_size``
(3 by default), so a two-character Chinese word such as 新闻 would never be found, and
its ngram parser splits text into character pairs instead of words.

* :mod:`topicspider.search.terms`: what is indexed (jieba's search mode) and what is
  looked up (jieba's precise mode);
* :mod:`topicspider.search.index`: the tables' SQL, the writes and the BM25 query;
* :mod:`topicspider.search.snippet`: the highlighted extract shown with a result.
"""
