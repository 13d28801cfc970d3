"""Multi-node SGLang serving scripts: one serve script per node and a Slurm batch script.

SGLang spreads one server over nodes with ``--nnodes N --node-rank R --dist-init-addr HOST:PORT``;
every node runs the same command but its rank. Written: ``serve-node{R}.sh`` (fixed rank and
address, for clusters without Slurm), ``serve-slurm-node.sh`` (rank from ``$SLURM_NODEID``) and
``serve-multinode.sbatch`` (allocates N nodes and ``srun``s the node script on each). Values are
shell-quoted through tools/scripts/shell.py; those in ``#SBATCH`` lines, which Slurm reads without
a shell, are restricted to safe characters.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator

from tools.base import Tool
from tools.scripts.shell import ShellText, environment
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SBATCH_WORD = re.compile(r"^[A-Za-z0-9._:-]+$")  # #SBATCH values are not shell-parsed: keep them plain
_ADDR = re.compile(r"^[A-Za-z0-9._-]+:[0-9]{1,5}$|^\[[0-9A-Fa-f:]+\]:[0-9]{1,5}$")


class MultinodeServeArgs(BaseModel):
    """Write SGLang serve scripts for one model served across several nodes (one script per node,
    with --nnodes/--node-rank/--dist-init-addr) and a Slurm batch script that starts them all."""

    model_path: str = Field(description="Model path or Hugging Face id, as seen from every node.")
    nnodes: int = Field(ge=2, le=512, description="Number of nodes the server spans.")
    tp_size: int = Field(ge=1, description="Tensor-parallel size across all nodes (e.g. 16 for 2 nodes x 8 GPUs).")
    dist_init_addr: str = Field(
        description="host:port of node 0 for the per-node scripts (the Slurm script finds node 0 itself)."
    )
    dist_init_port: int = Field(default=5000, ge=1, le=65535,
                                description="Port on node 0 for the distributed init in the Slurm script.")
    host: str = Field(default="0.0.0.0", description="HTTP bind address of the server.")
    port: int = Field(default=30000, ge=1, le=65535, description="HTTP port of the server (on node 0).")
    python: str = Field(default="python3", description="Python interpreter that has sglang installed on the nodes.")
    extra_args: list[str] = Field(default_factory=list,
                                  description="More server arguments, one list item per word, e.g. ['--mem-fraction-static', '0.85'].")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables exported before the server starts.")
    gpus_per_node: int = Field(default=8, ge=1, description="GPUs requested per node in the Slurm script.")
    partition: str | None = Field(default=None, description="Slurm partition; None uses the cluster's default.")
    time_limit: str | None = Field(default=None, description="Slurm time limit, e.g. '04:00:00'.")
    job_name: str = Field(default="dsv4-serve", description="Slurm job name.")
    out_dir: str = Field(description="Folder the scripts are written to (a run folder's scripts/ folder).")

    @field_validator("dist_init_addr")
    @classmethod
    def _addr_is_host_port(cls, value: str) -> str:
        if not _ADDR.match(value):
            raise ValueError(f"dist_init_addr {value!r} must be HOST:PORT, e.g. node0.cluster:5000")
        return value

    @field_validator("env")
    @classmethod
    def _env_names_are_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [name for name in env if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"environment variable names {bad} are not valid shell names")
        return env

    @model_validator(mode="after")
    def _sbatch_values_are_plain(self) -> "MultinodeServeArgs":
        for field in ("partition", "time_limit", "job_name"):
            value = getattr(self, field)
            if value is not None and not _SBATCH_WORD.match(value):
                raise ValueError(f"{field} {value!r} may only hold letters, digits and . _ : - (it goes into an #SBATCH line)")
        return self


class MultinodeServeResult(BaseModel):
    node_scripts: list[str] = Field(description="serve-node{R}.sh, in rank order")
    slurm_node_script: str
    sbatch_script: str
    node_argv: list[list[str]] = Field(description="The exact server command of each node, for review")


def _arg_lines(words: list[str]) -> list[str]:
    """Quoted extra arguments, one ``--flag value`` pair per line for the reader."""
    lines: list[list[str]] = []
    for word in words:
        if lines and lines[-1][0].startswith("--") and len(lines[-1]) == 1 and not word.startswith("--"):
            lines[-1].append(word)
        else:
            lines.append([word])
    return [ShellText(" ".join(shlex.quote(w) for w in line)) for line in lines]


def node_argv(args: MultinodeServeArgs, rank: int, dist_init_addr: str) -> list[str]:
    """The server command one node runs (what the rendered script executes, word for word)."""
    return [args.python, "-m", "sglang.launch_server", "--model-path", args.model_path,
            "--tp-size", str(args.tp_size), "--nnodes", str(args.nnodes), "--node-rank", str(rank),
            "--dist-init-addr", dist_init_addr, "--host", args.host, "--port", str(args.port), *args.extra_args]


def render_multinode_serve(args: MultinodeServeArgs) -> MultinodeServeResult:
    out = Path(args.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    templates = environment()
    node_template = templates.get_template("serve_node.sh.j2")
    common = dict(args.model_dump(), env=sorted(args.env.items()), extra_lines=_arg_lines(args.extra_args))
    written = []
    for rank in range(args.nnodes):
        path = out / f"serve-node{rank}.sh"
        path.write_text(node_template.render(**common, role=f"node {rank} of {args.nnodes}",
                                             node_rank_word=rank, dist_init_word=ShellText(shlex.quote(args.dist_init_addr))))
        path.chmod(0o755)
        written.append(str(path))
    slurm_node = out / "serve-slurm-node.sh"
    slurm_node.write_text(node_template.render(**common, role="the node Slurm runs this task on",
                                               node_rank_word=ShellText('"${SLURM_NODEID:?run through srun}"'),
                                               dist_init_word=ShellText('"${DSV4_DIST_INIT_ADDR:?set by the batch script}"')))
    slurm_node.chmod(0o755)
    sbatch = out / "serve-multinode.sbatch"
    sbatch.write_text(templates.get_template("serve_multinode.sbatch.j2").render(
        **common, node_script=str(slurm_node), sbatch_path=str(sbatch)))
    return MultinodeServeResult(
        node_scripts=written, slurm_node_script=str(slurm_node), sbatch_script=str(sbatch),
        node_argv=[node_argv(args, rank, args.dist_init_addr) for rank in range(args.nnodes)],
    )


RENDER_MULTINODE_SERVE = Tool(name="render_multinode_serve", args=MultinodeServeArgs, run=render_multinode_serve)
