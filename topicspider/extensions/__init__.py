"""Scrapy extensions, one per module."""
