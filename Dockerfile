# rspstar: RSP-QL* engine. Build: docker build -t rspstar .   Run: docker run -p 8000:8000 rspstar
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    SPARK_LOCAL_IP=127.0.0.1 \
    PYTHONUNBUFFERED=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY translator ./translator
COPY store ./store
COPY endpoint ./endpoint
COPY config ./config
RUN pip install --no-cache-dir '.[spark]'

RUN useradd --create-home rspstar && mkdir -p /data && chown rspstar /data
USER rspstar
VOLUME ["/data"]
EXPOSE 8000

ENTRYPOINT ["rspstar"]
CMD ["serve", "--config", "config/default.toml", "--host", "0.0.0.0", "--port", "8000", "--data", "/data"]
