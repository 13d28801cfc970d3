"""Multi-node serve scripts for the campaign's serve variants (``--nodes N``, N > 1).

Each variant (baseline, mtp, ...) gets ``multinode/<variant>/``: ``serve-node{R}.sh`` per node,
``serve-slurm-node.sh`` and ``serve-multinode.sbatch`` (see ``tools/scripts/multinode.py``), with the
variant's own flags and environment. Sizes come from the campaign's GPU plan (tools/gpu_choice.py):
tensor parallelism across the nodes is its ``multinode_tp`` (--tp, else the GPUs of one node, found
or planned for the target, x nodes); GPUs per node is that TP / nodes. Node 0's address for the
per-node scripts is ``dist_init_addr``, else the placeholder ``node0:5000`` (the summary says to
replace it; the Slurm script finds node 0 itself).
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.gpu_choice import GpuPlan
from tools.scripts.multinode import MultinodeServeArgs, render_multinode_serve
from tools.scripts.models import MEASURE_FLAGS, ServeVariant

PLACEHOLDER_ADDR = "node0:5000"


class MultinodeFiles(BaseModel):
    files: list[str] = Field(description="Written files, relative to the run folder")
    tp_size: int
    gpus_per_node: int
    dist_init_addr: str
    notes: list[str] = Field(default_factory=list)


def render_variants_multinode(run_dir: Path, variants: list[ServeVariant], gpu_plan: GpuPlan, python: str,
                              port: int, dist_init_addr: str | None, partition: str | None = None) -> MultinodeFiles:
    nodes, tp_size = gpu_plan.nodes, gpu_plan.multinode_tp
    if tp_size is None:
        raise ToolError(f"the GPU plan is for one node ({gpu_plan.described()}); pass --nodes N to write "
                        "multi-node scripts")
    if tp_size % nodes:
        raise ToolError(f"tensor parallelism {tp_size} does not split over {nodes} nodes; pass --tp as a multiple of --nodes")
    addr = dist_init_addr or PLACEHOLDER_ADDR
    notes = [] if dist_init_addr else [f"per-node scripts use --dist-init-addr {PLACEHOLDER_ADDR}: pass "
                                       "--dist-init-addr HOST:PORT of node 0 (the Slurm script finds node 0 itself)"]
    files: list[str] = []
    for variant in variants:
        out_dir = run_dir / "multinode" / variant.name
        try:
            args = MultinodeServeArgs(
                model_path=variant.model_path, nnodes=nodes, tp_size=tp_size, dist_init_addr=addr, port=port,
                python=python, extra_args=[*MEASURE_FLAGS, *variant.flag_words()],
                env={e.name: e.value for e in variant.env}, gpus_per_node=tp_size // nodes,
                partition=partition, job_name=f"dsv4-serve-{variant.name}", out_dir=str(out_dir))
        except ValueError as err:  # pydantic names the field (e.g. a malformed --dist-init-addr)
            raise ToolError(f"cannot write multi-node scripts for {variant.name!r}: {err}") from None
        result = render_multinode_serve(args)
        for path in [*result.node_scripts, result.slurm_node_script, result.sbatch_script]:
            files.append(str(Path(path).relative_to(run_dir.resolve())))
    return MultinodeFiles(files=files, tp_size=tp_size, gpus_per_node=tp_size // nodes, dist_init_addr=addr,
                          notes=notes)
