"""topicspider: a polite, topic-focused web crawler built on Scrapy."""

__version__ = "0.1.0"
