"""Regional vs whole-model compile on real models built from a config (nothing downloaded).

Runs `graphstitch perf --regional` (the same code path as the command) on a GPT-2 and a BERT
from `transformers`, built from small configs, and prints side by side: cold/warm compile
time, steady-state latency, graphs and recompiles, and the ratios regional/whole.

    python benchmarks/regional.py [--backend inductor] [--models gpt2,bert] [--json FILE]

The factories double as graphstitch targets: `graphstitch perf benchmarks/regional.py:gpt2 --regional`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may come from a model hub


def gpt2():
    import torch
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_embd=256, n_head=4, n_positions=256, vocab_size=1000, bos_token_id=0, eos_token_id=0)
    model = GPT2Model(cfg).eval()
    return model, (torch.randint(0, 1000, (2, 128)),), {"use_cache": False}


def bert():
    import torch
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=6, hidden_size=256, num_attention_heads=4, intermediate_size=1024,
                     vocab_size=1000, max_position_embeddings=256)
    model = BertModel(cfg).eval()
    return model, (torch.randint(0, 1000, (2, 128)),), {}


def rows(results: list[dict]) -> list[dict]:
    out = []
    for r in results:
        m, ra = r["model"], r["ratios"]
        out += [
            {"name": f"whole speedup vs eager ({m})", "value": ra["whole_speedup_vs_eager"], "unit": "×"},
            {"name": f"regional speedup vs eager ({m})", "value": ra["regional_speedup_vs_eager"], "unit": "×"},
            {"name": f"regional vs whole: latency, whole/regional ({m})", "value": ra["regional_vs_whole_latency"], "unit": "×"},
            {"name": f"regional vs whole: cold compile, whole/regional ({m})", "value": ra["regional_vs_whole_compile_cold"], "unit": "×"},
            {"name": f"regional vs whole: warm compile, whole/regional ({m})", "value": ra["regional_vs_whole_compile_warm"], "unit": "×"},
        ]
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--models", default="gpt2,bert")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    from rich.console import Console

    from graphstitch.perf import failed, render_terminal, run_perf
    con = Console(highlight=False)
    results = []
    for m in args.models.split(","):
        res = run_perf(f"{Path(__file__).resolve()}:{m}", backend=args.backend, regional=True,
                       repeats=args.repeats, max_seconds=args.max_seconds,
                       progress=lambda s, m=m: print(f"[{m}] {s}", file=sys.stderr, flush=True))
        render_terminal(res, con)
        err = failed(res)
        if err:
            raise SystemExit(f"{m}: {err['side']} failed: {err.get('message')}")
        results.append(dict(res, model=m))
    out = {"benchmark": "regional", "backend": args.backend, "results": results, "rows": rows(results)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
