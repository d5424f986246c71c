#!/usr/bin/env python3
"""The object store's side of edgerec's offload tests: a real S3 server
(PyPI moto[server], in this process) and the reference client (boto3) that
checks what edgerec sent.

Subcommands (`s3peer.py SUBCOMMAND --help` for every option):
  serve     moto's S3 server on 127.0.0.1:PORT until SIGTERM/SIGINT; prints
            one line `ready` once it answers. With --tls DIR: HTTPS, with a
            CA made for the run (DIR/ca.pem) that signs the server's
            certificate (for 127.0.0.1 and each --san IP) and a client certificate
            (DIR/client.pem, DIR/client.key, mode 600); with --mutual the
            server refuses a client without that certificate.
  mkbucket  creates a bucket.
  verify    downloads every object under a prefix and compares each with the
            local file of the same name in a directory: prints one JSON
            object {key: {"size", "sha256", "local_sha256", "equal",
            "meta_sha256", "etag", "sse"}, ...}.
  proxy     an HTTP proxy on 127.0.0.1:PORT in front of a plain-HTTP server,
            with one fault: `reset` (part 2's first request is cut half way
            with a TCP reset), `slowdown` (the first two UploadPart requests
            get 503 SlowDown with Retry-After: 1), `down` (after two parts
            are acknowledged, the port closes for --down-seconds and every
            open connection is cut, then it listens again), `deny` (every
            request gets S3's 403 InvalidAccessKeyId, as for wrong keys),
            `garbage` (CreateMultipartUpload gets a 200 whose body is an
            HTML page, as from a captive portal). Writes one JSON
            line per request to --log: {"method", "part", "status"}
            ("status" "reset" or "cut" when no reply was given).
  get       prints one object's bytes.
  put       stores a file as an object, with a given x-amz-meta-sha256 (a
            forged object, for the tests that must find it out).

Every client names the endpoint and its credentials explicitly (moto's test
keys, or S3PEER_KEY and S3PEER_SECRET: s3rver's are S3RVER); nothing asks
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
KEY = os.environ.get("S3PEER_KEY", "edgerec-test")
SECRET = os.environ.get("S3PEER_SECRET", "edgerec-test-secret")
REGION = "us-east-1"


def client(endpoint: str):
    """boto3 against `endpoint`; an https:// one is checked against
    S3PEER_TLS_DIR/ca.pem and shown S3PEER_TLS_DIR/client.pem."""
    import boto3
    from botocore.config import Config
    tls = os.environ.get("S3PEER_TLS_DIR")
    extra, verify = {}, None
    if tls and endpoint.startswith("https://"):
        verify = os.path.join(tls, "ca.pem")
        extra["client_cert"] = (os.path.join(tls, "client.pem"), os.path.join(tls, "client.key"))
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY,
        aws_secret_access_key=SECRET, region_name=REGION, verify=verify,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}, **extra))


def make_tls(out: str, sans: tuple = (), clients: tuple = (("client", "robot-7"),)) -> None:
    """A CA for this run, a server certificate for 127.0.0.1 (and the IP
    addresses in `sans`) and a client certificate for each (file name, CN)
    of `clients` (NAME.pem, NAME.key), all signed by it (ECDSA P-256,
    valid for a day)."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "edgerec test CA")])

    def base(name, key):
        return (x509.CertificateBuilder().subject_name(name).issuer_name(ca_name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1)))

    ca = (base(ca_name, ca_key)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))

    def leaf(cn, usage, san):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (base(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]), key)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                            critical=False))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, b.sign(ca_key, hashes.SHA256())

    def write(name, data, mode=0o644):
        path = os.path.join(out, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    pem = serialization.Encoding.PEM
    def key_pem(k):
        return k.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())
    server_key, server = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                              [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", *sans)])
    write("ca.pem", ca.public_bytes(pem))
    write("server.pem", server.public_bytes(pem))
    write("server.key", key_pem(server_key), 0o600)
    for name, cn in clients:
        client_key, client_cert = leaf(cn, ExtendedKeyUsageOID.CLIENT_AUTH, None)
        write(f"{name}.pem", client_cert.public_bytes(pem))
        write(f"{name}.key", key_pem(client_key), 0o600)


def cmd_serve(args: argparse.Namespace) -> int:
    import ssl
    import threading
    from werkzeug.serving import make_server
    from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                               create_backend_app)
    ctx = None
    probe = None
    scheme = "http"
    if args.tls:
        make_tls(args.tls, tuple(args.san))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(args.tls, "server.pem"), os.path.join(args.tls, "server.key"))
        if args.mutual:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(os.path.join(args.tls, "ca.pem"))
        probe = ssl.create_default_context(cafile=os.path.join(args.tls, "ca.pem"))
        probe.load_cert_chain(os.path.join(args.tls, "client.pem"), os.path.join(args.tls, "client.key"))
        scheme = "https"
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server(args.host, args.port, app, threaded=True,
                         request_handler=MotoRequestHandler, ssl_context=ctx)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"{scheme}://{args.host}:{args.port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=2, context=probe).read()
            break
        except Exception:  # not up yet
            if time.monotonic() > deadline:
                print("moto did not answer within 30 s", file=sys.stderr)
                return 1
            time.sleep(0.1)
    ready_until_signal()
    server.shutdown()
    return 0


DENY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId</Code>'
        b'<Message>The AWS Access Key Id you provided does not exist in our records.</Message>'
        b'<AWSAccessKeyId>edgerec-test</AWSAccessKeyId><RequestId>0</RequestId></Error>')
GARBAGE = b"<html><body><h1>Welcome</h1><p>Log in to use this network.</p></body></html>"
def ready_until_signal() -> None:
    """Prints `ready`, then returns on SIGTERM or SIGINT."""
    print("ready", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.1)


SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message></Error>')


def cmd_proxy(args: argparse.Namespace) -> int:
    import http.client
    import http.server
    import socket
    import struct
    import threading
    import urllib.parse

    up = urllib.parse.urlparse(args.upstream)
    lock = threading.Lock()
    state = {"parts_ok": 0, "slowdowns": 0, "reset": False, "down": False}
    conns = set()
    log = open(args.log, "a", buffering=1)

    def note(method, part, status):
        with lock:
            log.write(json.dumps({"method": method, "part": part, "status": status}) + "\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def setup(self):
            super().setup()
            with lock:
                conns.add(self.connection)

        def finish(self):
            with lock:
                conns.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def any(self):
            length = int(self.headers.get("Content-Length") or 0)
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query,
                                          keep_blank_values=True)
            part = query.get("partNumber", [None])[0]
            part = int(part) if part else None
            fault = None
            with lock:
                if part is not None and self.command == "PUT":
                    if args.fault == "reset" and part == 2 and not state["reset"]:
                        state["reset"] = True
                        fault = "reset"
                    elif args.fault == "slowdown" and state["slowdowns"] < 2:
                        state["slowdowns"] += 1
                        fault = "slowdown"
            if fault == "reset":
                self.rfile.read(length // 2)
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.close_connection = True
                note(self.command, part, "reset")
                self.connection.close()
                return
            body = self.rfile.read(length) if length else None
            canned = None
            if args.fault == "deny":
                canned = (403, "Forbidden", "application/xml", DENY)
            elif args.fault == "garbage" and self.command == "POST" and "uploads" in query:
                canned = (200, "OK", "text/html", GARBAGE)
            if canned:
                status, reason, kind, payload = canned
                self.send_response(status, reason)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                note(self.command, part, status)
                return
            if fault == "slowdown":
                self.send_response(503, "Slow Down")
                self.send_header("Retry-After", "1")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                self.end_headers()
                self.wfile.write(SLOWDOWN)
                note(self.command, part, 503)
                return
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            with lock:
                cut = state["down"]
            if cut:
                # The server went down while this was in flight.
                note(self.command, part, "cut")
                self.close_connection = True
                return
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length",
                                     "date", "server"):
                    self.send_header(k, v)
            length = resp.getheader("Content-Length") if self.command == "HEAD" else len(data)
            self.send_header("Content-Length", str(length or 0))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            note(self.command, part, resp.status)
            go_down = False
            with lock:
                if part is not None and resp.status == 200:
                    state["parts_ok"] += 1
                    if (args.fault == "down" and state["parts_ok"] == 2
                            and not state["down"]):
                        state["down"] = True
                        go_down = True
            if go_down:
                threading.Thread(target=outage, daemon=True).start()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = any

    servers = []

    def serve():
        s = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
        s.daemon_threads = True
        servers.append(s)
        threading.Thread(target=s.serve_forever, daemon=True).start()

    def outage():
        s = servers[-1]
        s.shutdown()
        s.server_close()
        with lock:
            open_now = list(conns)
        for c in open_now:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        note("-", None, f"down {args.down_seconds:g} s")
        time.sleep(args.down_seconds)
        with lock:
            state["down"] = False
        serve()
        note("-", None, "up")

    serve()
    ready_until_signal()
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
                        "meta_sha256": got.get("Metadata", {}).get("sha256"),
                        "etag": got["ETag"].strip('"'),
                        "sse": got.get("ServerSideEncryption")}
    print(json.dumps(out, sort_keys=True))
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    body = client(args.endpoint).get_object(Bucket=args.bucket, Key=args.key)["Body"].read()
    sys.stdout.buffer.write(body)
    return 0


def cmd_put(args: argparse.Namespace) -> int:
    with open(args.file, "rb") as f:
        client(args.endpoint).put_object(Bucket=args.bucket, Key=args.key, Body=f.read(),
                                         Metadata={"sha256": args.sha256})
    return 0


def main(argv=None) -> int:
    top = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="moto's S3 server on 127.0.0.1:PORT (or HOST:PORT)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (a test's network namespace)")
    p.add_argument("--tls", metavar="DIR", help="serve HTTPS; the CA and certificates go in DIR")
    p.add_argument("--mutual", action="store_true", help="with --tls: require the client certificate")
    p.add_argument("--san", action="append", default=[], metavar="IP",
                   help="with --tls: another IP address the server certificate is valid for "
                        "(10.0.2.2: this host as a QEMU guest's user-mode network sees it)")
    p.set_defaults(func=cmd_serve)
    p = sub.add_parser("proxy", help="a fault-injecting HTTP proxy in front of a server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:9000")
    p.add_argument("--fault", choices=["reset", "slowdown", "down", "deny", "garbage", "none"],
                   required=True)
    p.add_argument("--down-seconds", type=float, default=30.0)
    p.add_argument("--log", required=True, help="one JSON line per request")
    p.set_defaults(func=cmd_proxy)
    for name, func in (("mkbucket", cmd_mkbucket), ("verify", cmd_verify), ("get", cmd_get),
                       ("put", cmd_put)):
        c = sub.add_parser(name)
        c.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:9000")
        c.add_argument("--bucket", required=True)
        if name == "verify":
            c.add_argument("--prefix", default="")
            c.add_argument("--dir", required=True, help="the local files, by name")
        if name in ("get", "put"):
            c.add_argument("--key", required=True)
        if name == "put":
            c.add_argument("--file", required=True)
            c.add_argument("--sha256", required=True)
        c.set_defaults(func=func)
    args = top.parse_args(argv)
    try:
        return args.func(args)
    except Exception as e:  # boto3/moto errors: say which, exit 1
        print(f"s3peer {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
