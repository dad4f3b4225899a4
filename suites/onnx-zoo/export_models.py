#!/usr/bin/python3
# Builds crucible's onnx-zoo suite: real torchvision models and two torch.nn transformers with seeded random
# weights, exported to ONNX with PyTorch's own outputs beside each (ONNX backend-test layout), cached per model.
"""Export the onnx-zoo models.

  /usr/bin/python3 suites/onnx-zoo/export_models.py --out DIR [--only NAME] [--force]
  /usr/bin/python3 suites/onnx-zoo/export_models.py --out DIR --tables suites/onnx-zoo

Each model lands in DIR/NAME/ as
  model.onnx                       the graph (weights as initializers inside it, or in NAME.weights beside it
                                   as ONNX external data when they are over EXTERNAL_BYTES)
  test_data_set_0/input_0.pb       the seeded input, an ONNX TensorProto named like the graph input
  test_data_set_0/output_0.pb      PyTorch's fp32 output for that input, a TensorProto named like the output
  stamp.json                       written last: the script/torch key, the files and their sizes, and figures
                                   (opset, parameters, ONNX ops, fp32-vs-fp64 error, timings)
A model whose stamp matches this script and torch version and whose files are all there is not exported again.
Each export is built in DIR/.NAME.tmp-PID and renamed into place, so an interrupted run leaves no half model.
--tables DIR2 reads the stamps in DIR and writes DIR2/models.txt and DIR2/ops_used.txt, and prints the
README's tables. Exit status: 0 when every selected model is exported (or cached), 1 when any failed, 2 on
bad usage.
"""
import argparse
import gc
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
import traceback
import zlib

# One thread, before torch starts its pools: the suite is built on shared two-core machines.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

OPSETS = (17, 16, 15, 14, 13)       # the first the exporter takes is used and recorded
EXTERNAL_BYTES = 100 * 1024 * 1024  # initializers over this go to NAME.weights (ONNX external data)
STAMP = "stamp.json"


# ---------------------------------------------------------------------------------------------------------
# The two transformers, built from torch.nn.

class BertEncoder(nn.Module):
    """BERT-base shaped encoder: token + position embedding, LayerNorm, 12 post-LN nn.TransformerEncoderLayer
    (d 768, 12 heads, ff 3072, GELU), a final LayerNorm. Input: int64 token ids [batch, seq]."""

    def __init__(self, vocab=30522, max_pos=512, d=768, heads=12, ff=3072, layers=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0), persistent=False)
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, activation="gelu", batch_first=True,
                                           layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d, eps=1e-12),
                                             enable_nested_tensor=False)
        # BERT's initializer, after nn.TransformerEncoder's deep copies (which start all 12 layers equal; the
        # exporter then folds equal initializers into one, each use through an Identity). Biases N(0, 0.02^2)
        # rather than BERT's zeros, so that none is constant.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.normal_(m.bias, std=0.02)
            if isinstance(m, nn.MultiheadAttention):
                nn.init.normal_(m.in_proj_weight, std=0.02)
                nn.init.normal_(m.in_proj_bias, std=0.02)

    def forward(self, ids):
        seq = ids.shape[1]
        x = self.tok(ids) + self.pos(self.position_ids[:, :seq])
        return self.encoder(self.emb_norm(x))


class Gpt2Block(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.act = nn.GELU(approximate="tanh")
        self.register_buffer("causal", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)).view(1, 1, ctx, ctx),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.causal[:, :, :t, :t], float("-inf"))
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(self.act(self.c_fc(self.ln_2(x))))


class Gpt2Decoder(nn.Module):
    """GPT-2 (124M) shaped decoder: token + position embedding, 12 pre-LN blocks with causal self-attention
    (d 768, 12 heads, MLP 3072, tanh GELU), final LayerNorm, LM head tied to the token embedding.
    Input: int64 token ids [batch, seq]; output: logits [batch, seq, vocab]."""

    def __init__(self, vocab=50257, ctx=1024, d=768, heads=12, layers=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList(Gpt2Block(d, heads, ctx) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():  # GPT-2's initializer
            if name.endswith("weight") and p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.arange(t, dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


# ---------------------------------------------------------------------------------------------------------
# The models. input: shape and dtype; a float input is N(0, 1), an int64 one uniform token ids below `vocab`.

def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


IMG = (1, 3, 224, 224)
MODELS = [
    # name, builder, input shape, input dtype, note
    ("resnet18", tv("resnet18"), IMG, "float32", ""),
    ("resnet50", tv("resnet50"), IMG, "float32", ""),
    ("mobilenet_v2", tv("mobilenet_v2"), IMG, "float32", ""),
    ("mobilenet_v3_large", tv("mobilenet_v3_large"), IMG, "float32", ""),
    ("efficientnet_b0", tv("efficientnet_b0"), IMG, "float32", ""),
    ("densenet121", tv("densenet121"), IMG, "float32", ""),
    ("squeezenet1_1", tv("squeezenet1_1"), IMG, "float32", ""),
    ("shufflenet_v2_x1_0", tv("shufflenet_v2_x1_0"), IMG, "float32", ""),
    ("regnet_y_400mf", tv("regnet_y_400mf"), IMG, "float32", ""),
    ("convnext_tiny", tv("convnext_tiny"), IMG, "float32", ""),
    ("vit_b_16", tv("vit_b_16"), IMG, "float32", ""),
    ("swin_t", tv("swin_t"), IMG, "float32", ""),
    ("alexnet", tv("alexnet"), IMG, "float32", ""),
    ("googlenet", tv("googlenet", aux_logits=False, init_weights=True), IMG, "float32", ""),
    ("mnasnet0_5", tv("mnasnet0_5"), IMG, "float32", ""),
    ("bert_base_encoder", BertEncoder, (1, 128), "int64", "vocab 30522"),
    ("gpt2_decoder", Gpt2Decoder, (1, 128), "int64", "vocab 50257"),
]
VOCAB = {"bert_base_encoder": 30522, "gpt2_decoder": 50257}
TOKEN_MODELS = set(VOCAB)


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def redraw_constants(model, gen):
    """Initializers leave some tensors constant: batch-norm statistics (0 and 1), norm affine parameters
    (1 and 0), zero biases, ViT's zero head, ConvNeXt's 1e-6 layer scale. An importer that drops or
    mishandles such a tensor would still match PyTorch, so they are redrawn, seeded: batch-norm mean
    N(0, 0.1^2) and variance U(0.5, 1.5), norm scales U(0.5, 1.5) and shifts N(0, 0.1^2), any other
    constant parameter N(0, 0.05^2). Returns how many tensors were redrawn."""
    def u(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=gen, dtype=torch.float64).to(t.dtype) * (hi - lo) + lo)

    def n(t, std):
        t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype) * std)

    done = set()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                if m.running_mean is not None:
                    n(m.running_mean, 0.1)
                    u(m.running_var, 0.5, 1.5)
                    done.update((id(m.running_mean), id(m.running_var)))
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    u(m.weight, 0.5, 1.5)
                    done.add(id(m.weight))
                if getattr(m, "bias", None) is not None:
                    n(m.bias, 0.1)
                    done.add(id(m.bias))
        for p in model.parameters():
            if id(p) in done or not p.is_floating_point() or p.numel() == 0:
                continue
            if bool((p == p.reshape(-1)[0]).all()):
                n(p, 0.05)
                done.add(id(p))
    return len(done)


LOGIT_STD = 2.0


def rescale_classifier(model, y):
    """Random initialization leaves a classifier's logits at std 0.01 (AlexNet) to 600 (ResNet-50, whose
    residual stream grows block by block); against crucible's atol = rtol = 1e-3 the first would hide a 5%
    error. The last Linear or Conv2d (the classifier: its output reaches the logits through ReLU and pooling
    at most, which commute with a positive scale) is scaled so the logits' std is LOGIT_STD, as in a trained
    net. Returns the factor."""
    last = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))][-1]
    k = LOGIT_STD / float(y.std())
    with torch.no_grad():
        last.weight.mul_(k)
        if last.bias is not None:
            last.bias.mul_(k)
    return k


def make_input(name, shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed + 1)
    if dtype == "int64":
        return torch.randint(0, VOCAB[name], shape, generator=gen, dtype=torch.int64)
    return torch.randn(shape, generator=gen, dtype=torch.float32)


def run(model, x):
    # Grad stays on, as in the export's trace: under no_grad nn.MultiheadAttention and
    # nn.TransformerEncoderLayer take their fused fast path, which is not what gets exported.
    with torch.enable_grad():
        y = model(x)
    if isinstance(y, (tuple, list)):
        y = y[0]
    return y.detach()


def error_figures(y32, y64):
    a = y32.double().numpy().ravel()
    b = y64.numpy().ravel()
    d = np.abs(a - b)
    mag = np.abs(b)
    big = mag >= 1e-3 * mag.max() if mag.size else mag
    return {
        "max_abs": float(d.max()),
        # relative error on the elements not near zero (|ref| >= 1e-3 max|ref|)
        "max_rel": float((d[big] / mag[big]).max()) if big.any() else 0.0,
        # the smallest tol with |fp32 - fp64| <= tol + tol |fp64| everywhere (crucible's rtol = atol = tol)
        "tol_needed": float((d / (1.0 + mag)).max()),
        "ref_absmax": float(mag.max()),
        "ref_std": float(b.std()),
    }


def suggest_tolerance(tol_needed):
    # 1e-3 unless PyTorch's own fp32 needs more than a quarter of it against fp64 (a backend as far from fp64
    # as PyTorch, the other way, is twice as far from PyTorch); then the next decade that leaves 4x.
    tol = 1e-3
    while tol < 4 * tol_needed:
        tol *= 10
    return tol


def ops_of(graph, acc=None):
    acc = {} if acc is None else acc
    for node in graph.node:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        acc[op] = acc.get(op, 0) + 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                ops_of(attr.g, acc)
            for g in attr.graphs:
                ops_of(g, acc)
    return acc


def runtime_ops_of(graph):
    """The ops left once everything not computed from the graph input is folded: with static shapes a
    Shape's output is a constant, and so is whatever depends only on shapes, constants and initializers
    (the Shape/Gather/Concat/Reshape chains, Range, masks built from shapes). These need kernels; the rest of
    ops_of only needs the importer's constant folding."""
    live = {i.name for i in graph.input} - {t.name for t in graph.initializer}
    acc = {}
    for node in graph.node:  # ONNX keeps nodes in topological order
        if node.op_type == "Shape" or not any(i in live for i in node.input if i):
            continue
        live.update(o for o in node.output if o)
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        acc[op] = acc.get(op, 0) + 1
    return acc


# ---------------------------------------------------------------------------------------------------------
# Export, cache, layout.

def script_key():
    with open(os.path.abspath(__file__), "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    return f"script {h} torch {torch.__version__} torchvision {torchvision.__version__} onnx {onnx.__version__}"


def cached(model_dir, key):
    try:
        with open(os.path.join(model_dir, STAMP)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    if stamp.get("key") != key:
        return None
    for rel, size in stamp.get("files", {}).items():
        p = os.path.join(model_dir, rel)
        if not os.path.isfile(p) or os.path.getsize(p) != size:
            return None
    return stamp


def remove_leftovers(out, name):
    """Removes .NAME.tmp-PID and .NAME.old-PID folders of runs that were killed (their PID is gone)."""
    for entry in os.listdir(out):
        for tag in (f".{name}.tmp-", f".{name}.old-"):
            if entry.startswith(tag) and entry[len(tag):].isdigit():
                pid = int(entry[len(tag):])
                try:
                    os.kill(pid, 0)
                    alive = pid != os.getpid()
                except ProcessLookupError:
                    alive = False
                except PermissionError:
                    alive = True
                if not alive:
                    shutil.rmtree(os.path.join(out, entry), ignore_errors=True)


def export_one(name, build, shape, dtype, note, out, key):
    seed = seed_of(name)
    t_start = time.time()
    torch.manual_seed(seed)
    model = build().eval()
    gen = torch.Generator().manual_seed(seed + 2)
    redrawn = redraw_constants(model, gen)
    params = sum(p.numel() for p in model.parameters())
    x = make_input(name, shape, dtype, seed)
    y = run(model, x)
    logit_scale = 1.0
    if name not in TOKEN_MODELS:
        logit_scale = rescale_classifier(model, y)
        y = run(model, x)
        if abs(float(y.std()) / LOGIT_STD - 1) > 1e-3:
            raise RuntimeError(f"rescaling the classifier left the logits' std at {float(y.std()):.3g}")
    if not torch.isfinite(y).all():
        raise RuntimeError("PyTorch's fp32 output has non-finite values")

    tmp = os.path.join(out, f".{name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "test_data_set_0"))
    try:
        in_name = "input_ids" if dtype == "int64" else "input"
        raw = os.path.join(tmp, "exported.onnx")
        errors = []
        opset = None
        t0 = time.time()
        for o in OPSETS:
            try:
                torch.onnx.export(model, (x,), raw, export_params=True, opset_version=o, do_constant_folding=True,
                                  training=torch.onnx.TrainingMode.EVAL, input_names=[in_name],
                                  output_names=["output"], keep_initializers_as_inputs=False)
                opset = o
                break
            except Exception as e:  # noqa: BLE001 - the exporter raises many kinds
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                errors.append(f"opset {o}: {type(e).__name__}: {first}")
        export_s = time.time() - t0
        if opset is None:
            raise RuntimeError("torch.onnx.export failed at every opset; " + " | ".join(errors[:1]))

        proto = onnx.load(raw)
        os.remove(raw)
        init_bytes = sum(len(t.raw_data) if t.raw_data else numpy_helper.to_array(t).nbytes
                         for t in proto.graph.initializer)
        model_path = os.path.join(tmp, "model.onnx")
        external = init_bytes > EXTERNAL_BYTES
        if external:
            onnx.save_model(proto, model_path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=f"{name}.weights", size_threshold=1024, convert_attribute=False)
        else:
            onnx.save_model(proto, model_path)
        onnx.checker.check_model(model_path, full_check=True)
        ops = ops_of(proto.graph)
        runtime_ops = runtime_ops_of(proto.graph)
        graph_in = [i.name for i in proto.graph.input]
        graph_out = [o.name for o in proto.graph.output]
        if graph_in != [in_name] or graph_out != ["output"]:
            raise RuntimeError(f"graph inputs {graph_in} / outputs {graph_out}, expected [{in_name}] / [output]")
        del proto

        def write_pb(rel, arr, tname):
            with open(os.path.join(tmp, rel), "wb") as f:
                f.write(numpy_helper.from_array(arr, tname).SerializeToString())

        write_pb("test_data_set_0/input_0.pb", x.numpy(), in_name)
        write_pb("test_data_set_0/output_0.pb", y.numpy(), "output")

        # PyTorch's own fp32 error against fp64, on the same weights and input.
        t1 = time.time()
        model64 = model.double()
        y64 = run(model64, x if dtype == "int64" else x.double())
        fp64_s = time.time() - t1
        err = error_figures(y, y64)
        del model64, y64

        files = {}
        for root, _, names in os.walk(tmp):
            for fn in names:
                p = os.path.join(root, fn)
                files[os.path.relpath(p, tmp)] = os.path.getsize(p)
        stamp = {
            "key": key, "name": name, "note": note, "seed": seed, "opset": opset, "opset_errors": errors,
            "input": {"name": in_name, "shape": list(shape), "dtype": dtype},
            "output": {"name": "output", "shape": list(y.shape), "dtype": "float32"},
            "parameters": params, "redrawn_constant_tensors": redrawn, "classifier_scale": logit_scale,
            "initializer_bytes": init_bytes, "external_data": f"{name}.weights" if external else None,
            "model_bytes": files["model.onnx"] + files.get(f"{name}.weights", 0),
            "ops": dict(sorted(ops.items())), "nodes": sum(ops.values()),
            "runtime_ops": dict(sorted(runtime_ops.items())), "runtime_nodes": sum(runtime_ops.values()),
            "fp32_vs_fp64": err, "tolerance": suggest_tolerance(err["tol_needed"]),
            "export_s": round(export_s, 2), "fp64_s": round(fp64_s, 2), "total_s": round(time.time() - t_start, 2),
            "files": files,
        }
        with open(os.path.join(tmp, STAMP), "w") as f:
            json.dump(stamp, f, indent=1)
            f.write("\n")
        final = os.path.join(out, name)
        if os.path.exists(final):
            old = os.path.join(out, f".{name}.old-{os.getpid()}")
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old)
        else:
            os.rename(tmp, final)
        return stamp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mb(n):
    return f"{n / 1e6:.1f} MB"


def line(stamp, how):
    ext = " (external data)" if stamp["external_data"] else ""
    return (f"{stamp['name']:<20} opset {stamp['opset']}  {mb(stamp['model_bytes']):>9}{ext}  export "
            f"{stamp['export_s']:.1f} s  total {stamp['total_s']:.1f} s  {how}")


# ---------------------------------------------------------------------------------------------------------
# Tables for the README, models.txt and ops_used.txt.

def tables(out, dest):
    stamps = []
    for name, *_ in MODELS:
        try:
            with open(os.path.join(out, name, STAMP)) as f:
                stamps.append(json.load(f))
        except OSError:
            print(f"# {name}: no export in {out}", file=sys.stderr)
    with open(os.path.join(dest, "models.txt"), "w") as f:
        f.write("# onnx-zoo models (written by export_models.py --tables): NAME input_shape dtype tolerance\n"
                "# tolerance is crucible's rtol = atol; see README.md for how it was chosen.\n")
        for s in stamps:
            shape = "x".join(str(d) for d in s["input"]["shape"])
            f.write(f"{s['name']} {shape} {s['input']['dtype']} {s['tolerance']:g}\n")
    users, runtime_users = {}, {}
    for s in stamps:
        for op in s["ops"]:
            users.setdefault(op, []).append(s["name"])
        for op in s["runtime_ops"]:
            runtime_users.setdefault(op, []).append(s["name"])
    with open(os.path.join(dest, "ops_used.txt"), "w") as f:
        f.write(f"# ONNX op_type, the number of the {len(stamps)} onnx-zoo models using it, the number in which\n"
                f"# it survives folding of what is not computed from the input (shapes are static), the models.\n"
                f"# Written by export_models.py --tables; an op with 0 in the third column only needs folding.\n")
        for op, names in sorted(users.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            f.write(f"{op} {len(names)} {len(runtime_users.get(op, []))} {','.join(names)}\n")

    print("| model | opset | size | weights | input | params | nodes | export s | fp32 vs fp64: max abs | max rel | "
          "tol needed | tolerance |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in stamps:
        e = s["fp32_vs_fp64"]
        shape = "x".join(str(d) for d in s["input"]["shape"])
        print(f"| {s['name']} | {s['opset']} | {mb(s['model_bytes'])} | "
              f"{'external' if s['external_data'] else 'inline'} | {shape} {s['input']['dtype']} | "
              f"{s['parameters'] / 1e6:.1f} M | {s['nodes']} | {s['export_s']:.1f} | {e['max_abs']:.1e} | "
              f"{e['max_rel']:.1e} | {e['tol_needed']:.1e} | {s['tolerance']:g} |")
    print()
    print("| model | nodes | after folding | ONNX ops: count in the file (count after folding) |")
    print("|---|---|---|---|")
    for s in stamps:
        rt = s["runtime_ops"]
        ops = ", ".join(f"{op} {c}" + (f" ({rt.get(op, 0)})" if rt.get(op, 0) != c else "")
                        for op, c in s["ops"].items())
        print(f"| {s['name']} | {s['nodes']} | {s['runtime_nodes']} | {ops} |")


def committable(out):
    """Why `out` could end up committed (inside this repository and not ignored by git), or None."""
    repo = os.path.dirname(os.path.abspath(__file__))
    while not os.path.exists(os.path.join(repo, ".git")):
        if os.path.dirname(repo) == repo:
            return None
        repo = os.path.dirname(repo)
    if os.path.commonpath([repo, out]) != repo:
        return None
    probe = os.path.join(out, "model.onnx")
    try:
        ignored = subprocess.run(["git", "-C", repo, "check-ignore", "-q", probe]).returncode == 0
    except OSError:
        return None
    return None if ignored else f"inside the repository {repo} and not ignored by git"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="where the models go (never inside the repository)")
    ap.add_argument("--only", action="append", metavar="NAME", help="export just this model (repeatable)")
    ap.add_argument("--force", action="store_true", help="export even what is cached")
    ap.add_argument("--tables", metavar="DIR2", help="write DIR2/models.txt and ops_used.txt from the stamps in "
                    "--out and print the README tables; exports nothing")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    names = [m[0] for m in MODELS]
    if args.list:
        print("\n".join(names))
        return 0
    if not args.out:
        ap.error("--out DIR is required")
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            print(f"unknown model {', '.join(unknown)}; known: {' '.join(names)}", file=sys.stderr)
            return 2
    out = os.path.abspath(args.out)
    if args.tables:
        os.makedirs(args.tables, exist_ok=True)
        tables(out, args.tables)
        return 0
    why = committable(out)
    if why:
        print(f"--out {args.out}: {why}; generated models must never be committed (use /tmp or build/)",
              file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    key = script_key()
    failed = []
    for name, build, shape, dtype, note in MODELS:
        if args.only and name not in args.only:
            continue
        remove_leftovers(out, name)
        final = os.path.join(out, name)
        stamp = None if args.force else cached(final, key)
        if stamp:
            print(line(stamp, "cached"), flush=True)
            continue
        t0 = time.time()
        try:
            stamp = export_one(name, build, shape, dtype, note, out, key)
            print(line(stamp, "exported"), flush=True)
        except Exception as e:  # noqa: BLE001 - one model's failure must not stop the rest
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            print(f"{name:<20} FAILED after {time.time() - t0:.1f} s: {type(e).__name__}: {msg}", flush=True)
            if os.environ.get("ONNX_ZOO_TRACEBACK"):
                traceback.print_exc()
            failed.append(name)
        gc.collect()
    if failed:
        print(f"{len(failed)} model(s) failed: {' '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
