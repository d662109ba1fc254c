"""Full-text search over the stored pages, with no Scrapy dependency.

The index holds the pages' own index terms, cut by jieba, so that neither database has
to segment Chinese: in an FTS5 table on SQLite (its postings and BM25 in C), in
segments of postings on MySQL/MariaDB, a row per term per batch of pages, merged by the
server (whose FULLTEXT drops the two-character words most Chinese words are). It is
written in the same transaction as the pages.

* :mod:`topicspider.search.terms`: what is indexed (jieba's search mode) and what is
  looked up (jieba's precise mode);
* :mod:`topicspider.search.index`: the writes and the BM25 query, on either backend;
* :mod:`topicspider.search.fts5`, :mod:`topicspider.search.segments`: each backend's tables;
* :mod:`topicspider.search.snippet`: the highlighted extract shown with a result.
"""
