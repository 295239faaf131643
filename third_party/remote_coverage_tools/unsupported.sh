#!/bin/sh
echo "coverage is not supported in the offline Tessera build" >&2
exit 1
