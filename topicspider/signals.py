"""Signals topicspider's components send each other through ``crawler.signals``."""

#: A host asks for at least ``delay`` seconds between requests (robots.txt
#: ``Crawl-delay`` or ``Request-rate``). Arguments: ``host`` (the downloader slot key,
#: a host name), ``delay`` (seconds).
host_delay_requested = object()

#: The spider has read a page: ``response``, and ``relevance`` (a
#: :class:`topicspider.topic.score.Relevance`, or None when there is no topic or the
#: page is not HTML).
page_scored = object()

#: A page request failed for good, or was refused by policy: ``request``, and
#: ``reason`` (``"HTTP 404"``, ``"ignored: Forbidden by robots.txt"``, an exception).
fetch_failed = object()

#: Every page item that reached the storage pipeline before ``before`` (a
#: ``time.monotonic()`` reading) is stored, spilled to the spill file, or counted lost.
#: The distributed crawl's scheduler acknowledges a request only after this.
pages_durable = object()

#: Someone waits for the pages in the storage pipeline's buffer to be durable (the
#: distributed crawl's level barrier): write them now rather than at the next interval.
pages_flush_wanted = object()
