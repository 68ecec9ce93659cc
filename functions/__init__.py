"""Lambda handlers. Each `functions/<name>/handler.py` exposes `handler(event, context)` and
imports only `evidence` (the layer), so it runs as `handler.handler` from its own folder or
as `functions.<name>.handler.handler` from the repository root."""
