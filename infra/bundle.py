"""Build the Lambda assets locally, without Docker: one shared layer and one folder per function.

    build/layer/python/         runtime dependencies (uv.lock, runtime group only) + shared/evidence
    build/functions/<name>/     handler code only (functions/<name>/, infra/custom_resources/)
    build/bundle.json           input hash, target, sizes (the cache stamp)

The layer is installed with `uv pip install --target` for the Lambda runtime's platform
(manylinux_2_34 x86_64, the glibc of Amazon Linux 2023) from the exact versions in uv.lock,
offline from uv's local cache first and from the package index only if the cache misses.
A build whose inputs (lock, shared/, functions/, this file, target) are unchanged is skipped.

Why python3.12 and not python3.11: Lambda's python3.11 runtime runs on Amazon Linux 2 (glibc
2.26), and the locked onnxruntime and numpy wheels are manylinux_2_27/2_28, so they would not
load there. python3.12+ runs on Amazon Linux 2023 (glibc 2.34).

Usage: python infra/bundle.py [--force] [--check]
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
LAMBDA_LIMIT_BYTES = 250 * 1024 * 1024  # unzipped function + all its layers

#: name -> (source folder, handler). The four product functions and the search-setup custom resource.
FUNCTIONS: dict[str, tuple[Path, str]] = {
    "indexer": (ROOT / "functions" / "indexer", "handler.handler"),
    "retriever": (ROOT / "functions" / "retriever", "handler.handler"),
    "planner": (ROOT / "functions" / "planner", "handler.handler"),
    "formatter": (ROOT / "functions" / "formatter", "handler.handler"),
    "search_setup": (ROOT / "infra" / "custom_resources", "search_setup.on_event"),
}

#: Lambda runtime -> uv platform (its glibc). python3.11 is refused: see the module docstring.
RUNTIME_PLATFORMS = {"3.12": "x86_64-manylinux_2_34", "3.13": "x86_64-manylinux_2_34"}

#: Never in a bundle: build, test and CDK tooling.
FORBIDDEN = (
    "aws-cdk-lib",
    "constructs",
    "cdk-nag",
    "jsii",
    "moto",
    "pytest",
    "hypothesis",
    "cfn-lint",
    "torch",
)

#: Installed as dependencies but never imported by any code path we run (the import test and a grep
#: of the layer prove it): opensearch-py 3's gRPC transport (grpcio, opensearch-protobufs, protobuf)
#: and tokenizers' hub client (huggingface_hub, hf_xet, fsspec, filelock): we never download a model.
#: import name -> distribution name (its .dist-info goes too). ~35 MB with their .pyc.
DROP_PACKAGES = {
    "grpc": "grpcio",
    "opensearch": "opensearch_protobufs",
    "google": "protobuf",
    "huggingface_hub": "huggingface_hub",
    "hf_xet": "hf_xet",
    "fsspec": "fsspec",
    "filelock": "filelock",
    "bin": None,
    # faiss-cpu (65 MB) serves the embedded backend's approximate search past
    # EVIDENCE_ANN_MIN_VECTORS (docs/scale.md); the Lambdas search OpenSearch or small embedded
    # indexes, and without faiss an index of any size is searched exactly.
    "faiss": "faiss_cpu",
    "faiss_cpu.libs": None,
}
#: Inside onnxruntime only the inference session is used; these are offline tooling.
DROP_SUBDIRS = (
    "onnxruntime/transformers",
    "onnxruntime/quantization",
    "onnxruntime/tools",
    "onnxruntime/datasets",
)
#: botocore ships models for ~440 services (28 MB); keep the ones the code and Powertools call.
BOTOCORE_SERVICES = frozenset(
    {
        "s3",
        "sqs",
        "sts",
        "sso",
        "sso-oidc",
        "bedrock-runtime",
        "bedrock-agent-runtime",
        "secretsmanager",
        "ssm",
        "appconfigdata",
        "dynamodb",
        "es",
        "opensearch",
        "opensearchserverless",
        "lambda",
        "stepfunctions",
        "cloudwatch",
        "logs",
        "xray",
        "kms",
    }
)
#: Developer tools in shared/evidence that no handler imports at run time: the CLI (every
#: subcommand, the `evidence assess` and `evidence coach` front ends included), the local server,
#: `evidence invoke`, the local Step Functions bridge, the demo (with its sample documents), test
#: helpers and the embedded → OpenSearch migration. Modules or packages, by top-level name.
#: (Evaluation and its progress type stay in: the API's `evaluate` route runs it, docs/workbench.md.)
#: `check_layer_imports` fails the build if any bundled module imports one of them.
DEV_MODULES = frozenset({"cli", "server", "invoke", "demo", "testing", "migrate", "local_sfn"})
#: Inside bundled packages: what only `evidence serve` uses (the workbench page's static files).
SERVE_ONLY = {"workbench": ("static",)}
JUNK_DIRS = frozenset({"__pycache__", "tests", "test"})
JUNK_SUFFIXES = (".pyi", ".pyc", ".pyx", ".pxd", ".c", ".h", ".cpp")


class BundleError(RuntimeError):
    """The bundle could not be built (missing source, forbidden package, install failure, too big)."""


@dataclass
class BundleReport:
    python_version: str
    platform: str
    input_hash: str
    layer_bytes: int
    function_bytes: dict[str, int] = field(default_factory=dict)
    missing_functions: list[str] = field(default_factory=list)
    precompiled: bool = False
    built: bool = True
    seconds: float = 0.0

    @property
    def layer_dir(self) -> Path:
        return BUILD / "layer"

    def function_dir(self, name: str) -> Path:
        return BUILD / "functions" / name

    def lines(self) -> list[str]:
        mb = 1024 * 1024
        pyc = "with .pyc" if self.precompiled else "no .pyc (no local python" + self.python_version + ")"
        out = [
            f"layer (python{self.python_version}, {self.platform}, {pyc}): "
            f"{self.layer_bytes / mb:.1f} MB unzipped"
        ]
        for name, size in sorted(self.function_bytes.items()):
            total = size + self.layer_bytes
            out.append(
                f"function {name}: {size / 1024:.1f} kB; with layer {total / mb:.1f} MB "
                f"({100 * total / LAMBDA_LIMIT_BYTES:.0f}% of 250 MB)"
            )
        out.extend(f"function {name}: source missing (placeholder)" for name in self.missing_functions)
        return out


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield path


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _uv() -> list[str]:
    here = Path(sys.executable).parent / "uv"
    if here.exists():
        return [str(here)]
    found = shutil.which("uv")
    if found:
        return [found]
    raise BundleError("uv not found: install the dev group (`pip install uv`)")


def runtime_requirements() -> list[str]:
    """Pinned runtime closure from uv.lock: `[project].dependencies` only, no dependency groups."""
    out = subprocess.run(
        [
            *_uv(),
            "export",
            "--project",
            str(ROOT),
            "--frozen",
            "--no-default-groups",
            "--no-emit-project",
            "--no-hashes",
            "--no-header",
            "--no-annotate",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    reqs = [line.strip() for line in out.splitlines() if line.strip() and not line.startswith(("#", "-"))]
    names = {re.split(r"[=<>!~; ]", r, maxsplit=1)[0].lower() for r in reqs}
    bad = sorted(names.intersection(FORBIDDEN))
    if bad:
        raise BundleError(f"runtime dependencies pull build/test tooling into the layer: {bad}")
    return reqs


def _hash_inputs(python_version: str, reqs: Iterable[str]) -> str:
    h = hashlib.sha256()
    h.update(f"{python_version}|{RUNTIME_PLATFORMS[python_version]}|{project_version()}\n".encode())
    h.update("\n".join(reqs).encode())
    sources = [Path(__file__), ROOT / "shared" / "evidence"] + [src for src, _ in FUNCTIONS.values()]
    for src in sources:
        for path in [src] if src.is_file() else (_files(src) if src.exists() else []):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:32]


def _install_layer(reqs: list[str], target: Path, python_version: str) -> None:
    req_file = BUILD / "requirements-layer.txt"
    req_file.write_text("\n".join(reqs) + "\n")
    base = [
        *_uv(),
        "pip",
        "install",
        "--quiet",
        "--target",
        str(target),
        "--no-deps",
        "--only-binary",
        ":all:",
        "--python-platform",
        RUNTIME_PLATFORMS[python_version],
        "--python-version",
        python_version,
        "--no-compile",
        "-r",
        str(req_file),
    ]
    env = {**os.environ, "UV_NO_PROGRESS": "1"}
    # Offline first: the local cache normally holds every wheel already (the venv came from it).
    offline = subprocess.run([*base, "--offline"], capture_output=True, text=True, env=env, check=False)
    if offline.returncode == 0:
        return
    shutil.rmtree(target, ignore_errors=True)
    online = subprocess.run(base, capture_output=True, text=True, env=env, check=False)
    if online.returncode != 0:
        raise BundleError(f"layer install failed:\n{offline.stderr[-2000:]}\n{online.stderr[-2000:]}")


def _prune(site: Path) -> None:
    for module, dist in DROP_PACKAGES.items():
        shutil.rmtree(site / module, ignore_errors=True)
        if dist:
            for info in site.glob(f"{dist}-*.dist-info"):
                shutil.rmtree(info)
    for sub in DROP_SUBDIRS:
        shutil.rmtree(site / sub, ignore_errors=True)
    for path in list(site.glob("*-stubs")) + list(site.glob("types_*")):
        shutil.rmtree(path, ignore_errors=True)
    data = site / "botocore" / "data"
    if data.is_dir():
        for service in data.iterdir():
            if service.is_dir() and service.name not in BOTOCORE_SERVICES:
                shutil.rmtree(service)
    for path in sorted(site.rglob("*"), reverse=True):
        if path.is_dir() and path.name in JUNK_DIRS:
            shutil.rmtree(path, ignore_errors=True)
        elif path.is_file() and path.suffix in JUNK_SUFFIXES and "dist-info" not in str(path.parent):
            path.unlink()


def target_python(python_version: str) -> Path | None:
    """An interpreter of the Lambda runtime's version on this machine, if there is one (for
    precompiling and import tests); None means: check wheel tags instead."""
    candidates = sorted(
        (Path.home() / ".pyenv" / "versions").glob(f"{python_version}.*/bin/python{python_version}"),
        reverse=True,
    )
    found = shutil.which(f"python{python_version}")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        try:
            probe = subprocess.run(
                [str(candidate), "-c", "import sys; print(sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        # pyenv shims exist for versions that are not active: they fail, so ask the interpreter itself.
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(map(int, python_version.split(".")))):
            return candidate
    return None


#: Where Lambda mounts a layer's python/ folder and a function's code.
LAYER_MOUNT = "/opt/python"
FUNCTION_MOUNT = "/var/task"


def _precompile(python: Path | None, trees: dict[Path, str]) -> bool:
    """Lambda's /opt and /var/task are read-only, so without shipped .pyc every cold start
    recompiles every module. unchecked-hash: valid whatever mtimes the zip gives the sources.
    Each tree is compiled as if it sat where Lambda mounts it (`-s`/`-p`): tracebacks name
    /opt/python/..., and the .pyc carry no path of the build machine."""
    if python is None:
        return False
    for tree, mount in trees.items():
        subprocess.run(
            [
                str(python),
                "-m",
                "compileall",
                "-q",
                "-j",
                "0",
                "--invalidation-mode",
                "unchecked-hash",
                "-s",
                str(tree),
                "-p",
                mount,
                str(tree),
            ],
            check=False,
            capture_output=True,  # a stray file that does not compile is skipped, not fatal
        )
    return True


def _copy_tree(src: Path, dst: Path, *, exclude: Iterable[str] = ()) -> None:
    shutil.copytree(
        src,
        dst,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests", "*.pyi", ".mypy_cache", *exclude),
        dirs_exist_ok=True,
    )


def _copy_package(src: Path, dst: Path) -> None:
    """shared/evidence without the developer tools (`DEV_MODULES`, top level only)."""
    dev = {f"{name}.py" for name in DEV_MODULES} | set(DEV_MODULES)
    dst.mkdir(parents=True, exist_ok=True)
    for child in src.iterdir():
        if child.name in dev or child.name in {"__pycache__", ".mypy_cache"}:
            continue
        if child.is_dir():
            _copy_tree(child, dst / child.name, exclude=SERVE_ONLY.get(child.name, ()))
        elif child.suffix not in {".pyc", ".pyi"}:
            shutil.copy2(child, dst / child.name)


def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def write_dist_info(site: Path, version: str) -> Path:
    """A minimal `evidence-<version>.dist-info`, so `importlib.metadata` (evidence.version, read
    by /v1/health) finds the package the layer copies from source instead of installing."""
    info = site / f"evidence-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: evidence\nVersion: {version}\n")
    return info


def _imported_modules(tree: ast.AST, package: str) -> Iterator[tuple[str, int]]:
    """(absolute module name, line) of every import outside `if TYPE_CHECKING:` blocks."""

    def visit(node: ast.AST) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from (item for stmt in child.orelse for item in visit_stmt(stmt))
                continue
            yield from visit_stmt(child)

    def visit_stmt(node: ast.AST) -> Iterator[tuple[str, int]]:
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            yield base, node.lineno
            yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names)
        yield from visit(node)

    yield from visit(tree)


def check_layer_imports(package_dir: Path) -> list[str]:
    """Every import, in the bundled `evidence` package, of a developer module left out of it."""
    banned = {f"evidence.{name}" for name in DEV_MODULES}
    problems = []
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir.parent)
        package = (
            ".".join(relative.with_suffix("").parts[:-1])
            if path.name != "__init__.py"
            else (".".join(relative.parent.parts))
        )
        for module, line in _imported_modules(ast.parse(path.read_text()), package):
            if any(module == b or module.startswith(b + ".") for b in banned):
                problems.append(f"{relative}:{line} imports {module}, a developer tool left out of the layer")
    return problems


def build(*, python_version: str = "3.12", force: bool = False, allow_missing: bool = False) -> BundleReport:
    """Build (or reuse) the layer and the function folders; returns sizes.

    One build at a time per checkout: a synth and a test running in parallel (pytest-xdist, or
    `make synth` beside `make test`) wait for each other instead of deleting each other's files."""
    BUILD.mkdir(exist_ok=True)
    with (BUILD / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _build(python_version=python_version, force=force, allow_missing=allow_missing)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(*, python_version: str, force: bool, allow_missing: bool) -> BundleReport:
    if python_version not in RUNTIME_PLATFORMS:
        raise BundleError(f"python{python_version} is not supported; use one of {sorted(RUNTIME_PLATFORMS)}")
    started = time.monotonic()
    reqs = runtime_requirements()
    missing = [name for name, (src, _) in FUNCTIONS.items() if not src.is_dir()]
    if missing and not allow_missing:
        raise BundleError(f"function sources missing: {missing}")
    digest = _hash_inputs(python_version, reqs)
    stamp = BUILD / "bundle.json"
    if not force and stamp.exists():
        previous = json.loads(stamp.read_text())
        if previous.get("input_hash") == digest and (BUILD / "layer" / "python").is_dir():
            return BundleReport(**{**previous, "built": False, "seconds": time.monotonic() - started})

    BUILD.mkdir(exist_ok=True)
    stamp.unlink(missing_ok=True)
    layer = BUILD / "layer"
    shutil.rmtree(layer, ignore_errors=True)
    site = layer / "python"
    _install_layer(reqs, site, python_version)
    _prune(site)
    _copy_package(ROOT / "shared" / "evidence", site / "evidence")
    write_dist_info(site, project_version())
    problems = check_layer_imports(site / "evidence")
    if problems:
        raise BundleError("the layer imports developer tools it leaves out:\n" + "\n".join(problems))

    python = target_python(python_version)
    functions_dir = BUILD / "functions"
    shutil.rmtree(functions_dir, ignore_errors=True)
    for name, (src, _) in FUNCTIONS.items():
        dst = functions_dir / name
        dst.mkdir(parents=True)
        if name in missing:
            continue
        if name == "search_setup":
            shutil.copy2(src / "search_setup.py", dst / "search_setup.py")
        else:
            _copy_tree(src, dst)
    precompiled = _precompile(
        python,
        {
            site: LAYER_MOUNT,
            **{functions_dir / name: FUNCTION_MOUNT for name in FUNCTIONS if name not in missing},
        },
    )
    report = BundleReport(
        python_version=python_version,
        platform=RUNTIME_PLATFORMS[python_version],
        input_hash=digest,
        layer_bytes=tree_bytes(layer),
        missing_functions=missing,
        precompiled=precompiled,
    )
    for name in FUNCTIONS:
        if name not in missing:
            report.function_bytes[name] = tree_bytes(functions_dir / name)
    for name, size in report.function_bytes.items():
        if size + report.layer_bytes > LAMBDA_LIMIT_BYTES:
            raise BundleError(f"{name}: {size + report.layer_bytes} bytes unzipped exceeds Lambda's 250 MB")
    report.seconds = time.monotonic() - started
    payload = asdict(report)
    payload.pop("built")
    payload.pop("seconds")
    stamp.write_text(json.dumps(payload, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--python", default="3.12", choices=sorted(RUNTIME_PLATFORMS))
    parser.add_argument("--force", action="store_true", help="rebuild even if the inputs are unchanged")
    parser.add_argument("--allow-missing", action="store_true", help="skip functions whose source is missing")
    args = parser.parse_args(argv)
    try:
        report = build(python_version=args.python, force=args.force, allow_missing=args.allow_missing)
    except BundleError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 1
    print(f"bundle: {'built' if report.built else 'up to date'} in {report.seconds:.1f} s")
    for line in report.lines():
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
