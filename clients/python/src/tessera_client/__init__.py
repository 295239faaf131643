"""tessera-client: the Python client of Tessera's services.

    import tessera_client
    with tessera_client.Client("localhost:50051", token_file="my.token") as client:
        job = client.register("fixed.nii.gz", "moving.nii.gz", stages=["rigid", "affine"])
        client.wait(job.job_id, progress=True)
        print(client.result(job.job_id).final_loss)

Errors are TesseraError (a grpc.RpcError) with .code, .details and
.retry_after_ms; see README.md for the whole API.
"""

from . import pb
from .client import TERMINAL_STATES, Client, ServerPath
from .errors import JobFailedError, TesseraError
from .fingerprints import fingerprint_image, fingerprint_template
from .retry import NO_RETRY, RetryPolicy
from .trace import new_traceparent, trace_id_of

__version__ = "0.1.0"

__all__ = [
    "Client", "JobFailedError", "NO_RETRY", "RetryPolicy", "ServerPath", "TERMINAL_STATES", "TesseraError",
    "fingerprint_image", "fingerprint_template", "new_traceparent", "pb", "trace_id_of",
]
