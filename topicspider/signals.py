"""Signals topicspider's components send each other through ``crawler.signals``."""

#: A host asks for at least ``delay`` seconds between requests (robots.txt
#: ``Crawl-delay`` or ``Request-rate``). Arguments: ``host`` (the downloader slot key,
#: a host name), ``delay`` (seconds).
host_delay_requested = object()
