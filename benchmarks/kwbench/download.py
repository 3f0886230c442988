"""The cold baseline: a plain parallel download of the same files, nothing else.

Threads share one httpx client (kept-alive connections) and stream each URL to its own
file in 1 MiB chunks; no HEAD requests, no hashing, no cache bookkeeping.

    python -m benchmarks.kwbench.download --dest DIR --urls-from LIST [--threads 8]
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

CHUNK = 1 << 20


def fetch(client: httpx.Client, url: str, dest: Path) -> int:
    size = 0
    with client.stream("GET", url) as response, dest.open("wb") as out:
        response.raise_for_status()
        for chunk in response.iter_bytes(CHUNK):
            out.write(chunk)
            size += len(chunk)
    return size


def download(urls: list[str], dest: Path, threads: int) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    limits = httpx.Limits(max_connections=threads, max_keepalive_connections=threads)
    with httpx.Client(limits=limits, timeout=300, follow_redirects=True) as client, \
            ThreadPoolExecutor(threads) as pool:
        sizes = pool.map(lambda item: fetch(client, item[1], dest / str(item[0])), enumerate(urls))
        return sum(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--urls-from", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    urls = [line for line in args.urls_from.read_text().splitlines() if line]
    print(json.dumps({"bytes": download(urls, args.dest, args.threads), "files": len(urls)}))


if __name__ == "__main__":
    main()
