"""The web console, ``scrapy console`` (:mod:`topicspider.commands.console`): start,
watch and steer crawls, and search their pages, from the browser.

* :mod:`topicspider.console.app`: the Flask application;
* :mod:`topicspider.console.forms`: the forms' checks, with no web framework in them;
* :mod:`topicspider.console.runs`: crawls as local processes or scrapyd jobs;
* :mod:`topicspider.console.live`: a crawl's live view from its workers' status rows.

Nothing here is imported by a crawl; Flask is imported only when the console starts.
"""
