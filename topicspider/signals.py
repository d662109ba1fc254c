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

#: The spider has read a page's links: ``links``, those it will not request, once each
#: per page, as (fingerprint, reason) pairs (:attr:`topicspider.analysis.PageAnalysis.dropped`),
#: for the crawl's ledger of discovered URLs (:mod:`topicspider.discovery`).
links_dropped = object()

#: Every page item that reached the storage pipeline before ``before`` (a
#: ``time.monotonic()`` reading) is stored, spilled to the spill file, or counted lost.
#: The distributed crawl's scheduler acknowledges a request only after this.
pages_durable = object()

#: Pages the storage pipeline could neither store nor spill: ``urls``, their canonical
#: URLs. Sent before the ``pages_durable`` that covers them; a ``JOBDIR``'s durable
#: frontier keeps their URLs waiting, for a resume to fetch them again.
pages_lost = object()

#: Distributed mode: this worker has booked a start on ``host`` (the downloader slot
#: key) in the cluster's shared host tickets; the host's next start is not before
#: ``until`` (a ``time.monotonic()`` reading). The cluster scheduler gives the host
#: nothing more until then, so that no request of this worker waits out a delay it knows of.
host_booked = object()

#: A URL pattern was blocked for the rest of the crawl (from the control inbox):
#: ``pattern`` (the text, see :func:`topicspider.urls.url_pattern`).
url_pattern_blocked = object()

#: The page-analysis processes have quarantined ``site`` (a seed's site): its pages kept
#: killing or hanging them (``PAGE_SITE_MAX_LOST``), and its other requests are not fetched.
site_quarantined = object()

#: Not a signal: the request ``meta`` key by which a component says that a request
#: failed for a reason of the moment (robots.txt unreachable, its page lost by the
#: page-analysis processes), with that reason as its value. The request ends as an
#: error of this run, and its URL stays waiting in a ``JOBDIR``'s durable frontier, so
#: that a resume tries it again (:mod:`topicspider.scheduler`).
RESUME_LATER_META = "topicspider_resume_later"

#: Not a signal: the request ``meta`` key by which a page answered from a WARC archive
#: (:mod:`topicspider.middlewares.replay`) says when it was fetched, as ``fetched_at``.
FETCHED_AT_META = "topicspider_fetched_at"

#: Not a signal: the response flag of a page not downloaded now, as Scrapy's HTTP cache
#: flags its responses (topicspider's background cache sets it too): it was archived
#: when it was (:mod:`topicspider.middlewares.warc`).
CACHED = "cached"
#: Not a signal: the response flag of a page answered from a WARC archive
#: (:mod:`topicspider.middlewares.replay`).
REPLAYED = "replayed"

#: Not a signal: the request ``meta`` key by which the spider says that a page it
#: fetched is not kept, with the reason as its value (``"irrelevant"``: judged off the
#: topic, so not stored). The ledger counts its URL dropped for that reason, not done.
DROPPED_META = "topicspider_dropped"
