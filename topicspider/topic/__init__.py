"""Topic relevance with no Scrapy dependency: segmentation (``segment``), the topic's
weighted terms (``lexicon``) and a page's score against them (``score``)."""
