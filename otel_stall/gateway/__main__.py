"""``python -m otel_stall.gateway``: the same as ``otel-stall serve``."""

from __future__ import annotations

import sys

from otel_stall.gateway.server import serve_main

if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:]))
