#!/usr/bin/env python3
"""Enrolls fingerprints into a gallery on a Tessera server and searches a probe.

    python3 fingerprint_search.py --server localhost:50051 --token-file my.token \\
        --enroll gallery/*.iso --probe probe.iso --top-k 5

Records and the probe are minutiae templates (.iso, .ansi, .xyt) or images
(.png, .tif, .bmp, .jpg, .wsq: the server extracts the minutiae); each
enrolled record's id is its file name without the extension. Prints one JSON
line: the candidates, best first.
"""

import argparse
import json
import os
import sys

import tessera_client


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="localhost:50051", help="host:port of tessera serve")
    parser.add_argument("--token-file", help="bearer token for a server with --token-file")
    parser.add_argument("--tls-ca", help="CA of the server's certificate (TLS)")
    parser.add_argument("--gallery", default="", help="gallery name (default: the server's 'default')")
    parser.add_argument("--enroll", nargs="*", default=[], help="templates or images to enroll (replacing)")
    parser.add_argument("--probe", required=True, help="the template or image to search")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--matcher", default="", help="lssr, dmc, fusion or cascade (default: the server's)")
    args = parser.parse_args()

    try:
        with tessera_client.Client(args.server, token_file=args.token_file, tls_ca=args.tls_ca) as client:
            for path in args.enroll:
                record_id = os.path.splitext(os.path.basename(path))[0]
                client.enroll(record_id, path, gallery=args.gallery, replace=True)
            response = client.search(args.probe, top_k=args.top_k, matcher=args.matcher, gallery=args.gallery)
    except tessera_client.TesseraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"enrolled": len(args.enroll), "gallery_size": response.timing.gallery_size,
                      "candidates": [{"id": c.id, "score": round(float(c.score), 4)} for c in response.candidates]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
