"""A reference point for the cold rows: huggingface_hub's own ``snapshot_download`` of
the whole release (every file at v1.0.0) into the HF cache given by HF_HOME, nothing else.

    HF_ENDPOINT=... HF_HOME=... python -m benchmarks.kwbench.hub_download ORG/NAME REVISION
"""

from __future__ import annotations

import sys


def main() -> None:
    from huggingface_hub import snapshot_download

    repo_id, revision = sys.argv[1:3]
    print(snapshot_download(repo_id, repo_type="kernel", revision=revision))


if __name__ == "__main__":
    main()
