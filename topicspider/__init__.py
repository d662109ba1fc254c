"""topicspider: a polite, topic-focused web crawler built on Scrapy."""

__version__ = "0.7.0"  # the one version: setup.py reads it, the User-Agent sends it
