#!/usr/bin/env python3
"""Download a model the way KServe's storage initializer does, and time it.

    kserve_storage_fetch.py URI DIR

Calls `kserve_storage.Storage.download_files([URI], [DIR])` from the `kserve-storage` package
(PyPI), the call the storage-initializer image's entrypoint makes for its `src_uri dest_path`
pairs, after the same `configure_logging()`. Prints one JSON line on stdout:
    {"uri": ..., "dir": ..., "seconds": 1.234, "bytes": 104857738, "files": 1, "mb_per_s": 85.0}
(`bytes` and `files` count what landed under DIR; MB is 10^6 bytes).

Credentials and endpoint come from the environment as in a KServe pod: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_DEFAULT_REGION, S3_VERIFY_SSL,
awsAnonymousCredential. KServe's controller turns a secret's `S3_ENDPOINT` + `S3_USE_HTTPS`
into the pod's AWS_ENDPOINT_URL; the package itself reads only AWS_ENDPOINT_URL, so this script
does that one step when AWS_ENDPOINT_URL is unset. Run it with the kserve-storage peer's venv
(PEERS=kserve-storage bench/peers/setup.sh):

    .bench/kserve-storage-venv/bin/python bench/peers/kserve_storage_fetch.py s3://models/100M /tmp/out
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def endpoint_from_s3_env(env: dict) -> str | None:
    """AWS_ENDPOINT_URL as KServe's controller derives it from S3_ENDPOINT and S3_USE_HTTPS."""
    endpoint = env.get("S3_ENDPOINT")
    if env.get("AWS_ENDPOINT_URL") or not endpoint:
        return None
    if "://" in endpoint:
        return endpoint
    scheme = "http" if env.get("S3_USE_HTTPS", "1") in ("0", "false") else "https"
    return f"{scheme}://{endpoint}"


def tree_size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: kserve_storage_fetch.py URI DIR")
    uri, out = sys.argv[1], Path(sys.argv[2])
    if endpoint := endpoint_from_s3_env(dict(os.environ)):
        os.environ["AWS_ENDPOINT_URL"] = endpoint

    from kserve_storage import Storage, configure_logging

    configure_logging()
    start = time.monotonic()
    Storage.download_files([uri], [str(out)])
    seconds = time.monotonic() - start
    size, count = tree_size(out)
    report = {
        "uri": uri,
        "dir": str(out),
        "seconds": round(seconds, 3),
        "bytes": size,
        "files": count,
        "mb_per_s": round(size / 1e6 / seconds, 1) if seconds > 0 else None,
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
