#!/usr/bin/env python3
"""Reconstructs a CT sinogram on a Tessera server (FBP/FDK or an iterative
method), then downloads the volume and a preview.

    tessera phantom geometry --type=parallel --size=64 --out=geometry.json
    tessera phantom ct --geometry=geometry.json --sinogram-out=sinogram.nii.gz
    python3 ct_reconstruction.py --server localhost:50051 --geometry geometry.json \\
        --sinogram sinogram.nii.gz --method fbp --out-dir recon

Prints one JSON line: the job id, the method, the volume's size and the files written.
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
    parser.add_argument("--geometry", required=True, help="ASTRA geometry JSON")
    parser.add_argument("--sinogram", required=True, help="sinogram NIfTI (line integrals)")
    parser.add_argument("--method", default="", help="fbp, fdk, sart, os-sart or cgls (default: by geometry)")
    parser.add_argument("--iterations", type=int, default=0, help="iterative methods (0: the default)")
    parser.add_argument("--out-dir", default="recon-out", help="where the volume and preview.png go")
    parser.add_argument("--progress", action="store_true", help="progress bars (tqdm)")
    args = parser.parse_args()

    try:
        with tessera_client.Client(args.server, token_file=args.token_file, tls_ca=args.tls_ca) as client:
            job = client.reconstruct_ct(args.geometry, args.sinogram, method=args.method,
                                        iterations=args.iterations, progress=args.progress)
            client.wait(job.job_id, progress=args.progress)
            result = client.result(job.job_id)
            files = client.download(job.job_id, out_dir=args.out_dir, progress=args.progress)
            preview = os.path.join(args.out_dir, "preview.png")
            with open(preview, "wb") as f:
                f.write(client.preview(job.job_id))
    except tessera_client.TesseraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"job_id": job.job_id, "method": result.method, "dims": list(result.dims),
                      "seconds": result.seconds, "files": files, "preview": preview}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
