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
