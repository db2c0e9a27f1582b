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
COPY data_adapters ./data_adapters
COPY dashboard ./dashboard
COPY views ./views
COPY app.py ./
COPY assets ./assets
COPY .streamlit ./.streamlit

VOLUME ["/data"]
EXPOSE 8501
# The dashboard; `docker run IMAGE python -m fedcore ...` gives the command line instead.
CMD ["streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501"]
