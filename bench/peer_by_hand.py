#!/usr/bin/python3
# PyTorch at its best by hand, outside crucible: the figures crucible's libtorch peers are checked
# against (issue 53). Each allocator runs in a fresh process, each model in several user recipes.
"""Times torchvision models the way a PyTorch user tunes them for CPU inference.

For each allocator (glibc, jemalloc with the tutorial's MALLOC_CONF, jemalloc without it,
tcmalloc) the script starts a fresh Python with that allocator preloaded and, per model, times
  eager            model(x) under torch.inference_mode()
  frozen           torch.jit.trace + torch.jit.freeze + optimize_for_inference
  frozen_cl        the same with the model and input in channels_last
with OpenMP's threads bound one per core (OMP_PROC_BIND=close, OMP_PLACES=cores, unless
the environment sets them), and prints one line per (allocator, recipe, model): the median of --repeat calls after --warmup,
then the best per model. Shapes follow crucible's vision suite (batch 16/8, 3x224x224).

  /usr/bin/python3 bench/peer_by_hand.py --threads 2 --models mobilenet_v2,resnet18
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# crucible's vision suite: model -> default batch (suites/models/model_zoo.cpp).
VISION_BATCH = {"resnet18": 16, "resnet50": 8, "mobilenet_v2": 16, "densenet121": 8}

LIB = "/usr/lib/x86_64-linux-gnu"
# The PyTorch CPU performance tuning guide's jemalloc setting.
TUTORIAL_MALLOC_CONF = ("oversize_threshold:1,background_thread:true,metadata_thp:auto,"
                        "dirty_decay_ms:9000000000,muzzy_decay_ms:9000000000")
ALLOCATORS = {
    "glibc": {},
    "jemalloc_tuned": {"LD_PRELOAD": f"{LIB}/libjemalloc.so.2", "MALLOC_CONF": TUTORIAL_MALLOC_CONF},
    "jemalloc": {"LD_PRELOAD": f"{LIB}/libjemalloc.so.2"},
    "tcmalloc": {"LD_PRELOAD": f"{LIB}/libtcmalloc_minimal.so.4"},
}
RECIPES = ("eager", "frozen", "frozen_cl")


def time_calls(fn, x, warmup, repeat):
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(args):
    """Runs in the child, under one allocator: one JSON line per (recipe, model)."""
    import torch
    import torchvision

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for name in args.models.split(","):
        batch = args.batch or VISION_BATCH[name]
        model = getattr(torchvision.models, name)().eval()
        x = torch.randn(batch, 3, 224, 224)
        for recipe in args.recipes.split(","):
            with torch.inference_mode() if recipe == "eager" else torch.no_grad():
                if recipe == "eager":
                    fn = model
                    inp = x
                else:
                    m, inp = model, x
                    if recipe == "frozen_cl":
                        m = model.to(memory_format=torch.channels_last)
                        inp = x.contiguous(memory_format=torch.channels_last)
                    traced = torch.jit.trace(m, inp)
                    fn = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
                ms = time_calls(fn, inp, args.warmup, args.repeat)
            print(json.dumps({"allocator": args.child, "recipe": recipe, "model": name,
                              "batch": batch, "ms": round(ms, 3)}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(VISION_BATCH))
    p.add_argument("--batch", type=int, default=0, help="0: crucible's default per model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--allocators", default=",".join(ALLOCATORS))
    p.add_argument("--recipes", default=",".join(RECIPES))
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    for m in args.models.split(","):
        if m not in VISION_BATCH:
            sys.exit(f"peer_by_hand: unknown model '{m}' (known: {', '.join(VISION_BATCH)})")
    for r in args.recipes.split(","):
        if r not in RECIPES:
            sys.exit(f"peer_by_hand: unknown recipe '{r}' (known: {', '.join(RECIPES)})")
    if args.child:
        measure(args)
        return

    rows = []
    for alloc in args.allocators.split(","):
        if alloc not in ALLOCATORS:
            sys.exit(f"peer_by_hand: unknown allocator '{alloc}' (known: {', '.join(ALLOCATORS)})")
        # Threads bound one per core, as the tuning guide advises and crucible's workers run
        # (on a 2-vCPU VM unbound threads made MobileNetV2 2.6x slower); the caller's binding wins.
        env = dict(OMP_PROC_BIND="close", OMP_PLACES="cores")
        env.update(os.environ, OMP_NUM_THREADS=str(args.threads), **ALLOCATORS[alloc])
        preload = ALLOCATORS[alloc].get("LD_PRELOAD")
        if preload and not os.path.exists(preload):
            sys.exit(f"peer_by_hand: {preload}: no such allocator (apt-get install its package)")
        out = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", alloc], env=env,
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            row = json.loads(line)
            rows.append(row)
            print(f"{row['model']:<14} b{row['batch']:<3} {alloc:<15} {row['recipe']:<10} "
                  f"{row['ms']:9.2f} ms", flush=True)
    bind = os.environ.get("OMP_PROC_BIND", "close")
    print(f"\nbest by hand ({args.threads} threads, OMP_PROC_BIND={bind}, "
          f"median of {args.repeat} calls):")
    for m in args.models.split(","):
        best = min((r for r in rows if r["model"] == m), key=lambda r: r["ms"])
        print(f"{m:<14} {best['ms']:9.2f} ms  {best['allocator']} {best['recipe']}")


if __name__ == "__main__":
    main()
