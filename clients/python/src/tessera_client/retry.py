"""When and how long to retry a failed call.

A call is retried when the server asked for it (RESOURCE_EXHAUSTED with the
grpc-retry-pushback-ms trailer: nothing was done, come back after that long;
gRFC A6) or when the server could not be reached (UNAVAILABLE) and repeating
the call cannot do its work twice (a read, or a submit with a request id).
"""

import dataclasses
import random
from typing import Optional

import grpc

from .errors import TesseraError


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff (jittered) or the server's pushback.

    max_attempts counts the first try: 1 disables retries.
    """

    max_attempts: int = 5
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 10.0
    multiplier: float = 2.0
    # A pushback longer than this is not waited for: the error is raised.
    max_pushback_s: float = 60.0

    def delay_s(self, error: TesseraError, attempt: int, idempotent: bool) -> Optional[float]:
        """Seconds to wait before attempt `attempt + 1`, or None to give up.

        `attempt` is the number of attempts made so far (1 after the first).
        """
        if attempt >= self.max_attempts:
            return None
        if error.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            # Without the trailer RESOURCE_EXHAUSTED means "too large": final.
            if error.retry_after_ms is None or error.retry_after_ms / 1000.0 > self.max_pushback_s:
                return None
            return error.retry_after_ms / 1000.0
        if error.code == grpc.StatusCode.UNAVAILABLE and idempotent:
            return self.backoff_s(attempt)
        return None

    def backoff_s(self, attempt: int) -> float:
        """Full-jitter exponential backoff after `attempt` failures."""
        ceiling = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** max(0, attempt - 1))
        return random.uniform(0.5 * ceiling, ceiling)


NO_RETRY = RetryPolicy(max_attempts=1)
