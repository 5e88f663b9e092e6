#!/usr/bin/env python3
"""An OTLP/HTTP metrics receiver built from the opentelemetry-proto package
(PyPI): the reader schedlat did not write, for its OTLP push (tests/otlp.rs).

    otlp_receiver.py --port PORT --out FILE [--mode accept|refuse|hang|partial]
                     [--tls-cert CERT --tls-key KEY [--tls-client-ca CA]]

POST /v1/metrics with an ExportMetricsServiceRequest (protobuf) body:
- accept: decompressed if gzip (Content-Encoding, said in the line's
  content_encoding), decoded with opentelemetry-proto's classes, appended to FILE as one
  JSON line per request (resource attributes; per metric its name, unit and
  data points: temporality, scale, zero count, positive offset and bucket
  counts, count, sum, min/max, attributes, times), answered 200 with an
  ExportMetricsServiceResponse;
- refuse: answered 503 with Retry-After: 1 (a collector shedding load);
- hang: the request is read and never answered (a stuck collector);
- partial: answered 200 with a partial success whose message is hostile
  (terminal escapes, newlines that forge log lines, 20 KB), as a
  broken or malicious collector may send at every push.
Every request, in any mode, is also counted in FILE.count (its size in
FILE.bytes) and its arrival time (Unix seconds) appended to FILE.times, so
a test can see retries, their bound and the backoff between them. With
--tls-cert and --tls-key it speaks HTTPS (a handshake that fails is no
request); with --tls-client-ca also, it asks every client for a
certificate that CA signed (mutual TLS).
"""

import argparse
import gzip
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

TEMPORALITY = {
    metrics_pb2.AGGREGATION_TEMPORALITY_UNSPECIFIED: "unspecified",
    metrics_pb2.AGGREGATION_TEMPORALITY_DELTA: "delta",
    metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE: "cumulative",
}


def attributes(kvs):
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


def buckets(b):
    return {"offset": b.offset, "bucket_counts": list(b.bucket_counts)}


def point(p, kind):
    common = {
        "attributes": attributes(p.attributes),
        "start_time_unix_nano": p.start_time_unix_nano,
        "time_unix_nano": p.time_unix_nano,
    }
    if kind == "exponential_histogram":
        common.update(
            count=p.count,
            sum=p.sum if p.HasField("sum") else None,
            scale=p.scale,
            zero_count=p.zero_count,
            zero_threshold=p.zero_threshold,
            positive=buckets(p.positive),
            negative=buckets(p.negative),
            min=p.min if p.HasField("min") else None,
            max=p.max if p.HasField("max") else None,
            exemplars=[
                {"value": e.as_double, "attributes": attributes(e.filtered_attributes)}
                for e in p.exemplars
            ],
        )
    elif kind == "histogram":
        common.update(
            count=p.count,
            sum=p.sum if p.HasField("sum") else None,
            bucket_counts=list(p.bucket_counts),
            explicit_bounds=list(p.explicit_bounds),
        )
    else:  # sum, gauge
        which = p.WhichOneof("value")
        common["value"] = getattr(p, which) if which else None
    return common


def metric(m):
    kind = m.WhichOneof("data")
    data = getattr(m, kind)
    out = {"name": m.name, "unit": m.unit, "description": m.description, "kind": kind}
    if hasattr(data, "aggregation_temporality"):
        out["temporality"] = TEMPORALITY.get(data.aggregation_temporality, "unknown")
    if kind == "sum":
        out["monotonic"] = data.is_monotonic
    out["points"] = [point(p, kind) for p in data.data_points]
    return out


def decode(body):
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    request.ParseFromString(body)
    return {
        "received_unix": time.time(),
        "resources": [
            {
                "attributes": attributes(rm.resource.attributes),
                "scopes": [
                    {
                        "name": sm.scope.name,
                        "version": sm.scope.version,
                        "metrics": [metric(m) for m in sm.metrics],
                    }
                    for sm in rm.scope_metrics
                ],
            }
            for rm in request.resource_metrics
        ],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=["accept", "refuse", "hang", "partial"], default="accept")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--tls-client-ca")
    args = parser.parse_args()
    lock = threading.Lock()
    counted = {"requests": 0, "bytes": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                counted["requests"] += 1
                counted["bytes"] += len(body)
                with open(args.out + ".count", "w") as f:
                    f.write(str(counted["requests"]))
                with open(args.out + ".bytes", "w") as f:
                    f.write(str(counted["bytes"]))
                with open(args.out + ".times", "a") as f:
                    f.write(f"{time.time():.6f}\n")
            if self.path.split("?")[0] != "/v1/metrics":
                self.send_error(404)
                return
            if args.mode == "hang":
                time.sleep(3600)
                return
            if args.mode == "refuse":
                self.send_response(503)
                self.send_header("Retry-After", "1")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_error(415, "want application/x-protobuf")
                return
            encoding = self.headers.get("Content-Encoding", "identity")
            if encoding == "gzip":
                body = gzip.decompress(body)
            decoded = decode(body)
            decoded["content_encoding"] = encoding
            with lock, open(args.out, "a") as f:
                f.write(json.dumps(decoded) + "\n")
            response = metrics_service_pb2.ExportMetricsServiceResponse()
            if args.mode == "partial":
                response.partial_success.rejected_data_points = 7
                response.partial_success.error_message = (
                    "bad\n\x1b[2J\x1b[8mschedlat: FAKE LINE\r\n" * 3 + "x" * 20_000
                )
            reply = response.SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            # Mutual TLS: a client without a certificate this CA signed
            # fails the handshake and never gets to send a request.
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.tls_client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("listening", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
