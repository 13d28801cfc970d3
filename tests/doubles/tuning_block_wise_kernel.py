"""TEST DOUBLE of SGLang's ``benchmark/kernels/quantization/tuning_block_wise_kernel.py``.

It is not the real tuner: it needs no torch, triton or GPU. It honours the real script's flags
(``--tp-size/-tp``, ``--input-type``, ``--out-dtype``, ``--block-n``, ``--block-k``,
``--batch-size``, ``--save-path``), has the same top-level functions the dsv4-agent driver calls
(``get_configs_compute_bound``, ``tune``, ``save_configs``, ``get_weight_shapes``, ``DTYPE_MAP``,
``get_device_name``), prints the real progress lines (``[GPU i] Tune for weight shape of `N: .., K: ..```,
tqdm-style bars, ``Writing best config to ...``), sleeps instead of benchmarking, and writes the
real file format ``N={N},K={K},device_name={name},dtype=fp8_w8a8,block_shape=[128, 128].json``.

Controls (environment):
  DSV4_DOUBLE_DEVICE_NAME   GPU name it reports (default "NVIDIA H200")
  DSV4_DOUBLE_UNIT_S        seconds one tune() call sleeps (default 0.05)
  DSV4_DOUBLE_COST          "work": a tune() call sleeps UNIT_S x (0.6 + 0.4 x max(M, 64)·N·K / 2^31),
                            a fixed part (compiling every candidate) plus one growing with the GEMM;
                            a law of its own, not the agent's cost estimate (benchmarks/tuning_assignment.py)
  DSV4_DOUBLE_CALLS         file to append "N K M CUDA_VISIBLE_DEVICES" per tune() call
  DSV4_DOUBLE_CRASH_ONCE    marker path: the first tune() call while it is absent creates it and
                            crashes the process (exit 1, like a CUDA error), to test retries
  DSV4_DOUBLE_GPUS          device count when CUDA_VISIBLE_DEVICES is unset (default 1)
  DSV4_DOUBLE_HOLD_FOR      a regex: the first tune() call waits (at most 120 s) until the run's
                            trace (../trace.jsonl from the job's folder) has a matching line, so a
                            test can keep the GPU jobs running until another lane is done,
                            whatever the machine's speed
  DSV4_DOUBLE_TUNE_HOLD_FILE  a path: the first tune() call of a process waits (at most 120 s) while
                            it exists, so a test holds the jobs inside their first unit until it lets go
  DSV4_DOUBLE_EXCLUSIVE     a folder: the first tune() call takes an flock on a file named by this
                            process's argv (a job and every copy of it share it) and holds it to
                            the end; a copy that finds it taken appends its pid and argv to
                            overlaps.txt there (two copies of one job running at once)
"""
import argparse
import fcntl
import hashlib
import json
import os
import re
import sys
import time

DTYPE_MAP = {"float32": "torch.float32", "float16": "torch.float16", "half": "torch.half",
             "bfloat16": "torch.bfloat16"}


def get_device_name():
    return os.environ.get("DSV4_DOUBLE_DEVICE_NAME", "NVIDIA H200")


def device_count():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    return int(os.environ.get("DSV4_DOUBLE_GPUS", "1"))


def get_configs_compute_bound():
    configs = []
    for num_stages in [2, 3, 4, 5]:
        for block_m in [16, 32, 64, 128, 256]:
            for block_k in [64, 128]:
                for block_n in [32, 64, 128, 256]:
                    for num_warps in [4, 8]:
                        for group_size in [1, 16, 32, 64]:
                            configs.append({"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n,
                                            "BLOCK_SIZE_K": block_k, "GROUP_SIZE_M": group_size,
                                            "num_warps": num_warps, "num_stages": num_stages})
    return configs


def get_weight_shapes(tp_size):
    # Same DeepSeek-V3 list as the real script.
    total = [(512 + 64, 7168), ((128 + 64) * 128, 7168), (128 * (128 + 128), 512), (7168, 16384), (7168, 18432)]
    n_tp = [(18432 * 2, 7168), ((128 + 64) * 128, 7168), (128 * (128 + 128), 512), (24576, 1536),
            (12288, 7168), (4096, 7168)]
    k_tp = [(7168, 18432), (7168, 16384), (7168, 2048)]
    return total + [(n // tp_size, k) for n, k in n_tp] + [(n, k // tp_size) for n, k in k_tp]


def _maybe_crash():
    marker = os.environ.get("DSV4_DOUBLE_CRASH_ONCE")
    if marker and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("crashed once\n")
        print("RuntimeError: CUDA error: an illegal memory access was encountered (double)", flush=True)
        sys.stdout.flush()
        os._exit(1)


def unit_seconds(M, N, K):
    base = float(os.environ.get("DSV4_DOUBLE_UNIT_S", "0.05"))
    if os.environ.get("DSV4_DOUBLE_COST") == "work":
        return base * (0.6 + 0.4 * max(M, 64) * N * K / 2 ** 31)
    return base


_held = False


def _hold():
    global _held
    pattern = os.environ.get("DSV4_DOUBLE_HOLD_FOR")
    if not pattern or _held:
        return
    _held = True
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with open(os.path.join("..", "trace.jsonl")) as f:
                if any(re.search(pattern, line) for line in f):
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.05)


_claimed = []


def _claim():
    folder = os.environ.get("DSV4_DOUBLE_EXCLUSIVE")
    if not folder or _claimed:
        return
    name = hashlib.sha1("\0".join(sys.argv).encode()).hexdigest()[:16]
    lock = open(os.path.join(folder, name + ".lock"), "a")
    _claimed.append(lock)  # held (and the flock with it) until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with open(os.path.join(folder, "overlaps.txt"), "a") as f:
            f.write(f"{os.getpid()} {' '.join(sys.argv)}\n")


_waited_on_file = []


def _hold_while_file():
    path = os.environ.get("DSV4_DOUBLE_TUNE_HOLD_FILE")
    if _waited_on_file:
        return
    _waited_on_file.append(path)
    deadline = time.monotonic() + 120
    while path and os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def tune(M, N, K, block_size, out_dtype, search_space, input_type):
    _claim()
    _maybe_crash()
    _hold_while_file()
    _hold()
    calls = os.environ.get("DSV4_DOUBLE_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(f"{N} {K} {M} {os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n")
    time.sleep(unit_seconds(M, N, K))
    best = dict(search_space[(M * 7 + N + K) % len(search_space)])
    return best


def save_configs(N, K, block_n, block_k, configs, save_path, input_type="fp8"):
    os.makedirs(save_path, exist_ok=True)
    device_name = get_device_name().replace(" ", "_")
    json_file_name = f"N={N},K={K},device_name={device_name},dtype={input_type}_w8a8,block_shape=[{block_n}, {block_k}].json"
    config_file_path = os.path.join(save_path, json_file_name)
    print(f"Writing best config to {config_file_path}...", flush=True)
    with open(config_file_path, "w") as f:
        json.dump(configs, f, indent=4)
        f.write("\n")


def _bar(desc, done, total):
    pct = int(100 * done / total) if total else 100
    print(f"{desc}: {pct:3d}%|{'#' * (pct // 10):<10}| {done}/{total} [00:00<00:00]", flush=True)


def tune_on_gpu(gpu_id, batch_sizes, weight_shapes, args):
    print(f"Starting tuning on GPU {gpu_id} with batch sizes {batch_sizes}", flush=True)
    search_space = [c for c in get_configs_compute_bound() if args.block_k % c["BLOCK_SIZE_K"] == 0]
    start = time.perf_counter()
    for i, (N, K) in enumerate(weight_shapes):
        print(f"[GPU {gpu_id}] Tune for weight shape of `N: {N}, K: {K}`", flush=True)
        results = []
        for j, M in enumerate(batch_sizes):
            results.append(tune(M, N, K, [args.block_n, args.block_k], DTYPE_MAP[args.out_dtype],
                                search_space, args.input_type))
            _bar(f"GPU {gpu_id} - Batch sizes", j + 1, len(batch_sizes))
        save_configs(N, K, args.block_n, args.block_k, dict(zip(batch_sizes, results)), args.save_path,
                     args.input_type)
        _bar(f"GPU {gpu_id} - Shapes", i + 1, len(weight_shapes))
    print(f"Tuning on GPU {gpu_id} took {time.perf_counter() - start:.2f} seconds", flush=True)


def main(args):
    print(args)
    num_gpus = device_count()
    if num_gpus == 0:
        raise RuntimeError("No GPU available for tuning")
    print(f"Found {num_gpus} GPUs for parallel tuning")
    if args.batch_size is None:
        batch_sizes = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
    else:
        batch_sizes = [args.batch_size]
        num_gpus = 1
    weight_shapes = get_weight_shapes(args.tp_size)
    # The real script spreads batch sizes round-robin over a process pool; in sequence here.
    for gpu_id in range(num_gpus):
        tune_on_gpu(gpu_id, batch_sizes[gpu_id::num_gpus], weight_shapes, args)
    print("Multi-GPU tuning completed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp-size", "-tp", type=int, default=8)
    parser.add_argument("--input-type", type=str, choices=["fp8", "int8"], default="fp8")
    parser.add_argument("--out-dtype", type=str, choices=["float32", "float16", "bfloat16", "half"],
                        default="float16")
    parser.add_argument("--block-n", type=int, default=128)
    parser.add_argument("--block-k", type=int, default=128)
    parser.add_argument("--batch-size", type=int, required=False)
    parser.add_argument("--save-path", type=str, default="python/sglang/srt/layers/quantization/configs")
    args = parser.parse_args()
    main(args)
