#!/usr/bin/env python3
"""The object store's side of edgerec's offload tests: a real S3 server
(PyPI moto[server], in this process) and the reference client (boto3) that
checks what edgerec sent.

Subcommands (`s3peer.py SUBCOMMAND --help` for every option):
  serve     moto's S3 server on 127.0.0.1:PORT until SIGTERM/SIGINT; prints
            one line `ready` once it answers.
  mkbucket  creates a bucket.
  verify    downloads every object under a prefix and compares each with the
            local file of the same name in a directory: prints one JSON
            object {key: {"size", "sha256", "local_sha256", "equal"}, ...}.

Every client names the endpoint and its credentials explicitly; nothing asks
an SDK's default endpoint, region lookup or credential chain
(AWS_EC2_METADATA_DISABLED is set before boto3 is imported).

Exit status: 0 success, 1 error, 2 usage.
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import time
import urllib.request

os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
KEY, SECRET, REGION = "edgerec-test", "edgerec-test-secret", "us-east-1"


def client(endpoint: str):
    import boto3
    from botocore.config import Config
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY,
        aws_secret_access_key=SECRET, region_name=REGION,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))


def cmd_serve(args: argparse.Namespace) -> int:
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{args.port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            break
        except Exception:  # not up yet
            if time.monotonic() > deadline:
                print("moto did not answer within 30 s", file=sys.stderr)
                return 1
            time.sleep(0.1)
    print("ready", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.1)
    server.stop()
    return 0


def cmd_mkbucket(args: argparse.Namespace) -> int:
    client(args.endpoint).create_bucket(Bucket=args.bucket)
    return 0


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cmd_verify(args: argparse.Namespace) -> int:
    s3 = client(args.endpoint)
    out = {}
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=args.bucket, Prefix=args.prefix)
    for page in pages:
        for obj in page.get("Contents", []):
            key = obj["Key"]
            got = s3.get_object(Bucket=args.bucket, Key=key)
            data = got["Body"].read()
            local = os.path.join(args.dir, key.rsplit("/", 1)[-1])
            local_sha = None
            if os.path.exists(local):
                with open(local, "rb") as f:
                    local_sha = sha256(f.read())
            out[key] = {"size": len(data), "sha256": sha256(data), "local_sha256": local_sha,
                        "equal": local_sha == sha256(data),
                        "meta_sha256": got.get("Metadata", {}).get("sha256")}
    print(json.dumps(out, sort_keys=True))
    return 0


def main(argv=None) -> int:
    top = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="moto's S3 server on 127.0.0.1:PORT")
    p.add_argument("--port", type=int, required=True)
    p.set_defaults(func=cmd_serve)
    for name, func in (("mkbucket", cmd_mkbucket), ("verify", cmd_verify)):
        c = sub.add_parser(name)
        c.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:9000")
        c.add_argument("--bucket", required=True)
        if name == "verify":
            c.add_argument("--prefix", default="")
            c.add_argument("--dir", required=True, help="the local files, by name")
        c.set_defaults(func=func)
    args = top.parse_args(argv)
    try:
        return args.func(args)
    except Exception as e:  # boto3/moto errors: say which, exit 1
        print(f"s3peer {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
