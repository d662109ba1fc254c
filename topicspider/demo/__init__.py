"""The demo: a real crawl of a small bundled sample site served on localhost."""
