#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub, serving a directory of repos over real HTTP.

The model fetcher's tests point `HF_ENDPOINT` at it to fetch `hf://org/repo[:revision]`.
It answers the endpoints the Hub has and the `huggingface_hub` client calls (verified against
huggingface_hub 2.4's `snapshot_download`, `model_info` and `hf_hub_download` by
tests/stores/test_hf_hub.py):

  GET  /api/models/{org}/{repo}[/revision/{rev}][?blobs=true]
       -> {"id", "modelId", "sha", "private", "siblings": [{"rfilename"[, "size", "blobId"]}]}
  GET  /api/models/{org}/{repo}/tree/{rev}[/{path}][?recursive=true]
       -> [{"type": "file"|"directory", "path", "oid", "size"}]
  GET|HEAD /{org}/{repo}/resolve/{rev}/{path}
       -> the file, with ETag, X-Repo-Commit, Content-Length, Accept-Ranges: bytes;
          a single `Range: bytes=...` is answered 206 with Content-Range (416 when unsatisfiable).

Repos are the folders `<root>/<org>/<repo>/`; every regular file under one is a repo file
(symlinks and dot-folders such as `.git` are skipped). A repo has one branch, `main` (the
default), whose commit `sha` is a git-style hash over the tree's paths and file contents, so
changing, adding or removing a file changes it; that 40-hex sha is accepted as a revision
too. A file's `oid` and ETag are its git blob hash (sha1 of `blob <len>\\0<content>`).

Errors are the Hub's: 404 with `X-Error-Code: RepoNotFound`, `RevisionNotFound` or
`EntryNotFound` (and `X-Error-Message`); 401 when `--token` is set and a request lacks
`Authorization: Bearer <token>`.

Usage:
  python3 tests/stores/hf_hub.py --root DIR [--host 127.0.0.1] [--port 0] [--token T]
                                 [--cut-after BYTES]
Prints one line `listening on http://127.0.0.1:PORT` on stdout (flushed) once it accepts
connections. `--cut-after N` sends at most N bytes of each file body (after headers that
announce the full length) and then closes the connection: a download cut halfway through.
Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_REVISION = "main"
CHUNK = 1 << 20
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class HubError(Exception):
    """An error answered with the Hub's status, X-Error-Code and X-Error-Message."""

    def __init__(self, status: int, code: str | None, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Repos:
    """The repos under a root folder, with blob hashes cached by (path, size, mtime)."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self._blobs: dict[Path, tuple[int, int, str]] = {}
        self._lock = threading.Lock()

    def repo_dir(self, org: str, name: str) -> Path:
        for part in (org, name):
            if part in ("", ".", "..") or "/" in part or part.startswith("."):
                raise HubError(404, "RepoNotFound", f"Repository {org}/{name} not found")
        path = self.root / org / name
        if not path.is_dir() or path.is_symlink():
            raise HubError(404, "RepoNotFound", f"Repository {org}/{name} not found")
        return path

    def files(self, repo: Path) -> list[str]:
        """Repo-relative paths of every regular file, sorted."""
        out = []
        for dirpath, dirnames, filenames in os.walk(repo):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in filenames:
                full = Path(dirpath) / f
                if full.is_file() and not full.is_symlink():
                    out.append(full.relative_to(repo).as_posix())
        return sorted(out)

    def blob_oid(self, path: Path) -> str:
        st = path.stat()
        with self._lock:
            cached = self._blobs.get(path)
        if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
            return cached[2]
        h = hashlib.sha1(b"blob %d\0" % st.st_size)
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        oid = h.hexdigest()
        with self._lock:
            self._blobs[path] = (st.st_size, st.st_mtime_ns, oid)
        return oid

    def commit(self, repo: Path, files: list[str]) -> str:
        h = hashlib.sha1(b"skiff-hf-hub commit\0")
        for rel in files:
            h.update(rel.encode() + b"\0" + self.blob_oid(repo / rel).encode() + b"\n")
        return h.hexdigest()

    def resolve_revision(self, repo: Path, org: str, name: str, rev: str) -> tuple[list[str], str]:
        files = self.files(repo)
        sha = self.commit(repo, files)
        if rev not in (DEFAULT_REVISION, sha):
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {rev} for {org}/{name}")
        return files, sha

    def file_path(self, repo: Path, rel: str) -> Path | None:
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            return None
        path = repo.joinpath(*parts)
        if not path.is_file() or path.is_symlink():
            return None
        return path


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """Parses one `bytes=a-b` range into an inclusive (start, end); None when unsatisfiable."""
    m = RANGE_RE.match(header.strip())
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    if m.group(1) == "":
        n = int(m.group(2))
        if n == 0 or size == 0:
            return None
        return max(0, size - n), size - 1
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


class Handler(BaseHTTPRequestHandler):
    """One request against the Hub's URL layout."""

    protocol_version = "HTTP/1.1"
    server_version = "skiff-hf-hub"
    repos: Repos
    token: str | None
    cut_after: int | None

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        sys.stderr.write("hf_hub: %s %s\n" % (self.address_string(), format % args))

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self.handle_request(head=False)

    def do_HEAD(self) -> None:  # noqa: N802 - the base class's name
        self.handle_request(head=True)

    def handle_request(self, head: bool) -> None:
        try:
            self.check_token()
            url = urlsplit(self.path)
            segs = [unquote(s) for s in url.path.split("/")[1:]]
            query = parse_qs(url.query)
            if len(segs) >= 3 and segs[:2] == ["api", "models"]:
                self.api(segs[2:], query, head)
            elif len(segs) >= 5 and segs[2] == "resolve":
                self.resolve(segs[0], segs[1], segs[3], "/".join(segs[4:]), head)
            else:
                raise HubError(404, None, f"no route for {url.path}")
        except HubError as e:
            self.send_error_json(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def check_token(self) -> None:
        if self.token is None:
            return
        if self.headers.get("Authorization", "") != f"Bearer {self.token}":
            raise HubError(401, None, "Invalid credentials in Authorization header")

    def api(self, segs: list[str], query: dict, head: bool) -> None:
        if len(segs) < 2:
            raise HubError(404, None, "no route")
        org, name, rest = segs[0], segs[1], segs[2:]
        repo = self.repos.repo_dir(org, name)
        if not rest:
            rev, kind, sub = DEFAULT_REVISION, "info", ""
        elif rest[0] == "revision" and len(rest) == 2:
            rev, kind, sub = rest[1], "info", ""
        elif rest[0] == "tree" and len(rest) >= 2:
            rev, kind, sub = rest[1], "tree", "/".join(rest[2:])
        else:
            raise HubError(404, None, f"no route for /api/models/{'/'.join(segs)}")
        files, sha = self.repos.resolve_revision(repo, org, name, rev)
        if kind == "info":
            blobs = query.get("blobs", ["false"])[0].lower() == "true"
            siblings = []
            for rel in files:
                entry: dict = {"rfilename": rel}
                if blobs:
                    entry["size"] = (repo / rel).stat().st_size
                    entry["blobId"] = self.repos.blob_oid(repo / rel)
                siblings.append(entry)
            body = {
                "_id": sha[:24],
                "id": f"{org}/{name}",
                "modelId": f"{org}/{name}",
                "sha": sha,
                "private": self.token is not None,
                "disabled": False,
                "gated": False,
                "tags": [],
                "siblings": siblings,
            }
        else:
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            body = self.tree(repo, files, sub, recursive, org, name)
        self.send_json(200, body, head, {"X-Repo-Commit": sha})

    def tree(self, repo: Path, files: list[str], sub: str, recursive: bool, org: str, name: str) -> list:
        prefix = f"{sub.strip('/')}/" if sub.strip("/") else ""
        under = [f for f in files if f.startswith(prefix)]
        if prefix and not under:
            raise HubError(404, "EntryNotFound", f"{sub} does not exist on {DEFAULT_REVISION} of {org}/{name}")
        entries: dict[str, dict] = {}
        for rel in under:
            parts = rel[len(prefix):].split("/")
            for depth in range(1, len(parts)):
                if not recursive and depth > 1:
                    break
                d = prefix + "/".join(parts[:depth])
                if d not in entries:
                    oid = hashlib.sha1(b"tree\0" + d.encode()).hexdigest()
                    entries[d] = {"type": "directory", "oid": oid, "size": 0, "path": d}
            if recursive or len(parts) == 1:
                st = (repo / rel).stat()
                entries[rel] = {
                    "type": "file",
                    "oid": self.repos.blob_oid(repo / rel),
                    "size": st.st_size,
                    "path": rel,
                }
        return [entries[k] for k in sorted(entries)]

    def resolve(self, org: str, name: str, rev: str, rel: str, head: bool) -> None:
        repo = self.repos.repo_dir(org, name)
        _, sha = self.repos.resolve_revision(repo, org, name, rev)
        path = self.repos.file_path(repo, rel)
        if path is None:
            raise HubError(404, "EntryNotFound", f"{rel} does not exist on {rev} of {org}/{name}")
        size = path.stat().st_size
        oid = self.repos.blob_oid(path)
        headers = {
            "ETag": f'"{oid}"',
            "X-Repo-Commit": sha,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        start, end, status = 0, size - 1, 200
        if "Range" in self.headers:
            r = parse_range(self.headers["Range"], size)
            if r is None:
                headers["Content-Range"] = f"bytes */{size}"
                self.send_body(416, b"", head, headers)
                return
            start, end, status = r[0], r[1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = end - start + 1
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if head:
            return
        self.stream(path, start, length)

    def stream(self, path: Path, start: int, length: int) -> None:
        budget = length if self.cut_after is None else min(length, self.cut_after)
        with open(path, "rb") as f:
            f.seek(start)
            while budget > 0:
                chunk = f.read(min(CHUNK, budget))
                if not chunk:
                    break
                self.wfile.write(chunk)
                budget -= len(chunk)
        if self.cut_after is not None and self.cut_after < length:
            self.wfile.flush()
            self.close_connection = True

    def send_json(self, status: int, body, head: bool, extra: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_body(status, data, head, {"Content-Type": "application/json", **(extra or {})})

    def send_body(self, status: int, data: bytes, head: bool, headers: dict) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def send_error_json(self, e: HubError) -> None:
        # Header values go out as latin-1: keep them ASCII whatever the path holds.
        message = e.message.encode("ascii", "backslashreplace").decode()
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if e.code:
            headers["X-Error-Code"] = e.code
        if e.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="Authentication required", charset="UTF-8"'
        data = json.dumps({"error": e.message}).encode()
        self.send_body(e.status, data, self.command == "HEAD", headers)


def make_server(root: Path, host: str, port: int, token: str | None, cut_after: int | None) -> ThreadingHTTPServer:
    """Binds a server for the repos under `root` (port 0 picks a free port)."""
    handler = type(
        "BoundHandler",
        (Handler,),
        {"repos": Repos(root), "token": token, "cut_after": cut_after},
    )
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a directory of repos with the Hugging Face Hub's URL layout.")
    parser.add_argument("--root", required=True, type=Path, help="folder holding <org>/<repo>/ folders")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--token", help="require `Authorization: Bearer TOKEN` on every request")
    parser.add_argument("--cut-after", type=int, help="close the connection after this many bytes of a file body")
    args = parser.parse_args()
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a folder")
    server = make_server(args.root, args.host, args.port, args.token, args.cut_after)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
