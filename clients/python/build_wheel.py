#!/usr/bin/python3
"""Builds the tessera-client wheel offline: generates the protobuf/gRPC stubs
from protos/ into tessera_client/_proto/ (they are never committed) and runs
the setuptools backend without build isolation, so only Debian's packages are
used (python3-build, python3-setuptools, python3-wheel; protoc from
protobuf-compiler, grpc_python_plugin from protobuf-compiler-grpc).

    build_wheel.py --proto-root protos --out DIR_OR_WHEEL PROTO...

Generated modules import each other as `tessera.v1.x_pb2`; those imports are
rewritten to `tessera_client._proto.tessera.v1.x_pb2` so the wheel claims no
top-level `tessera` package (which would clash with anything else so named).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOC = "/usr/bin/protoc"
GRPC_PLUGIN = "/usr/bin/grpc_python_plugin"
_IMPORT = re.compile(r"^from tessera\.v1 import ", re.MULTILINE)


def generate_stubs(proto_root, protos, package_dir):
    """protoc --python_out --grpc_python_out into package_dir/_proto."""
    out = os.path.join(package_dir, "_proto")
    os.makedirs(out, exist_ok=True)
    rel = [os.path.relpath(p, proto_root) for p in protos]
    subprocess.run(
        [PROTOC, f"--proto_path={proto_root}", f"--python_out={out}", f"--grpc_python_out={out}",
         f"--plugin=protoc-gen-grpc_python={GRPC_PLUGIN}", *rel],
        check=True)
    for dirpath, _, files in os.walk(out):
        init = os.path.join(dirpath, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                text = f.read()
            fixed = _IMPORT.sub("from tessera_client._proto.tessera.v1 import ", text)
            if fixed != text:
                with open(path, "w") as f:
                    f.write(fixed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proto-root", required=True, help="directory the .proto imports are relative to")
    parser.add_argument("--out", required=True, help="the wheel file to write (its name must be the wheel's)")
    parser.add_argument("protos", nargs="+")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tessera-wheel-") as work:
        tree = os.path.join(work, "python")
        shutil.copytree(HERE, tree, ignore=shutil.ignore_patterns(
            "tests", "examples", "build", "dist", "*.egg-info", "__pycache__", "BUILD"))
        generate_stubs(os.path.abspath(args.proto_root), [os.path.abspath(p) for p in args.protos],
                       os.path.join(tree, "src", "tessera_client"))
        dist = os.path.join(work, "dist")
        env = dict(os.environ, HOME=work, PYTHONDONTWRITEBYTECODE="1", SOURCE_DATE_EPOCH="315532800")
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, tree],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        wheels = [w for w in os.listdir(dist) if w.endswith(".whl")]
        if len(wheels) != 1:
            sys.exit(f"expected one wheel in {dist}, found {wheels}")
        if os.path.basename(args.out) != wheels[0]:
            sys.exit(f"built {wheels[0]} but --out names {os.path.basename(args.out)}: "
                     "keep BUILD's wheel name and pyproject.toml's version in step")
        shutil.copyfile(os.path.join(dist, wheels[0]), args.out)


if __name__ == "__main__":
    main()
