"""Where a job's files are on the SSH host: the run-folder mapping rule of ``SshExecutor``.

Job specs name paths of the *local* run folder; on the host the run has a folder of its own
(``~/.dsv4-agent/runs/<run>-<tag>``), so:

- **Rewritten**: the local run folder's path in argv words, env values and cwd becomes the remote one.
- **Mirrored before a new job starts**: each argv word / env value that is a file inside the run
  folder, and the top-level files of a working folder inside it (subfolders are outputs).
- **Folders created**: the parent of each such word or value whose parent exists locally.
- **Fetched after the job ended**: its ledger folder and the subfolders of its working folder;
  top-level files only where none exist locally (local inputs are never replaced).
- **Not touched**: every other path (SGLang checkout, model, SGLang python) is a path on the host;
  the run folder and its ``jobs/`` are never mirrored whole.
"""
from __future__ import annotations

import base64
import re
from pathlib import Path

from tools.base import ToolError
from tools.jobs.spec import JobSpec

MAX_INPUT_BYTES = 64 * 1024 * 1024  # job inputs are scripts and unit lists, never checkpoints


class RunPathMap:
    def __init__(self, local_run: Path, remote_run: str):
        self.local_run = local_run.resolve()
        self.remote_run = remote_run.rstrip("/")
        self._pattern = re.compile(re.escape(str(self.local_run)) + r"(?=/|$)")

    def to_remote(self, text: str) -> str:
        return self._pattern.sub(lambda _m: self.remote_run, text)

    def rewrite(self, job: dict) -> dict:
        """A job.json dict (argv, env, cwd) with run-folder paths pointing at the remote copy."""
        out = dict(job)
        out["argv"] = [self.to_remote(w) for w in job["argv"]]
        out["env"] = {k: self.to_remote(v) for k, v in (job.get("env") or {}).items()}
        if job.get("cwd"):
            out["cwd"] = self.to_remote(job["cwd"])
        return out

    def relative(self, path: str) -> Path | None:
        """``path`` relative to the run folder when it lies strictly inside it (not in jobs/)."""
        try:
            rel = Path(path).resolve().relative_to(self.local_run)
        except (ValueError, OSError):
            return None
        if rel == Path(".") or rel.parts[0] == "jobs":
            return None
        return rel

    def working_folder(self, spec: JobSpec) -> Path | None:
        """The job's working folder, run-relative, when it lies inside the run folder."""
        if not spec.cwd:
            return None
        rel = self.relative(spec.cwd)
        return rel if rel is not None and (self.local_run / rel).is_dir() else None

    def folders(self, spec: JobSpec) -> list[str]:
        """Run-relative folders to create on the host before ``spec`` starts (see module doc)."""
        out = set()
        for word in [*spec.argv, *spec.env.values()]:
            rel = self.relative(word) if word.startswith("/") else None
            if rel is not None and rel.parent != Path(".") and (self.local_run / rel.parent).is_dir():
                out.add(str(rel.parent))
        return sorted(out)

    def inputs(self, spec: JobSpec) -> list[dict]:
        """The files to copy to the remote run folder before ``spec`` starts (see module doc)."""
        files: dict[Path, Path] = {}
        for word in [*spec.argv, *spec.env.values()]:
            rel = self.relative(word) if word.startswith("/") else None
            if rel is not None and (self.local_run / rel).is_file():
                files[rel] = self.local_run / rel
        folder = self.working_folder(spec)
        if folder is not None:
            for path in sorted((self.local_run / folder).iterdir()):
                if path.is_file() and not path.name.endswith(".tmp"):
                    files[folder / path.name] = path
        total = sum(p.stat().st_size for p in files.values())
        if total > MAX_INPUT_BYTES:
            raise ToolError(f"job {spec.key!r} would copy {total / 2**20:.0f} MiB of run-folder files to the host "
                            f"(limit {MAX_INPUT_BYTES // 2**20} MiB); keep large data (models, datasets) on the GPU host "
                            "and pass its path there instead")
        return [{"path": str(rel), "data": base64.b64encode(path.read_bytes()).decode(),
                 "mode": path.stat().st_mode & 0o777} for rel, path in sorted(files.items())]
