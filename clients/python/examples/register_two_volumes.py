#!/usr/bin/env python3
"""Registers a moving volume onto a fixed one on a Tessera server, then
downloads the results and a preview.

    python3 register_two_volumes.py --server localhost:50051 --token-file my.token \\
        --fixed fixed.nii.gz --moving moving_dicom_dir/ --out-dir results

Volumes are local NIfTI files, DICOM files, zipped DICOM series or DICOM
series directories (uploaded first). Prints one JSON line: the job id, its
final loss and the files written.
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
    parser.add_argument("--fixed", required=True, help="fixed volume: NIfTI, DICOM file, .zip or series directory")
    parser.add_argument("--moving", required=True, help="moving volume (same kinds)")
    parser.add_argument("--stages", default="rigid,affine,deformable", help="comma list of rigid, affine, deformable")
    parser.add_argument("--scales", default="4,2,1", help="downsampling factors, coarse to fine")
    parser.add_argument("--iterations", type=int, default=0, help="iterations per scale for every stage (0: defaults)")
    parser.add_argument("--metric", default="", help="lncc (default), mse or mi")
    parser.add_argument("--out-dir", default="registration-out", help="where results and preview.png go")
    parser.add_argument("--progress", action="store_true", help="progress bars (tqdm)")
    args = parser.parse_args()

    options = dict(stages=args.stages.split(","), scales=[int(s) for s in args.scales.split(",")], metric=args.metric)
    if args.iterations:
        options.update(rigid_iterations=[args.iterations], affine_iterations=[args.iterations],
                       deformable_iterations=[args.iterations])
    try:
        with tessera_client.Client(args.server, token_file=args.token_file, tls_ca=args.tls_ca) as client:
            job = client.register(args.fixed, args.moving, progress=args.progress, **options)
            print(f"job {job.job_id} queued (trace {job.trace_id or '-'})", file=sys.stderr)
            client.wait(job.job_id, progress=args.progress)
            result = client.result(job.job_id)
            files = client.download(job.job_id, out_dir=args.out_dir, progress=args.progress)
            preview = os.path.join(args.out_dir, "preview.png")
            with open(preview, "wb") as f:
                f.write(client.preview(job.job_id))
    except tessera_client.TesseraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"job_id": job.job_id, "final_loss": result.final_loss, "backend": result.backend,
                      "files": files, "preview": preview}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
