"""The evidence workbench: the page `evidence serve` serves at `/` (docs/workbench.md).

`page.py` answers the page's own GETs (static assets, strict headers); `documents.py` and
`evaluate.py` back the `/v1` routes the page needs beyond the retrieval API (a document's text,
evaluation of a QA or qrels set under one or two settings). The page itself is plain HTML, CSS
and JavaScript in `static/`: no build step, no CDN, nothing fetched from outside.
"""
