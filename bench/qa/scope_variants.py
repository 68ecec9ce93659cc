"""The verbatim scope's variants on the QA suite, each question compared, chosen leave-one-family-out.

Usage: python bench/qa/scope_variants.py [ROOT] --store DIR [--variants base,unscoped=5,...]
                                         [--profile verbatim] [--out FILE]

Measured for `recall_gaps.py`'s `scope` and `refused` classes (docs/verbatim.md, "Answers nowhere
in the evidence"). Each variant asks the whole suite with the `verbatim` profile, the code patched
for the run only:

- `base`: the code as it is;
- `unscoped=N`: `CascadeConfig.unscoped_documents` N (a question naming no document and no entity
  reads the documents of the first stage's best passages, at most N; 3 shipped);
- `no_named_scope`: the named-document scope (`verbatim.scope`) off in `verbatim`;
- `keep_named`: the question's words that name the scoped documents stay concepts (not dropped);
- `name_share=S`: `scope.NAME_TEXT_SHARE` S (a word names documents only when more than S of the
  passages holding it are theirs; 0.5 shipped);
- `whole_name`: a subject name's words are dropped from the question's concepts only when the
  question gives the whole name; one word of a longer title stays a concept.

Prints, per variant, the pooled and per-family figures (`qa_metrics`) and each question whose
outcome differs from the first variant's; then, for each family, the variant with the most answers
within 600 characters on the other families (ties: fewer false refusals, then the earlier
variant) measured on it, and those held-out figures pooled.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation.suite import collect_qa_outcomes, qa_metrics  # noqa: E402


def whole_names(question: str, names: list[str]) -> list[str]:
    """The names whose words are dropped from the question's concepts under `whole_name`: those
    the question gives whole, not a single word that is also part of a longer name it does not."""
    from evidence.plan.verbatim import content_words
    from evidence.verbatim.scoring import terms

    said = {t for w in content_words(question) for t in terms(w)}
    whole = [n for n in names if set(terms(n)) <= said]
    longer = [set(terms(n)) for n in names if len(terms(n)) > 1]
    partial = {t for n in names if not set(terms(n)) <= said for t in terms(n)}

    def part_only(n: str) -> bool:
        ts = terms(n)
        return len(ts) == 1 and ts[0] in partial and not any(ts[0] in m and m <= said for m in longer)

    return [n for n in whole if not part_only(n)]


@contextmanager
def patched(variant: str) -> Iterator[None]:
    from evidence.profiles.verbatim import VerbatimPlugin
    from evidence.verbatim import cascade as cm

    undo: list[Callable[[], None]] = []
    if variant.startswith("unscoped="):
        n = int(variant.split("=", 1)[1])
        init = cm.VerbatimCascade.__init__

        def new_init(self: Any, config: Any = None, rules: Any = None) -> None:
            init(self, replace(config or cm.CascadeConfig(), unscoped_documents=n), rules)

        cm.VerbatimCascade.__init__ = new_init  # type: ignore[method-assign]
        undo.append(lambda: setattr(cm.VerbatimCascade, "__init__", init))
    elif variant == "no_named_scope":
        VerbatimPlugin.scopes = False
        undo.append(lambda: setattr(VerbatimPlugin, "scopes", True))
    elif variant == "keep_named":
        named = cm.VerbatimCascade.__dict__["_named_terms"]
        cm.VerbatimCascade._named_terms = staticmethod(lambda *a: [])  # type: ignore[method-assign]
        undo.append(lambda: setattr(cm.VerbatimCascade, "_named_terms", named))
    elif variant == "whole_name":
        qt = cm.VerbatimCascade._question_terms

        def new_qt(self: Any, question: str, plan: Any, names: Any) -> Any:
            return qt(self, question, plan, whole_names(question, list(names)))

        cm.VerbatimCascade._question_terms = new_qt  # type: ignore[method-assign]
        undo.append(lambda: setattr(cm.VerbatimCascade, "_question_terms", qt))
    elif variant.startswith("name_share="):
        from evidence.verbatim import scope as sm

        old = sm.NAME_TEXT_SHARE
        sm.NAME_TEXT_SHARE = float(variant.split("=", 1)[1])
        undo.append(lambda: setattr(sm, "NAME_TEXT_SHARE", old))
    elif variant != "base":
        raise SystemExit(f"unknown variant {variant!r}")
    try:
        yield
    finally:
        for u in undo:
            u()


def run(root: Path, store: Path, variant: str, profile: str = "verbatim") -> list[Any]:
    from evidence.service import EvidenceService

    with patched(variant):
        service = EvidenceService(Settings(store_dir=store))
        try:
            return collect_qa_outcomes(service, root, profile=profile)[0]
        finally:
            service.close()


def counts(outs: list[Any]) -> dict[str, int]:
    ans = [o for o in outs if o.answerable]
    return {
        "found_600": sum(o.found_600 for o in ans),
        "found_2000": sum(o.found_2000 for o in ans),
        "false_refusals": sum(o.refused for o in ans),
        "refused_unanswerable": sum(o.refused for o in outs if not o.answerable),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("root", nargs="?", default=str(HERE))
    ap.add_argument("--store", required=True)
    ap.add_argument("--variants", default="base,unscoped=5,unscoped=8,unscoped=12,unscoped=1000")
    ap.add_argument("--profile", default="verbatim")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    variants = args.variants.split(",")
    by = {v: run(Path(args.root), Path(args.store), v, args.profile) for v in variants}
    first = by[variants[0]]
    families = list(dict.fromkeys(o.family for o in first))
    report: dict[str, Any] = {"variants": {}, "heldout": {}}
    for v, outs in by.items():
        per = {f: counts([o for o in outs if o.family == f]) for f in families}
        m = qa_metrics(outs)
        report["variants"][v] = {"overall": m, "counts": counts(outs), "families": per}
        print(
            f"{v}: r600 {m['answer_recall_600']} r2000 {m['answer_recall_2000']} false refusals "
            f"{m['false_refusals']} NO_RESULT recall {m['no_result_recall']} chars {m['evidence_chars']} "
            f"latency {m['latency_ms']}"
        )
        for f, c in per.items():
            print(f"    {f}: {c}")
        for a, b in zip(first, outs, strict=True):
            if (a.found_600, a.found_2000, a.refused) != (b.found_600, b.found_2000, b.refused):
                print(
                    f"    [{a.family}] answerable={a.answerable} 600 {a.found_600}->{b.found_600} "
                    f"2000 {a.found_2000}->{b.found_2000} refused {a.refused}->{b.refused}: {a.question}"
                )

    def score(outs: list[Any]) -> tuple[int, int]:
        c = counts(outs)
        return c["found_600"], -c["false_refusals"]

    held: list[Any] = []
    for f in families:
        best = max(variants, key=lambda v: (*score([o for o in by[v] if o.family != f]), -variants.index(v)))
        mine = [o for o in by[best] if o.family == f]
        held.extend(mine)
        report["heldout"][f] = {"chosen": best, **counts(mine)}
        print(f"held out {f}: chosen {best}: {counts(mine)}")
    report["heldout_pooled"] = qa_metrics(held)
    p = report["heldout_pooled"]
    print(
        f"held out pooled: r600 {p['answer_recall_600']} r2000 {p['answer_recall_2000']} "
        f"false refusals {p['false_refusals']} NO_RESULT recall {p['no_result_recall']}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=asdict))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
