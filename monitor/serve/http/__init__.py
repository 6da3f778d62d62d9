"""The aiohttp application (``app``: health, readiness, metrics), Burrow's v3 API
(``v3``, documented by ``openapi.yaml``) and the JSON envelope both use (``envelope``)."""
