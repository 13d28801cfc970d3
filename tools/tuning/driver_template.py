"""The driver written into the run folder when the tuning script cannot take our shapes.

It imports SGLang's own tuning script (never edits it), calls its ``tune()`` for each assigned
(N, K, M) unit and saves each finished unit at once into this process's own save path, in
SGLang's file format. Units already in that file are skipped, so a retried or re-attached job
never redoes finished work. Its search space keeps a candidate for every weight block SGLang serves
with Triton, block 32 included (the script's own filter leaves none there). Rendered with jinja2 (strict), checked by ``python -m py_compile``.
"""

DRIVER_TEMPLATE = '''\
#!/usr/bin/env python3
"""FP8 block-GEMM tuning driver, written by dsv4-agent for review. Generated, do not edit.

Calls {{ script_name | py }}'s own tune() with the units listed in a units file and saves every
finished unit into --save-path (one JSON per N,K in SGLang's format). Units already saved there
are skipped. Usage:
    python3 tune_driver.py --script PATH --units units_gpu0.json --save-path out/gpu0
"""
import argparse
import importlib.util
import inspect
import json
import os
import sys
import time


def load_script(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("sglang_tuning_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the script's main() is guarded by __name__ == "__main__"
    return module


def device_name(module):
    """SGLang's own name with spaces to underscores, as its kernel looks files up (never shortened:
    a Max-Q and a Server card of one family must not share a table)."""
    getter = getattr(module, "get_device_name", None)
    if getter is None:
        try:
            from sglang.srt.utils import get_device_name as getter
        except ImportError:
            import torch
            getter = torch.cuda.get_device_name
    return getter().replace(" ", "_")


def search_space(module, block_k):
    """The script's candidates whose BLOCK_SIZE_K divides block_k (SGLang's kernel steps the weight
    scales every block_k // BLOCK_SIZE_K tiles). The script offers BLOCK_SIZE_K 64 and 128 only, so at
    block_k 32 none fits: then its grid with BLOCK_SIZE_K = block_k, the value SGLang's own default
    config takes for a block (kernels/ops/gemm/fp8_kernel.py)."""
    space = module.get_configs_compute_bound()
    fitting = [c for c in space if block_k % c["BLOCK_SIZE_K"] == 0]
    if fitting:
        return fitting
    narrowed = {}
    for config in space:
        config = dict(config, BLOCK_SIZE_K=block_k)
        narrowed.setdefault(tuple(sorted(config.items())), config)
    return list(narrowed.values())


def file_name(n, k, device, block_n, block_k, input_type):
    return "N={},K={},device_name={},dtype={}_w8a8,block_shape=[{}, {}].json".format(
        n, k, device, input_type, block_n, block_k)


def read_saved(path):
    try:
        with open(path) as f:
            return {int(m): cfg for m, cfg in json.load(f).items()}
    except FileNotFoundError:
        return {}
    except ValueError:
        print("[dsv4-agent] ignoring unreadable partial file {}".format(path), flush=True)
        return {}


def write_saved(path, configs):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({str(m): configs[m] for m in sorted(configs)}, f, indent=4)
        f.write("\\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic: a kill never leaves a torn file


def call_tune(module, unit, search_space, out_dtype, input_type):
    values = {"M": unit["m"], "batch_size": unit["m"], "N": unit["n"], "K": unit["k"],
              "block_size": [unit["block_n"], unit["block_k"]], "out_dtype": out_dtype,
              "search_space": search_space, "input_type": input_type}
    params = inspect.signature(module.tune).parameters
    return module.tune(**{name: values[name] for name in params if name in values})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--units", required=True)
    parser.add_argument("--save-path", required=True)
    parser.add_argument("--out-dtype", default={{ out_dtype | py }})
    parser.add_argument("--input-type", default={{ input_type | py }})
    args = parser.parse_args()
    with open(args.units) as f:
        units = json.load(f)["units"]
    module = load_script(args.script)
    os.makedirs(args.save_path, exist_ok=True)
    device = device_name(module)
    out_dtype = getattr(module, "DTYPE_MAP", {}).get(args.out_dtype, args.out_dtype)
    spaces = {}
    done = 0
    start = time.time()
    for unit in units:
        path = os.path.join(args.save_path, file_name(unit["n"], unit["k"], device, unit["block_n"],
                                                      unit["block_k"], args.input_type))
        saved = read_saved(path)
        if unit["m"] in saved:
            done += 1
            print("[dsv4-agent] unit skipped N={} K={} M={} (already saved) ({}/{})".format(
                unit["n"], unit["k"], unit["m"], done, len(units)), flush=True)
            continue
        block_k = unit["block_k"]
        if block_k not in spaces:
            spaces[block_k] = search_space(module, block_k)
            print("[dsv4-agent] block_k {}: {} candidate configs".format(block_k, len(spaces[block_k])), flush=True)
        print("[dsv4-agent] tuning N={} K={} M={}".format(unit["n"], unit["k"], unit["m"]), flush=True)
        best = call_tune(module, unit, spaces[block_k], out_dtype, args.input_type)
        saved = read_saved(path)
        saved[unit["m"]] = best
        write_saved(path, saved)
        done += 1
        print("[dsv4-agent] unit done N={} K={} M={} ({}/{})".format(
            unit["n"], unit["k"], unit["m"], done, len(units)), flush=True)
    print("[dsv4-agent] all units done in {:.1f} s".format(time.time() - start), flush=True)


if __name__ == "__main__":
    main()
'''
