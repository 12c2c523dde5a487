"""In-process detection: a span processor inside the application's tracer provider.

Spans are read as they end, ``stall.*`` attributes go on the copies handed
downstream, and findings become events, metrics and the live gate's answers.
Nothing here imports :mod:`otel_stall.offline`.
"""
