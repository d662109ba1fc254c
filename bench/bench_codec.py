"""What the distributed queue's data-only encoding costs against scrapy-redis's pickle.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/bench_codec.py [--requests 20000] [--rounds 5]

Every request a worker shares goes through the queue once: encoded when queued, decoded
when leased. This times both, per request, for the requests the ``topic`` spider makes
(its ``parse``/``on_error`` callbacks, ``site`` and ``depth`` meta, a priority), with
:mod:`topicspider.requestcodec` (JSON, checked on the way back) and with scrapy-redis's
``PriorityQueue`` codec (``Request.to_dict`` + pickle), in the same process, the two
taking turns within each round. It prints each round's ratio and their median, and the
sizes of one entry. No Redis is needed: only the codecs are timed, not the round trip,
which carries the entries in batches and costs more than either.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from common import REPO, header_lines

sys.path.insert(0, str(REPO))

from scrapy import Request  # noqa: E402

from topicspider.requestcodec import decode_request, encode_request  # noqa: E402
from topicspider.spiders.topic import TopicSpider  # noqa: E402


def sample_requests(spider: TopicSpider, count: int) -> list[Request]:
    requests = []
    for number in range(count):
        request = spider._request(f"http://www{number % 50}.example.com.cn/docs/section-{number}/page.html",
                                  "example.com.cn", depth=number % 4)
        request.priority = -(number % 4)
        requests.append(request)
    return requests


def time_json(requests: list[Request], spider: TopicSpider) -> float:
    started = time.perf_counter()
    for request in requests:
        decode_request(encode_request(request, spider), spider)
    return time.perf_counter() - started


def time_pickle(requests: list[Request], codec: Any) -> float:
    started = time.perf_counter()
    for request in requests:
        codec._decode_request(codec._encode_request(request))
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    from scrapy_redis.queue import PriorityQueue

    print("\n".join(header_lines("distributed queue encoding: JSON data against pickle", ["scrapy", "scrapy-redis"])))
    spider = TopicSpider(seeds="http://www0.example.com.cn/")
    codec = PriorityQueue(None, spider, "bench:requests")
    requests = sample_requests(spider, arguments.requests)
    ratios = []
    for round_number in range(1, arguments.rounds + 1):
        # Turns flip each round, so that drift favours neither.
        if round_number % 2:
            json_seconds, pickle_seconds = time_json(requests, spider), time_pickle(requests, codec)
        else:
            pickle_seconds, json_seconds = time_pickle(requests, codec), time_json(requests, spider)
        ratios.append(json_seconds / pickle_seconds)
        print(f"round {round_number}: JSON {json_seconds / len(requests) * 1e6:.1f} µs, pickle "
              f"{pickle_seconds / len(requests) * 1e6:.1f} µs a request (encode + decode); ratio {ratios[-1]:.2f}")
    sizes = len(encode_request(requests[0], spider)), len(codec._encode_request(requests[0]))
    print(f"JSON against pickle, time per request: median {statistics.median(ratios):.2f}"
          f" ({min(ratios):.2f}-{max(ratios):.2f}); one entry: {sizes[0]} bytes JSON, {sizes[1]} bytes pickle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
