"""Search backends behind one port: embedded (default) and OpenSearch."""
