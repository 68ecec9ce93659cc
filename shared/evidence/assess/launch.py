"""Which launcher runs the API's batch assessments in this process (docs/api.md#batch-assessments).

`POST /v1/indexes/{index}/assessments` builds an `AssessmentInput` whose `principal` is the
caller from API Gateway's request context (never the body) and hands it to a `Launcher`
(`assess.contract`: the payloads, errors and protocol):

* `StepFunctionsLauncher` (`assess.stepfunctions`; `EVIDENCE_BATCH_STATE_MACHINE_ARN` set; the retriever
  Lambda): `StartExecution` named after the assessment id. Nothing else is stored: the status,
  the principal (for the owner check) and the summary are read back with `DescribeExecution`.
* `evidence.local_sfn.LocalStateMachineLauncher` (`EVIDENCE_BATCH_LOCAL_ASL` set, the ARN unset;
  `evidence serve` adds it through `add_launcher`, being a developer tool outside the Lambda layer):
  the state machine's synthesized ASL executed by aws-local-stepfunctions, each task the real
  handler in this process, results in S3; a whole batch per turn (the Map is the definition's);
  status as below.
* `ThreadLauncher` (`assess.threads`; unset; `evidence serve`, the local default): the same chain in-process
  (`run_criterion`) in one worker thread per process, one criterion per turn with callers taking
  turns (a caller may queue `ThreadLauncher.MAX_QUEUED` batches; past that a 429); the status is a JSON
  file per assessment under `<store>/assessments/`, replaced atomically, so it survives a restart.
  A batch that was running when its process stopped is reported `failed` (reason
  `interrupted`): it is not resumed, a caller starts it again.

Only the principal who started an assessment may read it; anyone else gets the 404 of an unknown id.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from evidence.assess.contract import Launcher
from evidence.assess.stepfunctions import StepFunctionsLauncher
from evidence.assess.threads import ThreadLauncher

_cached: list[tuple[Any, Launcher]] = []
_cache_lock = threading.Lock()
#: (settings, service getter) -> a launcher, or None when its settings are unset. Developer tools
#: outside the Lambda layer add theirs (`evidence serve`: evidence/local_sfn.py); the layer has none.
LauncherFactory = Callable[[Any, Callable[[], Any]], "Launcher | None"]
_developer_launchers: list[LauncherFactory] = []


def add_launcher(factory: LauncherFactory) -> None:
    """Consulted, in order, when no state machine ARN is set (before the in-process default)."""
    with _cache_lock:
        if factory not in _developer_launchers:
            _developer_launchers.append(factory)
            _cached.clear()


def get_launcher() -> Launcher:
    """Where API-started batches run: the state machine when its ARN is set, else this process.

    Built on first use from the runtime's settings, and again when they are replaced
    (`runtime.configure`): kept here rather than in `runtime`, which the chain's steps import.
    """
    from evidence.api import runtime

    settings = runtime.settings()
    with _cache_lock:
        if _cached and _cached[0][0] is settings:
            return _cached[0][1]
        launcher: Launcher | None = None
        if settings.batch_state_machine_arn:
            launcher = StepFunctionsLauncher(settings.batch_state_machine_arn, region=settings.aws_region)
        else:
            for factory in _developer_launchers:
                launcher = factory(settings, runtime.get_service)
                if launcher is not None:
                    break
        if launcher is None:
            launcher = ThreadLauncher(settings.store_dir / "assessments", runtime.get_service)
        _cached[:] = [(settings, launcher)]
        return launcher
