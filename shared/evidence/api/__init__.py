"""The edges: the HTTP API (API Gateway REST resolver), its error mapping and OpenAPI document,
the S3-notification indexer, and the cached objects handlers share."""
