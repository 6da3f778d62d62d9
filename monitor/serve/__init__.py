"""Out to people and machines: the HTTP server and Burrow's v3 API (``http``) and the
Prometheus metrics (``metrics``), both from cached results; no request talks to Kafka."""
