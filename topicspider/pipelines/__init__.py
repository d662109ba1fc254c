"""Item pipelines, one per module."""
