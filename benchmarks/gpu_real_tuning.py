"""Real-GPU check of detection and fan-out: ONE tiny real Triton tuning job per visible GPU.

Needs only the stdlib, pydantic, torch and triton (no sglang). GPUs are found with
tools/gpus.py (nvidia-smi); each job runs under our LocalExecutor with CUDA_VISIBLE_DEVICES=<i>.
A job times a handful of Triton configs of a block-scaled FP8 GEMM (128x128 weight blocks, as in
SGLang's W8A8 block-FP8 kernel; a bf16 GEMM where the GPU has no FP8), checks each result against
a torch reference, and writes the best config per M in SGLang's file format into its own folder.
The job reports the GPU it saw (name, UUID, device count); distinct UUIDs across jobs prove the
fan-out really put one process on each GPU. Budget: under 3 minutes.

    python benchmarks/gpu_real_tuning.py [--gpus 0,1] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.gpus import DetectGpusArgs, detect_gpus  # noqa: E402
from tools.jobs import JobSpec, LocalExecutor  # noqa: E402

WORKER = r'''
import json, os, sys, time
import torch, triton, triton.language as tl

@triton.jit
def block_gemm(A, B, C, As, Bs, M, N, K, sam, sak, sbn, sbk, scm, scn, sas_m, sas_k, sbs_n, sbs_k,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = B + offs_n[None, :] * sbn + offs_k[:, None] * sbk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - kb * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_n[None, :] < N) & (offs_k[:, None] < K - kb * BLOCK_K), other=0.0)
        a_s = tl.load(As + offs_m * sas_m + kb * sas_k, mask=offs_m < M, other=0.0)
        b_s = tl.load(Bs + (offs_n // 128) * sbs_n + kb * sbs_k, mask=offs_n < N, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    tl.store(C + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(C.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

def main(out_dir):
    seen = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "device_count": torch.cuda.device_count()}
    props = torch.cuda.get_device_properties(0)
    seen.update(name=props.name, uuid=str(getattr(props, "uuid", "")), capability=list(torch.cuda.get_device_capability(0)))
    fp8 = hasattr(torch, "float8_e4m3fn") and tuple(seen["capability"]) >= (8, 9)
    seen["mode"] = "fp8 block-scaled" if fp8 else "bf16 (no FP8 on this GPU)"
    print("[real-tune] device", json.dumps(seen), flush=True)
    N, K = 512, 1024
    torch.manual_seed(0)
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    B = (torch.randn(N, K, device="cuda") * 0.5).to(dtype)
    Bs = torch.rand(N // 128, K // 128, device="cuda") + 0.5
    configs = [{"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": w, "num_stages": s}
               for bm in (16, 64) for bn in (64, 128) for w in (4,) for s in (3, 4)]
    best = {}
    for M in (1, 16, 128):
        A = (torch.randn(M, K, device="cuda") * 0.5).to(dtype)
        As = torch.rand(M, K // 128, device="cuda") + 0.5
        ref = (A.float() * As.repeat_interleave(128, 1)) @ (B.float() * Bs.repeat_interleave(128, 0).repeat_interleave(128, 1)).T
        timings = []
        for cfg in configs:
            C = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            grid = (triton.cdiv(M, cfg["BLOCK_SIZE_M"]), triton.cdiv(N, cfg["BLOCK_SIZE_N"]))
            run = lambda: block_gemm[grid](A, B, C, As, Bs, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                                            C.stride(0), C.stride(1), As.stride(0), As.stride(1), Bs.stride(0), Bs.stride(1),
                                            BLOCK_M=cfg["BLOCK_SIZE_M"], BLOCK_N=cfg["BLOCK_SIZE_N"], BLOCK_K=128,
                                            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
            run()
            torch.cuda.synchronize()
            err = ((C.float() - ref).abs().max() / ref.abs().max()).item()
            if err > 2e-2:
                raise SystemExit(f"config {cfg} gives a wrong result for M={M}: relative error {err:.3g}")
            ms = triton.testing.do_bench(run, warmup=5, rep=20)
            timings.append((ms, cfg))
        best[M] = min(timings, key=lambda t: t[0])[1]
        print(f"[dsv4-agent] unit done N={N} K={K} M={M} ({len(best)}/3) best {min(t[0] for t in timings)*1000:.1f} us", flush=True)
    os.makedirs(out_dir, exist_ok=True)
    name = f"N={N},K={K},device_name={props.name.replace(' ', '_')},dtype=fp8_w8a8,block_shape=[128, 128].json"
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump({str(m): c for m, c in best.items()}, f, indent=4)
    print("[dsv4-agent] all units done", flush=True)

main(sys.argv[1])
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="", help="Comma-separated GPU indices (default: all found)")
    parser.add_argument("--out", default="", help="Folder for jobs and results (default: a temp folder)")
    args = parser.parse_args()
    only = [int(g) for g in args.gpus.split(",") if g.strip()] or None
    found = detect_gpus(DetectGpusArgs(only=only))
    print(f"detected {len(found.gpus)} GPUs: " + "; ".join(f"{g.index}: {g.name} {g.memory_mib} MiB" for g in found.gpus)
          + (f" ({found.note})" if found.note else ""))
    if not found.gpus:
        return 2
    root = Path(args.out or tempfile.mkdtemp(prefix="dsv4-real-tune-"))
    root.mkdir(parents=True, exist_ok=True)
    worker = root / "real_tune_worker.py"
    worker.write_text(WORKER)
    executor = LocalExecutor(root / "jobs")
    start = time.monotonic()
    keys = {}
    for gpu in found.gpus:
        spec = JobSpec(key=f"real-tune-gpu{gpu.index}", argv=[sys.executable, str(worker), str(root / "out" / f"gpu{gpu.index}")],
                       kind="tune", gpus=[gpu.index], timeout_s=170, grace_s=5)
        state = executor.launch(spec)
        keys[gpu.index] = spec.key
        print(f"launched {spec.key} (CUDA_VISIBLE_DEVICES={gpu.index}) pid {state.pid}: {state.status}")
    states = {}
    while True:
        states = {g: executor.poll(k) for g, k in keys.items()}
        if all(s.done for s in states.values()):
            break
        time.sleep(1.0)
    wall = time.monotonic() - start
    uuids, ok = {}, True
    for gpu, state in states.items():
        log = executor.read_log(keys[gpu], 6000)
        device = next((json.loads(l.split("device", 1)[1]) for l in log.splitlines() if l.startswith("[real-tune] device")), {})
        uuids[gpu] = device.get("uuid")
        good = (state.status == "succeeded" and device.get("device_count") == 1
                and device.get("CUDA_VISIBLE_DEVICES") == str(gpu) and "all units done" in log)
        ok &= good
        print(f"\n--- GPU {gpu}: {state.status} {state.reason} | saw {device} | {'OK' if good else 'PROBLEM'}")
        print("\n".join(log.strip().splitlines()[-6:]))
    known = [u for u in uuids.values() if u]
    distinct = len(set(known)) == len(known)  # torch without props.uuid: only the per-job checks count
    print(f"\n{len(states)} jobs in {wall:.1f} s; GPU UUIDs seen {len(known)}/{len(uuids)}, distinct: {distinct}; "
          f"results under {root / 'out'}")
    return 0 if ok and distinct else 1


if __name__ == "__main__":
    sys.exit(main())
