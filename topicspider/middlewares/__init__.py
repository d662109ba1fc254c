"""Downloader middlewares, one per module."""
