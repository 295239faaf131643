#!/bin/bash
# Installs the built tessera-client wheel into a fresh venv, offline (pip
# --no-index --no-deps; grpcio, protobuf and tqdm come from Debian's packages
# through --system-site-packages), then runs client_e2e_test.py with that
# venv's python, isolated (-I) so only the installed package is importable.
set -euo pipefail
runfiles="${TEST_SRCDIR}/tessera"
venv="${TEST_TMPDIR}/venv"
/usr/bin/python3 -m venv --system-site-packages "${venv}"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
  "${venv}/bin/pip" install --quiet --no-index --no-deps "${runfiles}/clients/python/tessera_client-0.1.0-py3-none-any.whl"
export TESSERA_BIN="${runfiles}/cli/tessera"
export TESSERA_EXAMPLES="${runfiles}/clients/python/examples"
export TESSERA_CLIENT_VENV="${venv}"
cd "${TEST_TMPDIR}"
exec "${venv}/bin/python" -I "${runfiles}/clients/python/tests/client_e2e_test.py"
