FROM python:3.12-slim
WORKDIR /srv/moescope
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY . .
# Editable, so the dashboard finds static/ beside the packages; the service needs the
# server extra only (the runner's torch stays on the GPU nodes).
RUN pip install --no-cache-dir -e '.[server]'
EXPOSE 8000
# `serve` migrates the database to head before it listens.
CMD ["moescope", "serve", "--host", "0.0.0.0", "--port", "8000"]
