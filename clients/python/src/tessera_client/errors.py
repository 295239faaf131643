"""Errors: every failed call raises TesseraError carrying the gRPC status."""

from typing import Optional, Sequence, Tuple

import grpc

PUSHBACK_KEY = "grpc-retry-pushback-ms"


class TesseraError(grpc.RpcError):
    """A call the server (or the channel) refused.

    Attributes:
      code: the grpc.StatusCode (e.g. grpc.StatusCode.NOT_FOUND).
      details: the server's message, which names the field and the reason.
      retry_after_ms: the server's grpc-retry-pushback-ms trailer (a full
        queue says when to come back), or None.
      trailing_metadata: every trailer, as (key, value) pairs.

    It subclasses grpc.RpcError so code that already catches that keeps working.
    """

    def __init__(self, code: grpc.StatusCode, details: str, retry_after_ms: Optional[int] = None,
                 trailing_metadata: Sequence[Tuple[str, str]] = ()):
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.retry_after_ms = retry_after_ms
        self.trailing_metadata = tuple(trailing_metadata)

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.details}"
        if self.retry_after_ms is not None:
            text += f" (retry after {self.retry_after_ms} ms)"
        return text


class JobFailedError(TesseraError):
    """A job ended FAILED or CANCELLED (Client.wait). `job` is its final JobInfo."""

    def __init__(self, code: grpc.StatusCode, details: str, job):
        super().__init__(code, details)
        self.job = job


def pushback_ms(trailing_metadata) -> Optional[int]:
    """The grpc-retry-pushback-ms trailer as an int, or None (absent or malformed)."""
    for key, value in trailing_metadata or ():
        if key == PUSHBACK_KEY:
            try:
                ms = int(value)
            except (TypeError, ValueError):
                return None
            return ms if ms >= 0 else None
    return None


def from_rpc_error(error: grpc.RpcError) -> TesseraError:
    """Converts what grpcio raises (a grpc.Call) into a TesseraError."""
    if isinstance(error, TesseraError):
        return error
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or "(no message)"
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    trailers = tuple(trailers or ())
    return TesseraError(code, details, pushback_ms(trailers), trailers)


def code_from_int(value: int) -> grpc.StatusCode:
    """google.rpc.Code number -> grpc.StatusCode (UNKNOWN for numbers it does not know)."""
    for code in grpc.StatusCode:
        if code.value[0] == value:
            return code
    return grpc.StatusCode.UNKNOWN
