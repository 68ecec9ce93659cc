"""Answer recall next to the evidence spent, per QA family, in the `verbatim` and `default` profiles.

Usage: python bench/qa_budget.py QA_ROOT [--families a,b] [--store DIR] [--json] [--misses]

QA_ROOT holds one folder per family (`documents/`, `questions.jsonl`: `{"question", "answers":
[verbatim strings], "mode"}`, `answers: []` = unanswerable; bench/qa's layout). Each family is
indexed into its own index (`qa-<family>`), then every question runs through both profiles:

- `verbatim`: answer recall within the first 600 characters of the evidence (hit texts in rank
  order, whitespace runs as one space: `evaluation.answer_found`); refused = `NO_RESULT` (no hit);
- `default`: answer recall within 600 and 2,000 characters; refused = `can_answer` false;
- both: NO_RESULT precision and recall over the unanswerable questions, false refusals of
  answerable ones, and evidence characters per answered question (mean, p50, max): what a
  reader or a model has to read.

Nothing here is tuned: it measures whatever the code does. Leave-one-family-out figures come from
running it with the rules tuned on the other families (`bench/grounding_fit.py`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import answer_found, load_qa  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402

PROFILES = {"verbatim": (600,), "default": (600, 2000)}


def families(root: Path, wanted: list[str] | None) -> list[Path]:
    out = sorted(
        p for p in root.iterdir() if (p / "questions.jsonl").is_file() and (p / "documents").is_dir()
    )
    return [p for p in out if not wanted or p.name in wanted]


def ensure_family(service: EvidenceService, fam: Path) -> str:
    index = f"qa-{fam.name}".lower()
    report = service.index_paths(index, [fam / "documents"])
    if report.failed:
        print(f"{fam.name}: failed to index {report.failed}", file=sys.stderr)
    return index


def run_family(service: EvidenceService, fam: Path, *, misses: bool) -> dict[str, Any]:
    index = ensure_family(service, fam)
    items = load_qa(fam / "questions.jsonl")
    out: dict[str, Any] = {"questions": len(items), "answerable": sum(1 for r in items if r["answers"])}
    for profile, limits in PROFILES.items():
        found = dict.fromkeys(limits, 0)
        refused_right = refused = false_refusals = 0
        chars: list[int] = []
        paths: dict[str, int] = {}
        missed: list[dict[str, Any]] = []
        ms: list[float] = []
        rows = out.setdefault("rows", [])
        for rec in items:
            t0 = time.perf_counter()
            resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile=profile))
            ms.append((time.perf_counter() - t0) * 1000)
            texts = [h.text for h in resp.hits]
            rows.append(_row(rec, profile, resp, texts, limits[-1]))
            no = (not resp.hits) if profile == "verbatim" else (not resp.can_answer)
            path = resp.telemetry.path_used
            paths[path] = paths.get(path, 0) + 1
            refused += no
            if rec["answers"]:
                false_refusals += no
                for n in limits:
                    found[n] += answer_found(texts, rec["answers"], limit=n)
                if not no:
                    chars.append(sum(len(t) for t in texts))
                if misses and not answer_found(texts, rec["answers"], limit=limits[-1]):
                    missed.append(
                        {
                            "q": rec["question"],
                            "path": path,
                            "refused": no,
                            "head": " | ".join(t[:160] for t in texts[:2]),
                        }
                    )
            else:
                refused_right += no
                if misses and not no:
                    missed.append({"q": rec["question"], "path": path, "unanswerable_answered": True})
        ans = out["answerable"]
        unans = len(items) - ans
        out[profile] = {
            **{f"recall@{n}": round(found[n] / ans, 4) if ans else 0.0 for n in limits},
            "no_result_precision": round(refused_right / refused, 4) if refused else 1.0,
            "no_result_recall": round(refused_right / unans, 4) if unans else 1.0,
            "false_refusals": false_refusals,
            "evidence_chars": {
                "mean": round(statistics.mean(chars)) if chars else 0,
                "p50": round(statistics.median(chars)) if chars else 0,
                "max": max(chars, default=0),
            },
            "paths": dict(sorted(paths.items(), key=lambda kv: -kv[1])),
            "ms_p50": round(statistics.median(ms), 1),
        }
        if misses:
            out[profile]["misses"] = missed
    return out


def _row(rec: dict[str, Any], profile: str, resp: Any, texts: list[str], limit: int) -> dict[str, Any]:
    """One question's outcome and its grounding, for calibrating the refusal floor."""
    g = None
    for st in resp.telemetry.stages:
        if st.name == "verbatim_cascade" and st.detail:
            g = st.detail.get("grounding")
    if g is None and resp.telemetry.answer is not None:
        g = resp.telemetry.answer.features.get("grounding")
    refused_path = None
    for st in resp.telemetry.stages:
        if st.name == "verbatim_cascade" and st.detail:
            refused_path = st.detail.get("refused")
    return {
        "profile": profile,
        "path": refused_path or resp.telemetry.path_used,
        "answerable": bool(rec["answers"]),
        "found": bool(rec["answers"]) and answer_found(texts, rec["answers"], limit=limit),
        "hits": bool(texts),
        "can_answer": bool(resp.can_answer),
        "grounding": g,
        "confidence": resp.confidence,
    }


def uncalibrated() -> None:
    """Refusal floors off (verbatim's grounding floor 0, default's 0): every question's grounding
    is then measured on the evidence the paths found, for `bench/grounding_fit.py`."""
    from evidence.profiles import register_profile
    from evidence.profiles.verbatim import VerbatimPlugin
    from evidence.verbatim.cascade import CascadeConfig
    from evidence.verbatim.profile import verbatim_profile

    # The verbatim plug-in (its planner, signal and bundle) over a cascade without floors.
    off = CascadeConfig(min_grounding=0.0, safety_net_grounding=0.0)
    register_profile("verbatim", lambda: VerbatimPlugin(verbatim_profile(off)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--families", default="")
    ap.add_argument("--store", type=Path, default=ROOT / ".bench" / "qa-store")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--uncalibrated", action="store_true", help="refusal floors off (for calibration)")
    args = ap.parse_args()
    if args.uncalibrated:
        uncalibrated()
    settings = Settings(store_dir=args.store)
    if args.uncalibrated:
        settings = settings.model_copy(update={"answer_min_grounding": 0.0})
    service = EvidenceService(settings)
    wanted = [f for f in args.families.split(",") if f] or None
    result = {fam.name: run_family(service, fam, misses=args.misses) for fam in families(args.root, wanted)}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for name, r in result.items():
        for profile in PROFILES:
            p = r[profile]
            rec = " ".join(f"{k}={v:.3f}" for k, v in p.items() if k.startswith("recall@"))
            print(
                f"{name:18} {profile:8} {rec} NO_RESULT P/R={p['no_result_precision']:.2f}/"
                f"{p['no_result_recall']:.2f} false_refusals={p['false_refusals']}/{r['answerable']} "
                f"chars mean/p50/max={p['evidence_chars']['mean']}/{p['evidence_chars']['p50']}/"
                f"{p['evidence_chars']['max']} paths={p['paths']}"
            )


if __name__ == "__main__":
    main()
