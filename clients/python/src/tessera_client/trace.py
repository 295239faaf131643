"""W3C trace context (traceparent) for joining a caller's trace.

The server takes `traceparent` from a call's metadata (or starts a trace);
a job keeps the submitting call's trace id (JobInfo.trace_id), and its log
lines, events and audit records carry it.
"""

import re
import secrets

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def new_traceparent(sampled: bool = True) -> str:
    """A fresh traceparent: a random trace id and span id (version 00)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-{'01' if sampled else '00'}"


def check_traceparent(value: str) -> str:
    """Returns `value` if it is a valid version-00 traceparent, else raises ValueError."""
    match = _TRACEPARENT.match(value or "")
    if not match or match.group(1) == "0" * 32 or match.group(2) == "0" * 16:
        raise ValueError(f"traceparent: {value!r} is not '00-<32 hex trace id>-<16 hex span id>-<2 hex flags>' "
                         "with nonzero ids (W3C Trace Context)")
    return value


def trace_id_of(traceparent: str) -> str:
    """The 32-hex trace id of a traceparent."""
    return check_traceparent(traceparent).split("-")[1]
