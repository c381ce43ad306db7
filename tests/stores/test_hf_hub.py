#!/usr/bin/env python3
"""Proves tests/stores/hf_hub.py has the Hugging Face Hub's layout: the real `huggingface_hub`
client downloads a repo from it, and its 401 and 404 answers are the errors the client maps.

The server runs as a child process on a free port, as the Rust tests start it. Needs
`huggingface_hub` (installed in the kserve-storage peer's venv by bench/peers/setup.sh):

    PEERS=kserve-storage bench/peers/setup.sh
    .bench/kserve-storage-venv/bin/python tests/stores/test_hf_hub.py
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from huggingface_hub import HfApi, hf_hub_download, snapshot_download  # noqa: E402 - reads the env above
from huggingface_hub.errors import (  # noqa: E402
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

HERE = Path(__file__).resolve().parent


class Hub:
    """hf_hub.py started as a child process; stopped on exit."""

    def __init__(self, root: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "hf_hub.py"), "--root", str(root), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:"), line
        self.url = line.removeprefix("listening on ")

    def __enter__(self) -> "Hub":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def write_repo(root: Path) -> dict[str, bytes]:
    files = {
        "model.onnx": os.urandom(3 << 20),
        "config.json": b'{"name": "tiny"}\n',
        "sub/dir/vocab.txt": b"a\nb\nc\n",
    }
    for rel, data in files.items():
        path = root / "acme" / "tiny" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def read_tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and ".cache" not in p.relative_to(folder).parts
    }


def get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_snapshot_download_with_the_real_client(root: Path, work: Path) -> None:
    files = write_repo(root)
    with Hub(root) as hub:
        got = snapshot_download("acme/tiny", endpoint=hub.url, local_dir=work / "a", token=False)
        assert read_tree(Path(got)) == files, "snapshot differs from the repo"

        info = HfApi(endpoint=hub.url, token=False).model_info("acme/tiny", files_metadata=True)
        assert info.id == "acme/tiny"
        assert len(info.sha) == 40
        sizes = {s.rfilename: s.size for s in info.siblings}
        assert sizes == {k: len(v) for k, v in files.items()}, sizes

        # The commit is pinned: downloading by sha gives the same files, and a changed file
        # changes the sha.
        by_sha = snapshot_download("acme/tiny", revision=info.sha, endpoint=hub.url, local_dir=work / "b", token=False)
        assert read_tree(Path(by_sha)) == files
        (root / "acme" / "tiny" / "config.json").write_bytes(b'{"name": "changed"}\n')
        after = HfApi(endpoint=hub.url, token=False).model_info("acme/tiny")
        assert after.sha != info.sha, "a changed file must change the commit sha"
        try:
            HfApi(endpoint=hub.url, token=False).model_info("acme/tiny", revision=info.sha)
            raise AssertionError("the old sha must be gone")
        except RevisionNotFoundError:
            pass


def test_resolve_headers_and_ranges(root: Path) -> None:
    files = write_repo(root)
    data = files["model.onnx"]
    with Hub(root) as hub:
        url = f"{hub.url}/acme/tiny/resolve/main/model.onnx"
        status, headers, body = get(url)
        assert status == 200 and body == data
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        assert headers["ETag"] == f'"{blob}"', headers["ETag"]
        assert headers["Accept-Ranges"] == "bytes"
        assert int(headers["Content-Length"]) == len(data)
        assert len(headers["X-Repo-Commit"]) == 40

        status, headers, body = get(url, {"Range": "bytes=100-199"})
        assert status == 206 and body == data[100:200], status
        assert headers["Content-Range"] == f"bytes 100-199/{len(data)}"
        status, _, body = get(url, {"Range": "bytes=-10"})
        assert status == 206 and body == data[-10:]
        status, headers, _ = get(url, {"Range": f"bytes={len(data)}-"})
        assert status == 416 and headers["Content-Range"] == f"bytes */{len(data)}"

        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req) as r:
            assert r.status == 200 and int(r.headers["Content-Length"]) == len(data)
            assert r.read() == b""


def test_token_required(root: Path, work: Path) -> None:
    files = write_repo(root)
    with Hub(root, "--token", "hf_secret") as hub:
        for token in (False, "hf_wrong"):
            try:
                HfApi(endpoint=hub.url, token=token).model_info("acme/tiny")
                raise AssertionError(f"token {token!r} must be refused")
            except HfHubHTTPError as e:
                assert e.response.status_code == 401, e.response.status_code
        status, _, _ = get(f"{hub.url}/acme/tiny/resolve/main/config.json")
        assert status == 401
        got = snapshot_download("acme/tiny", endpoint=hub.url, local_dir=work / "t", token="hf_secret")
        assert read_tree(Path(got)) == files


def test_not_found(root: Path) -> None:
    write_repo(root)
    with Hub(root) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        for call, err in (
            (lambda: api.model_info("acme/missing"), RepositoryNotFoundError),
            (lambda: api.model_info("acme/tiny", revision="v9"), RevisionNotFoundError),
            (
                lambda: hf_hub_download("acme/tiny", "nope.bin", endpoint=hub.url, token=False, cache_dir=root / ".c"),
                EntryNotFoundError,
            ),
        ):
            try:
                call()
                raise AssertionError(f"expected {err.__name__}")
            except err as e:
                assert e.response.status_code == 404
        status, headers, _ = get(f"{hub.url}/acme/tiny/resolve/main/../../etc/passwd")
        assert status == 404
        status, headers, _ = get(f"{hub.url}/acme/missing/resolve/main/model.onnx")
        assert status == 404 and headers["X-Error-Code"] == "RepoNotFound"


def test_cut_after(root: Path) -> None:
    files = write_repo(root)
    with Hub(root, "--cut-after", "1000") as hub:
        url = f"{hub.url}/acme/tiny/resolve/main/model.onnx"
        try:
            get(url)
            raise AssertionError("a cut body must fail to read in full")
        except Exception as e:  # http.client.IncompleteRead
            assert type(e).__name__ == "IncompleteRead", repr(e)
            assert len(e.partial) == 1000
        status, _, body = get(f"{hub.url}/acme/tiny/resolve/main/config.json")
        assert status == 200 and body == files["config.json"], "a body under the cut is whole"


def main() -> None:
    tests = [v for k, v in globals().items() if k.startswith("test_")]
    for test in tests:
        with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as work:
            args = [Path(root), Path(work)][: test.__code__.co_argcount]
            test(*args)
        print(f"ok {test.__name__}")
    print(f"{len(tests)} passed")


if __name__ == "__main__":
    main()
