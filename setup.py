"""Packaging for deployment to scrapyd: ``scrapyd-deploy`` (scrapyd-client) builds an
egg of the ``topicspider`` package from this file and uploads it; the ``scrapy`` entry
point tells scrapyd where the project's settings are. Runtime dependencies come from
``requirements.txt``, the one list of them; install them where scrapyd runs (see
docs/scrapyd.md)."""

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent


def version() -> str:
    """The package's own ``__version__``, the one the User-Agent sends: read, not
    imported, since building the egg must not need the package's dependencies."""
    source = (HERE / "topicspider" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', source, re.MULTILINE)
    if found is None:
        raise SystemExit("setup.py: no __version__ in topicspider/__init__.py")
    return found.group(1)


def requirements() -> list[str]:
    lines = (HERE / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


setup(
    name="topicspider",
    version=version(),
    description="A polite, topic-focused web crawler built on Scrapy",
    packages=find_packages(include=["topicspider", "topicspider.*"]),
    package_data={"topicspider.topic": ["stopwords.txt"], "topicspider.demo": ["site/**/*"],
                  "topicspider.console": ["templates/*.html", "static/*"]},
    install_requires=requirements(),
    python_requires=">=3.10",
    entry_points={"scrapy": ["settings = topicspider.settings"]},
    zip_safe=False,
)
