"""Do MiniLM's contextual word vectors tell a synonym from a related-but-different word? A
generic check of `verbatim.grounding.context_words` (docs/verbatim.md#refusal-context): each case
is a question word read in a question and a word read in a statement, written from general
English (no bundled document, no development question); prints their contextual cosine and the
statement's three nearest words.

Usage: python bench/refusal_context_pairs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.embed.minilm import MiniLMEmbedder  # noqa: E402
from evidence.verbatim.grounding import PARAPHRASE_CONTEXT_COSINE, context_words  # noqa: E402

#: (question, its word, statement, the word it is compared with, a synonym?)
CASES = (
    (
        "What happens if I breach the licence?",
        "breach",
        "If you violate the terms, your rights terminate.",
        "violate",
        True,
    ),
    (
        "Can I employ several CPU cores for the build?",
        "employ",
        "Use the -j option to run several jobs at once.",
        "use",
        True,
    ),
    (
        "What occurs when the timer expires?",
        "occurs",
        "When the timer expires, the connection is closed; this happens once.",
        "happens",
        True,
    ),
    ("How do I acquire a licence key?", "acquire", "You can get a key from the vendor portal.", "get", True),
    (
        "Can I utilize the library commercially?",
        "utilize",
        "You may use the software for any purpose.",
        "use",
        True,
    ),
    (
        "When should I cease taking the tablets?",
        "cease",
        "Stop taking the tablets if a rash appears.",
        "stop",
        True,
    ),
    (
        "What is the lowest password length?",
        "lowest",
        "Passwords must be at least the minimum length of 8.",
        "minimum",
        True,
    ),
    (
        "Is a physician required for the refill?",
        "physician",
        "Ask your doctor before a refill.",
        "doctor",
        True,
    ),
    ("Does the library run on RISC-V?", "risc", "The library supports x86 and ARM platforms.", "arm", False),
    (
        "Is the drug approved for Alzheimer's disease?",
        "alzheimer",
        "The drug is approved for hypertension.",
        "hypertension",
        False,
    ),
    ("Can I query it with XPath?", "xpath", "Documents are stored as XML files.", "xml", False),
    (
        "What is the levorphanol conversion factor?",
        "levorphanol",
        "The morphine conversion factor is 1.",
        "morphine",
        False,
    ),
    (
        "Does it support an oral suspension?",
        "suspension",
        "Tablets are available in 25 mg and 50 mg.",
        "tablets",
        False,
    ),
    ("Can I catch a C++ exception?", "exception", "The function returns an error code.", "error", False),
    (
        "Does the contract include an indemnity?",
        "indemnity",
        "The contract includes a warranty for one year.",
        "warranty",
        False,
    ),
    ("Is there a banana in the car?", "banana", "The car is parked outside.", "car", False),
)


def main() -> int:
    tokens = MiniLMEmbedder().embed_tokens
    print(f"PARAPHRASE_CONTEXT_COSINE = {PARAPHRASE_CONTEXT_COSINE}")
    for question, asked, statement, other, synonym in CASES:
        mq, ms = tokens([question, statement])
        _, q = context_words(question, mq, lambda w, a=asked: w.lower().startswith(a))
        words, rows = context_words(statement, ms, lambda w: True)
        sims = (q @ rows.T)[0]
        pair = max(float(s) for s, w in zip(sims, words, strict=True) if w == other)
        near = ", ".join(f"{w} {s:.2f}" for s, w in sorted(zip(sims, words, strict=True), reverse=True)[:3])
        kind = "synonym" if synonym else "other"
        print(f"{asked:>12} / {other:<12} {kind:<8} {pair:.3f}   nearest: {near}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
