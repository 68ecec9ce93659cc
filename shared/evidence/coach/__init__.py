"""The coach profile (seed 004): graph-aware retrieval of the minimal, cited context a tutoring LLM
teaches from, and the answer-or-clarify contract around it."""
