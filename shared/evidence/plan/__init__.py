"""Query planning: rules first, an optional LLM (Bedrock), always a safe fallback."""
