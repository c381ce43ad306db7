#!/usr/bin/env python3
"""Starts each store as tests/stores/README.md says and checks it with a real client.

  MinIO            boto3: bucket, multipart upload, ranged GET, ETag; 404 NoSuchBucket /
                   NoSuchKey, 403 for a wrong secret, anonymous GET of a public bucket;
                   then bench/peers/kserve_storage_fetch.py (KServe's storage initializer)
                   downloads the same objects through S3_ENDPOINT / AWS_* variables.
  fake-gcs-server  the JSON API to create and upload, then the XML-style URLs object_store's
                   GCS client uses (GET /{bucket}?list-type=2, GET|HEAD /{bucket}/{object}, Range).

Exits non-zero on the first failure. Needs the binaries of tests/stores/build.sh and boto3 +
kserve-storage (the kserve-storage peer's venv):

    PEERS=kserve-storage bench/peers/setup.sh
    .bench/kserve-storage-venv/bin/python tests/stores/smoke.py "$(tests/stores/build.sh)"
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
from botocore.client import Config
from botocore.exceptions import ClientError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
USER, PASSWORD = "skiffadmin", "skiffsecret"


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def wait_ready(url: str, proc: subprocess.Popen, seconds: float = 30) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            if http("GET", url)[0] == 200:
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} not ready in {seconds}s")


def start_minio(bindir: Path, data: Path) -> tuple[subprocess.Popen, str, float]:
    env = {
        **os.environ,
        "MINIO_ROOT_USER": USER,
        "MINIO_ROOT_PASSWORD": PASSWORD,
        "MINIO_BROWSER": "off",
        "MINIO_UPDATE": "off",
    }
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(bindir / "minio"), "server", str(data), "--address", "127.0.0.1:0", "--anonymous"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:
        m = re.search(r"API: http://127\.0\.0\.1:(\d+)", line)
        if m:
            url = f"http://127.0.0.1:{m.group(1)}"
            break
    else:
        raise AssertionError(f"minio exited ({proc.wait()}) without printing its API address")
    # Keep reading its log so a full pipe never blocks it.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    wait_ready(f"{url}/minio/health/live", proc)
    return proc, url, time.monotonic() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_fake_gcs(bindir: Path) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    proc = subprocess.Popen(
        [
            str(bindir / "fake-gcs-server"),
            "-scheme", "http",
            "-host", "127.0.0.1",
            "-port", str(port),
            "-public-host", "127.0.0.1",
            "-external-url", url,
            "-backend", "memory",
            "-log-level", "warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_ready(f"{url}/storage/v1/b", proc)
    return proc, url, time.monotonic() - start


def check_minio(url: str, work: Path) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=USER,
        aws_secret_access_key=PASSWORD,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    s3.create_bucket(Bucket="models")
    big = os.urandom(20 << 20)
    (work / "big.bin").write_bytes(big)
    s3.upload_file(str(work / "big.bin"), "models", "m/big.bin")  # multipart (8 MiB parts)
    s3.put_object(Bucket="models", Key="m/sub/config.json", Body=b"{}")
    listed = {o["Key"]: o for o in s3.list_objects_v2(Bucket="models", Prefix="m/")["Contents"]}
    assert set(listed) == {"m/big.bin", "m/sub/config.json"}, listed
    assert listed["m/big.bin"]["Size"] == len(big)
    assert listed["m/big.bin"]["ETag"].endswith('-3"'), listed["m/big.bin"]["ETag"]
    part = s3.get_object(Bucket="models", Key="m/big.bin", Range="bytes=1000-1999")
    assert part["ContentRange"] == f"bytes 1000-1999/{len(big)}" and part["Body"].read() == big[1000:2000]

    for call, code in (
        (lambda: s3.list_objects_v2(Bucket="nobucket"), "NoSuchBucket"),
        (lambda: s3.get_object(Bucket="models", Key="m/none"), "NoSuchKey"),
    ):
        try:
            call()
            raise AssertionError(f"expected {code}")
        except ClientError as e:
            assert e.response["Error"]["Code"] == code, e.response["Error"]
    wrong = boto3.client("s3", endpoint_url=url, aws_access_key_id=USER, aws_secret_access_key="wrong", region_name="us-east-1")
    try:
        wrong.get_object(Bucket="models", Key="m/big.bin")
        raise AssertionError("a wrong secret must be refused")
    except ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 403, e.response

    # Anonymous reads of a public bucket (s3:GetObject + s3:ListBucket for everyone).
    s3.create_bucket(Bucket="public")
    s3.put_object(Bucket="public", Key="m/model.onnx", Body=b"onnx")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": ["*"]}, "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::public/*"]},
            {"Effect": "Allow", "Principal": {"AWS": ["*"]}, "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::public"]},
        ],
    }
    assert http("GET", f"{url}/public/m/model.onnx")[0] == 403
    s3.put_bucket_policy(Bucket="public", Policy=json.dumps(policy))
    assert http("GET", f"{url}/public/m/model.onnx")[::2] == (200, b"onnx")
    assert http("GET", f"{url}/public?list-type=2&prefix=m/")[0] == 200

    # KServe's storage initializer on the same objects, configured as in a KServe pod.
    env = {
        **os.environ,
        "S3_ENDPOINT": url.removeprefix("http://"),
        "S3_USE_HTTPS": "0",
        "S3_VERIFY_SSL": "0",
        "AWS_ACCESS_KEY_ID": USER,
        "AWS_SECRET_ACCESS_KEY": PASSWORD,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env.pop("AWS_ENDPOINT_URL", None)
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peers" / "kserve_storage_fetch.py"), "s3://models/m", str(work / "ks")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["bytes"] == len(big) + 2 and report["files"] == 2, report
    assert (work / "ks" / "big.bin").read_bytes() == big
    assert (work / "ks" / "sub" / "config.json").read_bytes() == b"{}"


def check_fake_gcs(url: str) -> None:
    status, _, _ = http("POST", f"{url}/storage/v1/b?project=test", json.dumps({"name": "models"}).encode(), {"Content-Type": "application/json"})
    assert status == 200, status
    data = os.urandom(5 << 20)
    for name, body in (("m/model.onnx", data), ("m/sub/config.json", b"{}")):
        status, _, _ = http("POST", f"{url}/upload/storage/v1/b/models/o?uploadType=media&name={name}", body)
        assert status == 200, status
    status, _, listing = http("GET", f"{url}/models?list-type=2&prefix=m/")
    assert status == 200 and b"<Key>m/model.onnx</Key>" in listing and b"<Key>m/sub/config.json</Key>" in listing, listing
    status, headers, body = http("GET", f"{url}/models/m/model.onnx")
    assert status == 200 and body == data and headers.get("Etag"), headers
    status, headers, body = http("GET", f"{url}/models/m/model.onnx", headers={"Range": "bytes=10-19"})
    assert status == 206 and body == data[10:20] and headers["Content-Range"] == f"bytes 10-19/{len(data)}"
    status, headers, _ = http("HEAD", f"{url}/models/m/model.onnx")
    assert status == 200 and int(headers["Content-Length"]) == len(data)
    assert http("GET", f"{url}/models/m/none")[0] == 404
    assert http("GET", f"{url}/storage/v1/b/models/o/m%2Fmodel.onnx?alt=media")[2] == data


def main() -> None:
    bindir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(subprocess.check_output([str(HERE / "build.sh")], text=True).strip())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "minio").mkdir()
        minio, url, took = start_minio(bindir, work / "minio")
        try:
            print(f"minio ready at {url} in {took:.2f}s")
            check_minio(url, work)
            print("ok minio")
        finally:
            minio.terminate()
            minio.wait(timeout=30)
        gcs, url, took = start_fake_gcs(bindir)
        try:
            print(f"fake-gcs-server ready at {url} in {took:.2f}s")
            check_fake_gcs(url)
            print("ok fake-gcs-server")
        finally:
            gcs.terminate()
            gcs.wait(timeout=30)


if __name__ == "__main__":
    main()
