# The otel-stall gateway image: `otel-stall serve` (and the rest of the CLI).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY otel_stall ./otel_stall
RUN pip install . && rm -rf /src

RUN useradd --system --uid 10001 otelstall
USER otelstall
WORKDIR /home/otelstall

# gRPC OTLP, HTTP OTLP, Prometheus /metrics
EXPOSE 4317 4318 9464
ENTRYPOINT ["otel-stall"]
CMD ["serve", "--listen-all"]
