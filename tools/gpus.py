"""GPU discovery through ``nvidia-smi`` (the real binary, or a double on PATH in tests).

Two queries, in the tool's CSV format: the GPUs (index, UUID, name, memory total and used) and
the compute processes on them (GPU UUID, pid, process name, memory). Only the GPUs that
``CUDA_VISIBLE_DEVICES`` lets a job see are listed (indices and ``GPU-`` UUID prefixes, read the
way CUDA reads them: up to the first entry that names no GPU). A GPU is *busy* when a compute
process runs on it or more than ``BUSY_MIB`` of its memory is used (a process in another
container does not show up in the list, its memory does).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from pydantic import BaseModel, Field

from tools.base import Tool
from tools.child_env import child_env

BUSY_MIB = 1024
GPU_QUERY = ["--query-gpu=index,uuid,name,memory.total,memory.used", "--format=csv,noheader,nounits"]
APPS_QUERY = ["--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader,nounits"]


class GpuProcess(BaseModel):
    pid: int | None = Field(None, description="None when nvidia-smi cannot see it (another container)")
    name: str = ""
    memory_mib: int = 0


class GpuInfo(BaseModel):
    index: int
    name: str
    memory_mib: int
    uuid: str = ""
    memory_used_mib: int | None = Field(None, description="None when nvidia-smi did not say")
    processes: list[GpuProcess] = Field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.processes) or (self.memory_used_mib or 0) > BUSY_MIB

    def holders(self) -> str:
        """Who uses this GPU, for a message: processes, else the memory in use."""
        if self.processes:
            return ", ".join(f"pid {p.pid if p.pid is not None else '?'} {p.name or '?'} ({p.memory_mib} MiB)"
                             for p in self.processes)
        return f"{self.memory_used_mib} MiB in use by a process nvidia-smi does not list"

    def label(self) -> str:
        return f"{self.index} ({self.name})"


class DetectGpusArgs(BaseModel):
    """List the NVIDIA GPUs jobs on this machine may use (index, name, memory, who uses them) with nvidia-smi."""

    nvidia_smi: str = Field("nvidia-smi", description="nvidia-smi binary to run")
    only: list[int] | None = Field(None, description="Keep only these GPU indices")
    cuda_visible_devices: str | None = Field(default_factory=lambda: os.environ.get("CUDA_VISIBLE_DEVICES"),
                                             description="Honoured like CUDA does; None = every GPU")


class DetectGpusResult(BaseModel):
    gpus: list[GpuInfo]
    note: str = Field("", description="Why the list is empty, or what was left out and why")


def _number(text: str) -> int | None:
    return int(float(text)) if text.replace(".", "", 1).isdigit() else None


def parse_gpus(gpu_csv: str, apps_csv: str = "") -> list[GpuInfo]:
    """The two query outputs (``GPU_QUERY``, ``APPS_QUERY``) as GPUs with their processes."""
    gpus = []
    for line in gpu_csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        gpus.append(GpuInfo(index=int(parts[0]), uuid=parts[1], name=parts[2], memory_mib=_number(parts[3]) or 0,
                            memory_used_mib=_number(parts[4])))
    by_uuid = {g.uuid: g for g in gpus}
    for line in apps_csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0] in by_uuid:
            pid = int(parts[1]) if parts[1].isdigit() else None
            by_uuid[parts[0]].processes.append(GpuProcess(pid=pid, name=parts[2], memory_mib=_number(parts[3]) or 0))
    return gpus


def visible(gpus: list[GpuInfo], cuda_visible_devices: str | None) -> tuple[list[GpuInfo], str]:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` exposes, in its order, and a note on what it hid."""
    if cuda_visible_devices is None:
        return gpus, ""
    chosen: list[GpuInfo] = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        match = [g for g in gpus if (entry.isdigit() and g.index == int(entry))
                 or (entry.startswith("GPU-") and g.uuid.startswith(entry))]
        if len(match) != 1 or match[0] in chosen:
            break  # CUDA stops at the first entry that names no single new GPU
        chosen.append(match[0])
    hidden = [g.index for g in gpus if g not in chosen]
    note = f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} hides GPU {', '.join(map(str, hidden))}" if hidden else ""
    return chosen, note


def _run_both(binary: str) -> list[tuple[int | None, str, str]]:
    """Both queries' answers; they run at once (each is a start of nvidia-smi, before any GPU job)."""
    env = child_env()
    started = [subprocess.Popen([binary, *query], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for query in (GPU_QUERY, APPS_QUERY)]
    answers: list[tuple[int | None, str, str]] = []
    for proc in started:
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # our own child
            proc.communicate()
            answers.append((None, "", f"{binary} did not answer in 30 s"))
            continue
        answers.append((proc.returncode, out, err))
    return answers


def from_queries(gpu_answer: tuple[int | None, str, str], apps_answer: tuple[int | None, str, str], where: str,
                 cuda_visible_devices: str | None) -> DetectGpusResult:
    """Turn the answers of both queries (returncode, stdout, stderr) into the visible GPUs."""
    code, stdout, stderr = gpu_answer
    if code != 0:
        first = (stderr or stdout).strip().splitlines()[:1]
        return DetectGpusResult(gpus=[], note=f"{where} failed (exit {code}): {' '.join(first)}")
    notes = []
    if apps_answer[0] != 0:
        notes.append(f"{where} did not list the processes on the GPUs, so busy GPUs cannot be told apart")
    gpus, hidden = visible(parse_gpus(stdout, apps_answer[1] if apps_answer[0] == 0 else ""), cuda_visible_devices)
    notes += [hidden] if hidden else []
    if not gpus:
        notes.insert(0, f"{where} listed no GPUs" if not hidden else "no GPU is visible")
    return DetectGpusResult(gpus=gpus, note="; ".join(notes))


def detect_gpus(args: DetectGpusArgs) -> DetectGpusResult:
    binary = shutil.which(args.nvidia_smi)
    if binary is None:
        return DetectGpusResult(gpus=[], note=f"{args.nvidia_smi} not found on PATH: no NVIDIA GPU here")
    found = from_queries(*_run_both(binary), binary, args.cuda_visible_devices)
    if args.only is not None:
        missing = sorted(set(args.only) - {g.index for g in found.gpus})
        if missing:
            return DetectGpusResult(gpus=[], note=f"GPU index {missing} not present (found {[g.index for g in found.gpus]})")
        found.gpus = [g for g in found.gpus if g.index in args.only]
    return found


DETECT_GPUS = Tool(name="detect_gpus", args=DetectGpusArgs, run=detect_gpus)
