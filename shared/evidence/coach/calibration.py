"""Fitted coefficients of the coach's confidence models (written by bench/coach_calibrate.py).

Fitted on the sample graph's labelled queries (shared/evidence/demo/data/coach/queries.jsonl):
92 queries (48 in_scope, 21 ambiguous, 23 out_of_scope).
In-sample: can_answer P/R 0.9216/0.9792,
needs_clarification P/R 0.9444/0.8095.
5-fold CV: can_answer P/R 0.92/0.9583, needs_clarification P/R 0.85/0.8095.
"""

#: P(node is what the query is about) = sigmoid(w0 + w1 cos + w2 text coverage + w3 title coverage)
NODE_WEIGHTS = (-9.4984, 10.2699, 3.7024, 2.2096)
#: P(in the graph's domain) = sigmoid(w0 + w1 best cosine + w2 best coverage)
DOMAIN_WEIGHTS = (-5.6092, 6.4539, 6.2411)
#: confidence = sigmoid(w0 + w1 best cosine + w2 best coverage + w3 top LO relevance + w4 ambiguous)
CONFIDENCE_WEIGHTS = (-2.8274, 3.846, 0.6663, 2.805, -5.2707)
#: Split rule: a distinct LO's best sentence within this margin of the top LO's.
SENSE_GAP = 0.03
DOMAIN_THRESHOLD = 0.5
ANSWER_THRESHOLD = 0.5
