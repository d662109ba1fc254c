"""topicspider's settings: Scrapy's, tuned for a polite breadth-first crawl, and the
project's own. Every default the project adds lives here and in docs/settings.md's table."""

from topicspider import __version__
from topicspider.urls import MAX_PATH_REPEATS, MAX_PATH_SEGMENTS, SESSION_PARAMETERS

BOT_NAME = "topicspider"
SPIDER_MODULES = ["topicspider.spiders"]
NEWSPIDER_MODULE = "topicspider.spiders"
COMMANDS_MODULE = "topicspider.commands"

# Identity and politeness. The robots token is USER_AGENT's name unless
# ROBOTSTXT_USER_AGENT says otherwise.
USER_AGENT = f"topicspider/{__version__} (+https://github.com/topicspider/topicspider)"
ROBOTSTXT_OBEY = True
DOWNLOAD_DELAY = 2.0
DOWNLOAD_DELAY_JITTER = 0.0  # none, as Nutch and Heritrix; upwards only when set, see middlewares/pacing.py
# Each host gets at most CONCURRENT_REQUESTS_PER_DOMAIN, and the frontier gives a host a
# request only when it can take one; the global limit bounds how many hosts are crawled
# at once, each with a request waiting out its delay.
CONCURRENT_REQUESTS = 64
CONCURRENT_REQUESTS_PER_DOMAIN = 2
# A page yields one item; Scrapy's default of 100 parallel slots per response only
# costs asyncio tasks (measured: +31% pages/s at 16).
CONCURRENT_ITEMS = 16
DOWNLOAD_TIMEOUT = 30
# A hostile or broken page must not exhaust memory.
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
# Scrapy's MemoryUsage extension: the crawler process stops at this many MB of RSS (and
# warns earlier), finish reason memusage_exceeded, exit status 1.
MEMUSAGE_LIMIT_MB = 2048
MEMUSAGE_WARNING_MB = 1536

# Breadth-first: lower priority per level, first in first out within a level.
DEPTH_PRIORITY = 1
DEPTH_LIMIT = 0  # the spider enforces -a depth itself; 0 here means "no extra limit"
SCHEDULER = "topicspider.scheduler.FrontierScheduler"
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"

REQUEST_FINGERPRINTER_CLASS = "topicspider.fingerprint.CanonicalURLFingerprinter"
DUPEFILTER_CLASS = "topicspider.dupefilter.LRUDupeFilter"
# Scrapy's stats, without the deprecation wrapper its collector puts on every attribute
# look-up (1.6 µs a stat against 0.08; see topicspider/statscollector.py).
STATS_CLASS = "topicspider.statscollector.StatsCollector"

SPIDER_MIDDLEWARES = {
    # Each layer wraps every request a page yields. Links past URLLENGTH_LIMIT are
    # dropped by the page analysis before a request is made, seeds by their filters.
    "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
    # The spider builds each request's meta afresh, never from a response's.
    "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
}
DOWNLOADER_MIDDLEWARES = {
    # A crawl's sites are topicspider's (links kept on their seed's site by the page
    # analysis, redirects by SiteScopeMiddleware): with no allowed_domains, Scrapy's
    # offsite filter has nothing to refuse, and costs a signal receiver per request.
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    # Replaced by topicspider's own, below.
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
    # URL patterns blocked from the console, before anything else is spent on them.
    "topicspider.middlewares.block.BlockMiddleware": 30,
    # Pages per site (SITE_MAX_PAGES), background pages served by the cache included.
    "topicspider.middlewares.budget.SiteBudgetMiddleware": 35,
    # Sites whose pages keep killing the page-analysis processes (PAGE_SITE_MAX_LOST).
    "topicspider.middlewares.quarantine.QuarantineMiddleware": 36,
    # Nothing goes out before the topic is ready (a resumed crawl), samples aside.
    "topicspider.middlewares.topicgate.TopicGateMiddleware": 40,
    # Pages downloaded to sample the background are not downloaded again.
    "topicspider.middlewares.background.BackgroundCacheMiddleware": 45,
    # Before robots.txt is fetched for a site we are not crawling.
    "topicspider.middlewares.scope.SiteScopeMiddleware": 50,
    "topicspider.middlewares.robots.RobotsTxtMiddleware": 100,
    "topicspider.middlewares.metarefresh.SafeMetaRefreshMiddleware": 580,
    "topicspider.middlewares.redirect.LoopSafeRedirectMiddleware": 600,
    # After HttpCompressionMiddleware (590) has decoded the body.
    "topicspider.middlewares.encoding.EncodingMiddleware": 585,
    # Sees 429/503 before RetryMiddleware (550) and sets the host's delay last.
    "topicspider.middlewares.pacing.PacingMiddleware": 950,
    # Its twin for distributed mode (REDIS_URL): exactly one of the two is enabled.
    "topicspider.middlewares.clusterpacing.ClusterPacingMiddleware": 950,
    # WARC_REPLAY_DIR (scrapy reindex): the archive answers where the network would.
    "topicspider.middlewares.replay.WarcReplayMiddleware": 960,
    # WARC_DIR: every response as it came over the wire (before decompression).
    "topicspider.middlewares.warc.WarcMiddleware": 990,
}
ITEM_PIPELINES = {
    "topicspider.pipelines.relevance.RelevancePipeline": 300,
    "topicspider.pipelines.storage.StoragePipeline": 800,
}
EXTENSIONS = {
    "topicspider.extensions.crawllog.CrawlLog": 500,
    "topicspider.extensions.report.CrawlReport": 510,
    "topicspider.extensions.urlstate.URLStateLog": 520,  # MySQL mode only
    "topicspider.extensions.livestatus.LiveStatus": 530,
    "topicspider.extensions.control.CrawlControl": 540,
    "topicspider.extensions.progress.Progress": 550,
    "topicspider.extensions.gctuning.GarbageCollection": 560,
}
# The progress line (PROGRESS_INTERVAL) replaces Scrapy's once-a-minute LogStats line.
LOGSTATS_INTERVAL = 0.0

LOG_LEVEL = "INFO"
# Both would open a port that runs code inside the crawler; off unless asked for.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
# Feed exports (-o/-O pages.jsonl) in UTF-8: JSON's default \uXXXX escapes make Chinese
# titles and texts unreadable in the file.
FEED_EXPORT_ENCODING = "utf-8"
# The page item's fields a feed export writes, in this order: all but the search index
# terms (PageItem.search_terms), which the store alone needs.
FEED_EXPORT_FIELDS = ["url", "title", "depth", "http_status", "fetched_at", "relevance", "relevant",
                      "relevance_terms", "emails", "duplicate_of", "near_duplicate_of", "content_type", "encoding",
                      "content_length", "text"]

# topicspider's own settings (documented in docs/settings.md).
PROGRESS_INTERVAL = 60.0  # seconds between progress lines in a log; live on a terminal
WARC_DIR = ""  # a directory: archive every response there, in WARC files (off when empty)
WARC_PREFIX = "topicspider"
WARC_MAX_SIZE = 1_000_000_000  # bytes a WARC file grows to before the next one starts
WARC_QUEUE_MAX_MB = 256.0  # response bodies waiting to be written, at most
WARC_REPLAY_DIR = ""  # answer requests from this archive instead of the network (scrapy reindex)
URL_STRIP_TRAILING_SLASH = True
# The links' normaliser and trap filters (topicspider.urls.URLRules), with Scrapy's
# URLLENGTH_LIMIT (2083) as the longest URL a link may have.
URL_SESSION_PARAMETERS = list(SESSION_PARAMETERS)
URL_MAX_PATH_SEGMENTS = MAX_PATH_SEGMENTS
URL_MAX_PATH_REPEATS = MAX_PATH_REPEATS
SITE_MAX_PAGES = 0  # URLs asked for per site; 0: no budget
URL_FILTER_FILE = ""  # the user's +REGEX / -REGEX rules, as Nutch's regex-urlfilter.txt
SCHEDULER_LEVEL_SYNC = True
SCHEDULER_MAX_HELD = 20_000
DUPEFILTER_LRU_CAPACITY = 250_000  # about 190 bytes each: 47 MB
DUPEFILTER_FLUSH_SIZE = 1000
EXTRACT_TEXT_MAX_CHARS = 200_000
EXTRACT_EMAIL_MAX_CHARS = 1_000_000  # of a page's text searched for e-mail addresses
EXTRACT_MAX_LINKS = 1000  # links of a page read, in page order; the rest only counted
ROBOTSTXT_CACHE_TTL = 86_400.0  # RFC 9309: a cached robots.txt is good for 24 hours
ROBOTSTXT_UNREACHABLE_TTL = 600.0
ROBOTSTXT_RETRY_TIMES = 2
ROBOTSTXT_RETRY_DELAY = 5.0
ROBOTSTXT_MAX_SIZE = 512 * 1024  # RFC 9309: parse at least 500 KiB
ROBOTSTXT_MAX_CRAWL_DELAY = 60.0
ROBOTS_META_OBEY = True
ROBOTS_REL_NOFOLLOW_OBEY = True
BACKOFF_MAX_RETRIES = 3
BACKOFF_DEFAULT_DELAY = 30.0
BACKOFF_MAX_DELAY = 600.0
DATABASE_URL = "sqlite:///topicspider.db"
STORAGE_BATCH_SIZE = 100
STORAGE_FLUSH_INTERVAL = 2.0
# 1, 2, 4 ... 30 s: a failing batch is retried for about two minutes, then spilled.
STORAGE_RETRY_TIMES = 8
STORAGE_RETRY_DELAY = 1.0
STORAGE_RETRY_MAX_DELAY = 30.0
STORAGE_SPILL_FILE = "topicspider-spill.jsonl"
SEARCH_INDEX = True  # index pages for search as they are stored (scrapy search --reindex catches up)
# A trained topic: the centroid model, learnt against pages sampled from the seeds'
# sites ("lexicon": the seed documents' model). See docs/topic.md.
TOPIC_MODEL = "centroid"
TOPIC_THRESHOLD = ""  # empty: each topic's own, calibrated on its samples (0.6 for keywords)
TOPIC_TARGET_RECALL = 0.9  # the first learning step's threshold, with under 5 samples or alike ones
TOPIC_BACKGROUND_PAGES = 200  # pages of the seeds' sites sampled before scoring starts
TOPIC_BOILERPLATE_SHARE = 0.8  # a block on this share of a site's sampled pages is its template
TOPIC_EXPLAIN_TERMS = 5  # terms that weighed most, in the fetch log and the database
TOPIC_TITLE_WEIGHT = 4.0
TOPIC_BODY_WEIGHT = 1.0
# Centroid topics: a short block (a heading, a breadcrumb) found on two or more of the
# pages a topic is learnt from is a term of its own, counted this many times.
TOPIC_BLOCK_WEIGHT = 20.0
TOPIC_TOP_K = 100
TOPIC_MAX_CHARS = 10_000
# jieba in Rust: the same cuts as jieba, 9x faster in scoring (see docs/benchmarks.md, "Scoring cost").
TOPIC_SEGMENTER = "rjieba"
TOPIC_USER_DICT = ""
TOPIC_STORE_ALL = False
TOPIC_FOLLOW_ALL = False
TOPIC_BEST_FIRST = False
TOPIC_TRAIN_OUTPUT = ""
# Processes that parse, extract and score pages off the reactor thread; 0 parses on it.
# One fell behind the reactor with a trained topic (analysis takes more of a page's CPU
# than the reactor does), even on two cores: two kept 1.06 and 0.94 of stock Scrapy's
# pages/s on 20,000 pages in two runs, one 0.84 (docs/benchmarks.md, "Cost of a trained topic").
PAGE_PROCESSES = 2
# The crawler process's garbage collector, Python's gc.set_threshold (empty: Python's
# own, 700, 10, 10). At Python's, the collector took 13% of an 8,000-page crawl with a
# trained topic, 0.2% at these (docs/benchmarks.md, "The garbage collector").
GC_THRESHOLDS = (50_000, 20, 10)
PAGE_TIMEOUT = 60.0  # seconds a page may hold a worker before it is stopped
# Duplicate content (topicspider.duplicates): a page whose text an earlier page has is
# stored as an alias of it, and its links are not followed unless no copy's were; pages whose SimHashes are
# within DUPLICATE_NEAR_DISTANCE bits are flagged (-1: not looked for). The most recent
# DUPLICATE_CAPACITY pages are remembered, about 400 bytes each: 40 MB.
DUPLICATE_CONTENT = True
DUPLICATE_NEAR_DISTANCE = 3
DUPLICATE_CAPACITY = 100_000
PAGE_SITE_MAX_LOST = 3  # pages of one site lost (killed or hung a worker) before the site is quarantined; 0: never
# Distributed mode (topicspider/cluster): off while REDIS_URL is empty.
REDIS_URL = ""
REDIS_PREFETCH = 32  # leased requests a worker holds ready
REDIS_LEASE = 120.0  # seconds before a dead worker's requests go back to the queue
REDIS_MAX_DELIVERIES = 5  # pops of one request before it is set aside as a poison pill; 0: no limit
REDIS_IDLE_TIMEOUT = 30.0  # seconds of an empty shared frontier before a worker exits
SCHEDULER_FLUSH_ON_START = False
CRAWL_LOG = "crawl.log"
# The crawl's name in the database (live status, control inbox, MySQL's urls table);
# empty: made from JOBDIR, or the start time (see storage/seen.py's job_name).
CRAWL_ID = ""
STATUS_INTERVAL = 2.0  # seconds between live status snapshots; 0 turns them off
CONTROL_INTERVAL = 1.0  # seconds between looks at the control inbox; 0 turns it off
# The web console (scrapy console).
CONSOLE_HOST = "127.0.0.1"
CONSOLE_PORT = 8070
CONSOLE_TOKEN = ""  # better in $TOPICSPIDER_CONSOLE_TOKEN; required off loopback
CONSOLE_RUNS_DIR = "console-runs"
CONSOLE_REFRESH = 2.0  # seconds between the live page's updates
SCRAPYD_URL = ""  # set: the console starts crawls as scrapyd jobs
SCRAPYD_PROJECT = "topicspider"
STATS_FILE = "stats.json"
