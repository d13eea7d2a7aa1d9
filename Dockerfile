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

# The sandbox's toolbox (sandbox.toolbox.python_packages: pandas, matplotlib, python-pptx ...), a venv
# on the image's own python3, which is what bwrap shows a sandboxed command; every container built
# from this image finds it through ANTLER_TOOLBOX_PATH (only the sandbox service uses it).
ENV ANTLER_TOOLBOX_PATH=/opt/antler/toolbox
RUN antler sandbox install

# config.yaml is mounted here; each component's NATS user comes from its environment.
ENV ANTLER_CONFIG_PATH=/etc/antler/config.yaml \
    PYTHONUNBUFFERED=1
WORKDIR /var/lib/antler
ENTRYPOINT ["antler"]
CMD ["up"]
