"""A long record in the dense leg (issue 23 item 4), with the real MiniLM model on the embedded store.

A record longer than the model's 256 word pieces whose answer lies only past them: with
`EVIDENCE_EMBED_LONG_TEXT=mean` every window is read and the record is the dense leg's first hit;
with `first` (the model's own truncation) it is not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence.config import LongTextRule, Settings
from evidence.embed.minilm import MiniLMEmbedder
from evidence.embed.tokenizer import get_tokenizer
from evidence.embed.windows import split_windows
from evidence.rank.first_stage import FirstStage, RetrievalMode
from evidence.service import EvidenceService

RAILWAY = (
    "The first public railway to use steam locomotives opened in 1825 between Stockton and Darlington. "
    "Engineers laid wrought iron rails on stone sleepers and argued about the gauge for decades. "
    "Railway companies raised capital by selling shares, and speculation in the 1840s led to a mania "
    "and a crash. Timetables forced towns to adopt a standard time, and telegraph lines were strung "
    "beside the tracks. "
)
OTTERS = (
    "Sea otters float on their backs in kelp forests and use stones as tools. An otter rests a flat "
    "rock on its chest and pounds clams, mussels and sea urchins against it until the shell cracks "
    "open. Young otters learn the habit from their mothers, and each animal keeps a favourite stone "
    "in a skin pouch under its forearm. "
)
OTHERS = {
    "bread": "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the starter.",
    "tax": "Income tax brackets are progressive: each slice of income is taxed at its bracket's rate.",
    "volcano": "Volcanic eruptions eject ash and lava when magma pressure exceeds the crust's strength.",
    "beaver": "Beavers cut down trees with their teeth and build dams of branches and mud across streams.",
    "chess": "The Sicilian Defence is the most popular reply to the king's pawn opening in chess.",
}
QUESTION = "Which animal cracks shellfish open with a rock while floating on its back?"


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    long_text = RAILWAY * 4 + OTTERS * 3
    pieces = get_tokenizer().encode(long_text, add_special_tokens=False).ids
    first_window = get_tokenizer().decode(pieces[:254])
    # The answer is only past the first window the model reads.
    assert len(pieces) > 254 and "otter" not in first_window.lower()
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    rows = [{"_id": "long", "title": "", "text": long_text}]
    rows += [{"_id": key, "title": "", "text": text} for key, text in OTHERS.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _dense_ranking(tmp_path: Path, records: Path, rule: LongTextRule) -> list[str]:
    settings = Settings(store_dir=tmp_path / rule.value, embed_long_text=rule)
    service = EvidenceService(settings, embedder=MiniLMEmbedder(long_text=rule))
    try:
        report = service.index_paths("records", [records])
        assert not report.failed
        vector = service.query_vector("records", QUESTION)
        hits = FirstStage(mode=RetrievalMode.DENSE).retrieve(
            service.backend, "records", query=QUESTION, vector=vector, k=10
        )
        return [c.chunk.document_id for c in hits.candidates]
    finally:
        service.close()


def test_a_long_records_answer_in_its_last_window_is_found_by_the_dense_leg(
    tmp_path: Path, records: Path
) -> None:
    assert _dense_ranking(tmp_path, records, LongTextRule.MEAN)[0] == "long"


def test_truncation_to_the_first_window_misses_it(tmp_path: Path, records: Path) -> None:
    # What the store held before windows, and still does with EVIDENCE_EMBED_LONG_TEXT=first.
    assert _dense_ranking(tmp_path, records, LongTextRule.FIRST)[0] != "long"


def test_the_model_reads_every_word_piece_of_a_long_text_once_and_a_query_at_its_width() -> None:
    emb = MiniLMEmbedder(long_text=LongTextRule.MEAN)
    text = RAILWAY * 4 + OTTERS * 3
    n = len(get_tokenizer().encode(text, add_special_tokens=False).ids)
    inputs, owners = emb.windows([text, "short"])
    assert [len(x) - 2 for x in inputs[:-1]] == [b - a for a, b in split_windows(n, 254, 0)]
    assert all(len(x) <= 256 for x in inputs) and owners == [0] * (len(inputs) - 1) + [1]
    assert len(emb.windows([text], first_only=True)[0]) == 1
    # A query padded (as documents are batched) or not gives the same vector.
    padded = emb.embed_ids(emb.windows([QUESTION], first_only=True)[0], pad_to=32)[0]
    assert float(emb.embed_query(QUESTION) @ padded) > 0.9999


def test_an_input_has_the_same_vector_alone_or_batched_with_longer_ones() -> None:
    # One width per batch changes which inputs share a forward pass, not what a vector is: the
    # mask keeps padding out of every input's tokens.
    emb = MiniLMEmbedder()
    inputs, _ = emb.windows([RAILWAY * 4, OTTERS, QUESTION])
    together = emb.embed_ids(inputs)
    alone = [emb.embed_ids([x])[0] for x in inputs]
    for row, single in zip(together, alone, strict=True):
        assert float(row @ single) > 0.99999
