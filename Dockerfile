# One image for every Antler component; the command picks which (`antler run runner`, ...).
# compose.yaml builds it once and starts each component from it.
FROM python:3.11-slim-bookworm

# bubblewrap isolates the sandbox's commands (the sandbox service needs it; the others ignore it).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap=0.8.* \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY antler/ antler/
COPY bus/ bus/
COPY config/ config/
COPY llm/ llm/
COPY agents/ agents/
COPY channels/ channels/
COPY sandbox/ sandbox/
COPY memory/ memory/
COPY gateway/ gateway/
COPY skills/ skills/
RUN pip install --no-cache-dir .

# config.yaml is mounted here; each component's NATS user comes from its environment.
ENV ANTLER_CONFIG_PATH=/etc/antler/config.yaml \
    PYTHONUNBUFFERED=1
WORKDIR /var/lib/antler
ENTRYPOINT ["antler"]
CMD ["up"]
