"""``python -m otel_stall``: the same as the ``otel-stall`` command."""

from __future__ import annotations

from otel_stall._entry import main

raise SystemExit(main())
