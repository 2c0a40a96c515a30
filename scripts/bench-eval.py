#!/usr/bin/env python3
"""Helper of scripts/bench-eval.sh.

candidates CAP cuda|llmc|triton|triton-configs N OUT: N candidates as edited copies of CAP/src/ in OUT/<NN-name>/
  (the one file each edits, relative to src/, in OUT.rel):
  N-3 edits that build and run (for CUDA's fma_loop: #pragma unroll factors, __restrict__, an early
  return, and a few that change the result; for Triton's fused_add_relu: load/store cache hints and
  equivalent expressions, and a few that change the result), then one that hangs, one that faults
  and one that does not compile. llmc: edits of llm.c's layernorm_forward_kernel6 (llmc/layernorm.cuh,
  a code base's kernel): #pragma unroll factors on its six loops and the cache hints of its loads and
  stores (each the same result), four that change it, and the hang, fault and compile error. triton-configs: N-3 Triton configs of compile options (num_warps,
  num_stages) in OUT.configs, one a line, and the three edits that hang, fault, do not compile.
pin VAL CONFIG: write a config's compile options into VAL/pinned.json (what validate compiles).
report WORK N WORKERS: the figures (JSON on stdout) from the eval documents, the validate outputs
  and the GPU utilization samples the shell script left in WORK.
"""
import itertools
import json
import os
import re
import shutil
import sys
from datetime import datetime


def kernel_file(cap, needle, prefer):
    hits = []
    for d, _, files in os.walk(os.path.join(cap, "src")):
        for f in files:
            p = os.path.join(d, f)
            try:
                if needle in open(p, encoding="utf-8").read():
                    hits.append(p)
            except (UnicodeDecodeError, OSError):
                pass
    if not hits:
        sys.exit(f"no file of {cap}/src holds {needle}")
    hits.sort(key=lambda p: (os.path.basename(p) != prefer, p))
    return os.path.relpath(hits[0], os.path.join(cap, "src"))


def cuda_edits(n):
    loop = "  for (int k = 0; k < iters; k++) a = fmaf(a, b, 0.5f);"
    good = []
    for u in [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32]:
        good.append((f"unroll{u}", [(loop, f"  #pragma unroll {u}\n{loop}")]))
    for u in [1, 2, 3, 4, 6, 8, 16, 32]:
        good.append((f"restrict-unroll{u}", [("float *y, int n, int iters", "float *__restrict__ y, int n, int iters"), (loop, f"  #pragma unroll {u}\n{loop}")]))
    for u in [1, 2, 3, 4, 6, 8, 16, 32]:
        good.append((f"early-unroll{u}", [("if (i >= n) return;", "if (i >= n || iters < 0) return;"), (loop, f"  #pragma unroll {u}\n{loop}")]))
    wrong = [
        ("wrong-c", [("fmaf(a, b, 0.5f)", "fmaf(a, b, 0.5001f)")]),
        ("wrong-b", [("b = 1.0001f", "b = 1.0002f")]),
        ("wrong-iters", [("k < iters", "k <= iters")]),
        ("wrong-add", [("fmaf(a, b, 0.5f)", "fmaf(a, b, 0.25f)")]),
    ]
    regular = (wrong[:2] + good[: max(0, n - 3 - 4)] + wrong[2:])[: n - 3]
    special = [
        ("hang", [(loop, "  for (int k = 0; ; k++) { a = fmaf(a, b, 0.5f); if (clock64() < 0) break; }")]),
        ("fault", [("  y[i] = a;\n}", "  if (i == 0) *(volatile float *)(y + (1ll << 40)) = a;\n  y[i] = a;\n}")]),
        ("nocompile", [(loop, loop.replace("0.5f);", "0.5f) this_is_not_cuda;"))]),
    ]
    return regular + special


def triton_edits(n):
    loads = [("", "default"), (', eviction_policy="evict_first"', "evfirst"), (', eviction_policy="evict_last"', "evlast"), (', cache_modifier=".cg"', "cg"), (", other=0.0", "other")]
    exprs = [("tl.maximum(x + y, 0.0)", "max"), ("tl.maximum(y + x, 0.0)", "maxyx"), ("tl.where(x + y > 0.0, x + y, 0.0)", "where"), ("tl.maximum(0.0, x + y)", "max0")]
    stores = [("", ""), (', cache_modifier=".cs"', "-cs")]
    good = []
    for (ld, ln), (ex, en), (st, sn) in itertools.product(loads, exprs, stores):
        if sn and ln not in ("default", "cg"):
            continue
        good.append((f"{ln}-{en}{sn}", [
            ("x = tl.load(x_ptr + offs, mask=m)", f"x = tl.load(x_ptr + offs, mask=m{ld})"),
            ("y = tl.load(y_ptr + offs, mask=m)", f"y = tl.load(y_ptr + offs, mask=m{ld})"),
            ("tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=m)", f"tl.store(out_ptr + offs, {ex}, mask=m{st})"),
        ]))
    wrong = [
        ("wrong-floor", [("tl.maximum(x + y, 0.0)", "tl.maximum(x + y, 0.1)")]),
        ("wrong-sub", [("tl.maximum(x + y, 0.0)", "tl.maximum(x - y, 0.0)")]),
        ("wrong-norelu", [("tl.maximum(x + y, 0.0)", "x + y")]),
        ("wrong-mul", [("tl.maximum(x + y, 0.0)", "tl.maximum(x * y, 0.0)")]),
    ]
    regular = (wrong[:2] + good[: max(0, n - 3 - 4)] + wrong[2:])[: n - 3]
    store = "    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=m)"
    special = [
        ("hang", [(store, "    k = tl.load(x_ptr) * 0.0 + 1.0\n    while k > 0.0:\n        k = tl.atomic_add(out_ptr, 0.0) * 0.0 + 1.0\n" + store)]),
        ("fault", [(store, "    tl.store(out_ptr + offs + (1 << 40), x, mask=m)\n" + store)]),
        ("nocompile", [(store, "    x = tl.no_such_function(x)\n" + store)]),
    ]
    return regular + special


def triton_configs(n):
    """N-3 configs of compile options (the tile size BLOCK stays the captured one: the captured grid holds)."""
    return [f"num_warps={w} num_stages={st}" for w in (1, 2, 4, 8, 16, 32) for st in (1, 2, 3, 4, 5)][: n - 3]


LLMC_KERNEL = "__global__ void layernorm_forward_kernel6("
C_LOOP = "    for(int c = threadIdx.x * x128::size; c < C; c += WARP_SIZE * x128::size) {"
K_LOOP = "        for(int k = 0; k < x128::size; ++k) {"


def nth_sub(text, a, b, nth):
    """Replace the nth (0-based) occurrence of a in text by b."""
    at = -1
    for _ in range(nth + 1):
        at = text.find(a, at + 1)
        if at < 0:
            return None
    return text[:at] + b + text[at + len(a):]


def llmc_edits(n):
    """Edits of layernorm_forward_kernel6 alone, each a function of the kernel's text (None: it does not apply)."""
    def unroll(loops):
        def f(t):
            for line, nth, u in loops:
                t = t and nth_sub(t, line, f"#pragma unroll {u}\n{line}", nth)
            return t
        return f
    def subs(*pairs):
        def f(t):
            for a, b in pairs:
                t = t and (t.replace(a, b, 1) if a in t else None)
            return t
        return f
    good = []
    for u in (1, 2, 4, 8):
        for nth in range(3):
            good.append((f"unroll-k{nth}-{u}", unroll([(K_LOOP, nth, u)])))
    for u in (1, 2, 4):
        for nth in range(3):
            good.append((f"unroll-c{nth}-{u}", unroll([(C_LOOP, nth, u)])))
    hints = [("nocs-load", ("load128cs(inp + c)", "load128(inp + c)")), ("nocs-store", ("store128cs(out + c, out_data)", "store128(out + c, out_data)")),
             ("plain-mean", ("__stcs(mean + idx, m)", "mean[idx] = m")), ("plain-rstd", ("__stcs(rstd + idx, s)", "rstd[idx] = s"))]
    for name, pair in hints:
        good.append((name, subs(pair)))
    for u in (2, 4, 8):
        good.append((f"unroll-all-{u}", unroll([(K_LOOP, 2, u), (K_LOOP, 1, u), (K_LOOP, 0, u)])))
    wrong = [
        ("wrong-eps", subs(("const float eps = 1e-5f;", "const float eps = 1e-3f;"))),
        # a shift, not the bias left out: the captured launch is of a model initialized from scratch, whose
        # layernorm biases are all zero (llm.c's random init), so leaving them out changes nothing there
        ("wrong-shift", subs(("+ (float)b[k]; // scale and shift it", "+ (float)b[k] + 0.01f; // scale and shift it"))),
        ("wrong-mean", subs(("float m = sum / C;", "float m = sum / (C + 1);"))),
        ("wrong-swap", subs(("n * (float)w[k] + (float)b[k]", "n * (float)b[k] + (float)w[k]"))),
    ]
    regular = (wrong[:2] + good[: max(0, n - 3 - 4)] + wrong[2:])[: n - 3]
    special = [
        ("hang", subs(("    __syncthreads();\n", "    __syncthreads();\n    if (C > 0) { for (;;) { if (clock64() < 0) break; } }\n"))),
        ("fault", subs(("    // cache the mean and rstd", "    if (idx == 0 && threadIdx.x == 0) *(volatile float *)(mean + (1ll << 40)) = m;\n    // cache the mean and rstd"))),
        ("nocompile", subs(("float m = sum / C;", "float m = sum / C this_is_not_cuda;"))),
    ]
    return regular + special


def write_llmc(cap, n, out):
    rel = os.path.join("llmc", "layernorm.cuh")
    text = open(os.path.join(cap, "src", rel), encoding="utf-8").read()
    start = text.find(LLMC_KERNEL)
    if start < 0:
        sys.exit(f"src/{rel} has no {LLMC_KERNEL}")
    end = text.find("\n}\n", start) + 3
    os.makedirs(out, exist_ok=True)
    edits = llmc_edits(n)
    for i, (name, f) in enumerate(edits):
        body = f(text[start:end])
        if body is None:
            sys.exit(f"llmc candidate {name} does not apply to layernorm_forward_kernel6 in src/{rel}")
        d = os.path.join(out, f"{i:02d}-{name}")
        shutil.copytree(os.path.join(cap, "src"), d)
        open(os.path.join(d, rel), "w", encoding="utf-8").write(text[:start] + body + text[end:])
    open(out + ".rel", "w").write(rel + "\n")
    print(f"[bench-eval] llmc: {len(edits)} candidates of src/{rel} in {out}")


def pin(val, config):
    """Pin `config` (NAME=VALUE words of compile options) in VAL/pinned.json: what validate then compiles."""
    path = os.path.join(val, "pinned.json")
    p = json.load(open(path))
    for word in config.split():
        k, v = word.split("=")
        p["options"][k] = int(v)
    json.dump(p, open(path, "w"), indent=2)


def candidates(cap, fe, n, out):
    if fe == "triton-configs":
        # the Triton batch: N-3 configs, then the hang, fault and compile-error edits of the source
        os.makedirs(out, exist_ok=True)
        with open(out + ".configs", "w") as f:
            f.write("\n".join(triton_configs(n)) + "\n")
        edits = triton_edits(n)[-3:]
        rel = kernel_file(cap, "def fused_add_relu", "fused_add_relu.py")
        return write_edits(cap, rel, edits, out, "triton")
    if fe == "llmc":
        return write_llmc(cap, n, out)
    needle, prefer, edits = ("void fma_loop", "verdicts.cu", cuda_edits(n)) if fe == "cuda" else ("def fused_add_relu", "triton_app.py", triton_edits(n))
    rel = kernel_file(cap, needle, prefer)
    write_edits(cap, rel, edits, out, fe)


def write_edits(cap, rel, edits, out, fe):
    text = open(os.path.join(cap, "src", rel), encoding="utf-8").read()
    os.makedirs(out, exist_ok=True)
    for i, (name, subs) in enumerate(edits):
        t = text
        for a, b in subs:
            if a not in t:
                sys.exit(f"{fe} candidate {name}: {a!r} is not in src/{rel}")
            t = t.replace(a, b, 1)
        d = os.path.join(out, f"{i:02d}-{name}")
        shutil.copytree(os.path.join(cap, "src"), d)
        open(os.path.join(d, rel), "w", encoding="utf-8").write(t)
    open(out + ".rel", "w").write(rel + "\n")
    print(f"[bench-eval] {fe}: {len(edits)} candidates of src/{rel} in {out}")


COMPILE = {"E_BUILD", "E_KERNEL_NOT_FOUND", "E_RDC", "E_CONFINED", "E_PATCH"}


def validate_verdict(rc, out):
    if rc in (124, 137):
        return "timeout"
    try:
        doc = json.loads(out)
    except ValueError:
        return f"no-document(exit {rc})"
    if rc in (0, 1):
        return doc.get("verdict", f"exit {rc}")
    code = (doc.get("error") or {}).get("code", "")
    if code in COMPILE:
        return "compile-error"
    if code == "E_PARAM_LAYOUT":
        return "layout-change"
    if code == "E_CUDA":
        return "fault"
    return f"error:{code}"


def busy(path, span):
    try:
        xs = [float(l) for l in open(path) if l.strip().replace(".", "", 1).isdigit()]
    except OSError:
        xs = []
    # utilization.gpu: the percent of the last sample period in which a kernel ran
    return (sum(xs) / len(xs) / 100.0) if xs else None


def timing_summary(ts):
    """Median launch pairs and seconds of timed comparisons (None where a document had none), their total seconds, how many were decided."""
    ts = [t for t in ts if isinstance(t, dict)]
    pairs = sorted(t["pairs"] for t in ts if isinstance(t.get("pairs"), (int, float)))
    secs = sorted(t["seconds"] for t in ts if isinstance(t.get("seconds"), (int, float)))
    waits = sorted(t["waitSeconds"] for t in ts if isinstance(t.get("waitSeconds"), (int, float)))
    dets = sorted(t["detectable"] for t in ts if isinstance(t.get("detectable"), (int, float)))
    med = lambda x: x[len(x) // 2] if x else None
    return {"compared": len(ts), "medianPairs": med(pairs), "medianSeconds": med(secs), "seconds": round(sum(secs), 2), "decided": sum(1 for t in ts if t.get("decided")),
            "waitSeconds": round(sum(waits), 2), "medianDetectable": med(dets), "maxDetectable": dets[-1] if dets else None}


def report(work, n, workers):
    out = {"candidates": n, "workers": workers, "batches": {}}
    for fe in [f for f in ("cuda", "llmc", "triton", "triton-configs") if os.path.exists(os.path.join(work, f"{f}-eval.span"))]:
        t0, t1 = map(float, open(os.path.join(work, f"{fe}-eval.span")).read().split())
        v0, v1 = map(float, open(os.path.join(work, f"{fe}-validate.span")).read().split())
        lines = [json.loads(l) for l in open(os.path.join(work, f"{fe}-eval.json")) if l.strip()]
        doc = lines[-1]
        ev = {c["label"]: c["verdict"] for c in doc.get("candidates", [])}
        val, val_compares = {}, []
        for row in open(os.path.join(work, f"{fe}-validate.tsv")):
            label, rc, text = row.rstrip("\n").split("\t", 2)
            val[label] = validate_verdict(int(rc), text)
            try:
                val_compares.append(json.loads(text).get("compare"))
            except (ValueError, AttributeError):
                pass
        differ = {k: {"eval": ev.get(k), "validate": val[k]} for k in val if ev.get(k) != val[k]}
        # the eval's builds, one per candidate: which build made each module (pruned TU or build.sh) and their seconds; the workers' run seconds
        per = {}
        for r in doc.get("records", []):
            per.setdefault(r.get("candidate"), r.get("build") or {})
        builders = {}
        for b in per.values():
            k = b.get("builder", "none")
            builders[k] = builders.get(k, 0) + 1
        builds = {"builders": builders, "seconds": sum(b.get("seconds") or 0 for b in per.values()), "runSeconds": sum(r.get("runSeconds") or 0 for r in doc.get("records", []))}
        # the timed comparisons: launch pairs, their seconds and how many were decided, in the eval's records and in the validates' documents
        timing = {"eval": timing_summary([r.get("timing") for r in doc.get("records", [])]), "validate": timing_summary(val_compares)}
        # the eval's timeline (s from its start): when its records were written (first, median, last), the slowest
        # candidate's (its verdict), and the pruned builds' check as its stderr says it
        ats = []
        for r in doc.get("records", []):
            try:
                ats.append((datetime.fromisoformat(r["at"].replace("Z", "+00:00")).timestamp() - t0, r.get("label"), r.get("verdict"), r.get("runSeconds") or 0))
            except (KeyError, ValueError):
                pass
        ats.sort()
        check = None
        try:
            m = re.search(r"machine code for the kernel is build\.sh's: ([\d.]+) s against ([\d.]+) s", open(os.path.join(work, f"{fe}-eval.log")).read())
            check = {"pruned": float(m.group(1)), "buildSh": float(m.group(2))} if m else None
        except OSError:
            pass
        timeline = {
            "firstRecord": ats[0][0] if ats else None,
            "medianRecord": ats[len(ats) // 2][0] if ats else None,
            "lastRecord": ats[-1][0] if ats else None,
            "last": [{"at": round(a, 2), "label": l, "verdict": v, "runSeconds": round(rs, 2)} for a, l, v, rs in ats[-3:]],
            "check": check,
        }
        es, vs = t1 - t0, v1 - v0
        out["batches"][fe] = {
            "candidates": len(val),
            "eval": {"seconds": es, "perMinute": len(val) / es * 60, "gpuBusy": busy(os.path.join(work, f"{fe}-eval.util"), (t0, t1)), "exit": int(open(os.path.join(work, f"{fe}-eval.rc")).read()), "summary": doc.get("summary"), "evalSeconds": doc.get("seconds")},
            "validate": {"seconds": vs, "perMinute": len(val) / vs * 60, "gpuBusy": busy(os.path.join(work, f"{fe}-validate.util"), (v0, v1))},
            "builds": builds,
            "timing": timing,
            "timeline": timeline,
            "speedup": vs / es,
            "equal": len(val) - len(differ),
            "differ": differ,
            "evalVerdicts": ev,
            "validateVerdicts": val,
            "ranked": [{k: c[k] for k in ("rank", "label", "verdict", "speedup", "low", "high", "registers", "stackFrameBytes")} for c in doc.get("candidates", [])],
        }
    return out


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "candidates":
        candidates(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif cmd == "pin":
        pin(sys.argv[2], sys.argv[3])
    elif cmd == "report":
        print(json.dumps(report(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])), indent=2))
    else:
        sys.exit(__doc__)
