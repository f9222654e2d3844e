# rspstar: RSP-QL* engine. Build: docker build -t rspstar .   Run: docker run -p 8000:8000 rspstar
# Bookworm is pinned because it ships Java 17 (trixie has 21 only). JAVA_HOME is not set: the
# engine finds the installed Java itself, on any architecture.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless libjemalloc2 \
    && rm -rf /var/lib/apt/lists/* \
    && java -version

ENV SPARK_LOCAL_IP=127.0.0.1 \
    PYTHONUNBUFFERED=1

WORKDIR /app
COPY pyproject.toml README.md __init__.py ./
COPY config ./config
COPY translator ./translator
COPY store ./store
COPY endpoint ./endpoint
# The library and Spark ingestion (the extra), which `rspstar serve`'s configuration needs.
RUN pip install --no-cache-dir .[spark]

RUN useradd --create-home rspstar && mkdir -p /data && chown rspstar /data
USER rspstar
VOLUME ["/data"]
EXPOSE 8000

ENTRYPOINT ["rspstar"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--data", "/data"]
