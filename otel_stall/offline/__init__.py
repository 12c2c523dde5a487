"""After the fact: spans that have already ended, read from files or from the wire.

Readers for the stored formats, the whole-trace analysis (shared with the
gateway), the replay with its reports, and re-export. Nothing here imports
:mod:`otel_stall.live`.
"""
