"""tidy18: what `read_evidence` spends on `absent_rare` per judged question (READ_RARE on, main's
behaviour, against off, this branch's default).

    PYTHONHASHSEED=0 PYTHONPATH=shared .venv/bin/python bench/data/session46/tidy18_rare_cost.py \
        STORE QA FAMILIES [REPEATS]

Records every `read_evidence` call a `verbatim` and a `default` run over FAMILIES make (the
service's own, on STORE, which must be indexed), then times the same calls with
`grounding.READ_RARE` True and False, interleaved (on, off, off, on), process CPU time, REPEATS
passes over the calls per measurement; checks that every reading but `absent_rare` is the same.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def main() -> int:
    store, qa, families = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(",")
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    import evidence.verbatim.grounding as rg
    from evidence.config import Settings
    from evidence.evaluation.files import slug
    from evidence.evaluation.qa import load_qa
    from evidence.evaluation.suite import find_qa_families
    from evidence.model import RetrieveRequest
    from evidence.service import EvidenceService

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    real = rg.read_evidence

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    rg.read_evidence = recording  # type: ignore[assignment]
    service = EvidenceService(Settings(store_dir=store))
    questions = 0
    try:
        for family in find_qa_families(qa, families):
            for rec in load_qa(family.questions):
                for profile in ("verbatim", "default"):
                    service.retrieve(
                        f"qa-{slug(family.name)}", RetrieveRequest(query=rec["question"], profile=profile)
                    )
                    questions += 1
    finally:
        service.close()
    rg.read_evidence = real  # type: ignore[assignment]
    with_df = sum(1 for _, kw in calls if kw.get("df") is not None)
    print(f"{questions} retrieves, {len(calls)} read_evidence calls ({with_df} with passage counts)")

    def run(flag: bool) -> tuple[float, list[Any]]:
        rg.READ_RARE = flag
        out = []
        t0 = time.process_time()
        for _ in range(repeats):
            out = [real(*a, **kw) for a, kw in calls]
        return (time.process_time() - t0) / repeats, out

    run(True)  # warm every memo
    same = True
    for order in ((True, False), (False, True)):
        got = {flag: run(flag) for flag in order}
        (on_s, on), (off_s, off) = got[True], got[False]
        same = same and all(replace(b, absent_rare=a.absent_rare) == a for a, b in zip(on, off, strict=True))
        print(
            f"round {'on first' if order[0] else 'off first'}: READ_RARE on {on_s * 1000:.1f} ms,"
            f" off {off_s * 1000:.1f} ms over {len(calls)} calls;"
            f" per call {on_s / len(calls) * 1e6:.1f} -> {off_s / len(calls) * 1e6:.1f} us"
            f" (saved {(on_s - off_s) / len(calls) * 1e6:.1f} us, {(on_s - off_s) / on_s * 100:.1f} %)"
        )
    print(f"every reading but absent_rare the same: {same}")
    # The work READ_RARE=False removes, timed inside (perf_counter_ns around the two calls).
    spent = [0]
    wrapped = {name: getattr(rg, name) for name in ("absent_concepts", "_rarest")}

    def timed(fn: Any) -> Any:
        def inner(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                spent[0] += time.perf_counter_ns() - t

        return inner

    for name, fn in wrapped.items():
        setattr(rg, name, timed(fn))
    rg.READ_RARE = True
    for _ in range(repeats):
        for a, kw in calls:
            real(*a, **kw)
    for name, fn in wrapped.items():
        setattr(rg, name, fn)
    per = spent[0] / 1000 / repeats / len(calls)
    print(f"inside absent_concepts + _rarest with READ_RARE on: {per:.1f} us per call (the work removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
