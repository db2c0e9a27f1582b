# The product image. CPU wheels of torch keep it small; GPU hosts can drop the extra index.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    FLWR_TELEMETRY_ENABLED=0 \
    FLWR_DISABLE_UPDATE_CHECK=1 \
    FEDCORE_STORE=/data/runs

WORKDIR /app
# A C compiler for the engine's compiled training round (without one it trains with torch alone).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt

COPY fedcore ./fedcore
COPY application ./application
COPY data_adapters ./data_adapters
COPY dashboard ./dashboard
COPY views ./views
COPY app.py ./
COPY assets ./assets
COPY .streamlit ./.streamlit

# Runs and uploads live under /data/runs; datasets the dashboard may read are mounted read-only
# and listed in FEDCORE_DATA_DIRS (README, Security), e.g. -v /srv/fl:/data/sets:ro -e FEDCORE_DATA_DIRS=/data/sets.
VOLUME ["/data"]
EXPOSE 8501
# Not root: the dashboard needs to write only /data.
RUN useradd --create-home --uid 10001 fedcore && mkdir -p /data/runs && chown -R fedcore /data
USER fedcore
# The dashboard for other machines: the launcher refuses to listen on 0.0.0.0 unless sign-in is
# set up, i.e. a secrets file with [auth] and [roles] is mounted at /app/.streamlit/secrets.toml
# (never baked in: .dockerignore leaves it out). `docker run IMAGE python -m fedcore ...` gives
# the command line instead.
CMD ["python", "-m", "dashboard.serve", "--address", "0.0.0.0", "--port", "8501"]
