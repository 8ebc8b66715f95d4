"""Multiple-choice log-likelihood evaluation (EleutherAI/lm-evaluation-harness, the 0.3-era `lm_eval/base.py`:
`BaseLM.loglikelihood`, `BaseLM._loglikelihood_tokens`, `CacheHook`, `MultipleChoiceTask.process_results`;
`lm_eval/utils.py`: `chunks`, `group`, `Reorderer`; `lm_eval/models/gpt2.py`: `HFLM._model_call`). Requests are
encoded, sorted by `Reorderer` (longest first, a `_collate` closure), batched by the `chunks` generator over a
`tqdm` iterator; each request is asserted non-empty, turned into `torch.tensor((context_enc +
continuation_enc)[-(self.max_length + 1):][:-1])`, right-padded to the first (longest) length with
`torch.zeros(padding_length - inplen)`; the batch goes through `F.log_softmax(self._model_call(batched_inps),
dim=-1).cpu()`, and per request the continuation slice is compared with the greedy tokens
(`(greedy_tokens == cont_toks).all()`), gathered, and answered as `(float(logits.sum()), bool(max_equal))`, passed to
`self.cache_hook.add_partial` and restored to the original order; `process_results` takes `np.argmax` of the
per-choice log-likelihoods for `acc`/`acc_norm`.
Provenance note: `base.py` was read from a stored copy of the repository; `utils.chunks/group/Reorderer`,
`CacheHook` and `process_results` were written from the collector's knowledge of the same revision.
Adaptations: GPT-2 (`HFLM`) is replaced by a minimal stand-in LM with the `BaseLM` interface (a character-level
`tok_encode`, `eot_token_id`, `max_length` 24, `batch_size` 3, `device` cpu, `_model_call` under `torch.no_grad()`
returning logits from a tiny causal model); the task's documents are written inline (4 and 3 questions with 3-4
choices); `tqdm` is left on as upstream (its bar goes to stderr); the cache hook has no database (as when `--no_cache` is used). The called function
builds the requests, calls `loglikelihood`, and aggregates the per-document metrics as `evaluator.evaluate` does
(`np.mean`). The two calls evaluate different documents."""
import collections
from typing import Iterable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm


def chunks(iter, n):
    arr = []
    for x in iter:  # BREAK
        arr.append(x)
        if len(arr) == n:
            yield arr
            arr = []

    if arr:
        yield arr


def group(arr, fn):
    res = collections.defaultdict(list)

    for ob in arr:
        res[fn(ob)].append(ob)

    return list(res.values())


class Reorderer:
    def __init__(self, arr, fn):
        self.size = len(arr)
        arr = list(enumerate(arr))
        arr = group(arr, lambda x: fn(x[1]))
        arr = [([y[0] for y in x], x[0][1]) for x in arr]
        arr.sort(key=lambda x: fn(x[1]))  # BREAK

        self.arr = arr

    def get_reordered(self):
        return [x[1] for x in self.arr]

    def get_original(self, newarr):
        res = [None] * self.size
        cov = [False] * self.size

        for (inds, _), v in zip(self.arr, newarr):
            for ind in inds:
                res[ind] = v
                cov[ind] = True

        assert all(cov)

        return res


class CacheHook:
    def __init__(self, cachinglm):
        if cachinglm is None:
            self.dbdict = None
            return

        self.dbdict = cachinglm.dbdict

    def add_partial(self, attr, req, res):
        if self.dbdict is None:
            return
        hsh = hash((attr, req))
        self.dbdict[hsh] = res


class BaseLM:
    def __init__(self):
        self.cache_hook = CacheHook(None)

    def loglikelihood(self, requests):
        new_reqs = []
        for context, continuation in requests:
            if context == "":
                # end of text as context
                context_enc = [self.eot_token_id]
            else:
                context_enc = self.tok_encode(context)

            continuation_enc = self.tok_encode(continuation)

            new_reqs.append(((context, continuation), context_enc, continuation_enc))

        return self._loglikelihood_tokens(new_reqs)

    def _loglikelihood_tokens(self, requests, disable_tqdm=False):
        # TODO: implement some kind of efficient-request-middleware that lumps together requests with the same context
        res = []

        def _collate(x):
            # the negative sign on len(toks) sorts descending - this has a few advantages:
            # - time estimates will always be over not underestimates, which is more useful for planning
            # - to know the size of a batch when going through the list, you know the first one is always the batch
            #   padded context length. this is useful to simplify the batching logic and more importantly to make
            #   automatic adaptive batches much much easier to implement
            # - any OOMs will happen right away rather than near the end

            toks = x[1] + x[2]
            return -len(toks), tuple(toks)

        # TODO: automatic (variable) batch size detection for vectorization
        reord = Reorderer(requests, _collate)
        for chunk in chunks(
            tqdm(reord.get_reordered(), disable=disable_tqdm), self.batch_size  # BREAK
        ):
            inps = []
            cont_toks_list = []
            inplens = []

            padding_length = None

            # because vectorizing is annoying, we first convert each (context, continuation) pair to padded
            # tensors, then we pack them together into a batch, call the model, and then pick it all apart
            # again because vectorizing is annoying

            for _, context_enc, continuation_enc in chunk:
                # sanity check
                assert len(context_enc) > 0
                assert len(continuation_enc) > 0
                assert len(continuation_enc) <= self.max_length

                # when too long to fit in context, truncate from the left
                inp = torch.tensor(
                    (context_enc + continuation_enc)[-(self.max_length + 1) :][:-1],
                    dtype=torch.long,
                ).to(self.device)
                (inplen,) = inp.shape

                cont = continuation_enc

                # since in _collate we make sure length is descending, the longest is always the first one.
                padding_length = (
                    padding_length if padding_length is not None else inplen
                )

                # pad length from seq to padding_length
                inp = torch.cat(
                    [
                        inp,  # [seq]
                        torch.zeros(padding_length - inplen, dtype=torch.long).to(
                            inp.device
                        ),  # [padding_length - seq]
                    ],
                    dim=0,
                )

                inps.append(inp.unsqueeze(0))  # [1, padding_length]
                cont_toks_list.append(cont)
                inplens.append(inplen)

            batched_inps = torch.cat(inps, dim=0)  # [batch, padding_length
            multi_logits = F.log_softmax(
                self._model_call(batched_inps), dim=-1
            ).cpu()  # [batch, padding_length, vocab]

            for (cache_key, _, _), logits, inp, inplen, cont_toks in zip(
                chunk, multi_logits, inps, inplens, cont_toks_list
            ):

                # Slice to original seq length
                contlen = len(cont_toks)
                logits = logits[inplen - contlen : inplen].unsqueeze(
                    0
                )  # [1, seq, vocab]

                # Check if per-token argmax is exactly equal to continuation
                greedy_tokens = logits.argmax(dim=-1)
                cont_toks = torch.tensor(cont_toks, dtype=torch.long).unsqueeze(
                    0
                )  # [1, seq]
                max_equal = (greedy_tokens == cont_toks).all()

                # Obtain log-probs at the corresponding continuation token indices
                # last_token_slice = logits[:, -1, :].squeeze(0).tolist()
                logits = torch.gather(logits, 2, cont_toks.unsqueeze(-1)).squeeze(
                    -1
                )  # [1, seq]

                # Answer: (log prob, is-exact-match)
                answer = (float(logits.sum()), bool(max_equal))

                # partial caching
                if cache_key is not None:
                    self.cache_hook.add_partial("loglikelihood", cache_key, answer)

                res.append(answer)

        return reord.get_original(res)


class TinyCharLM(BaseLM):
    """Adaptation: stand-in for HFLM (gpt2.py) with a character-level tokenizer and a tiny causal model."""

    ALPHABET = " abcdefghijklmnopqrstuvwxyz?.,"

    def __init__(self, n_embd=16):
        super().__init__()
        vocab = len(self.ALPHABET) + 1
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(64, n_embd)
        self.attn = nn.MultiheadAttention(n_embd, 2, batch_first=True)
        self.head = nn.Linear(n_embd, vocab)
        self.vocab_size = vocab

    @property
    def eot_token_id(self):
        return 0

    @property
    def max_length(self):
        return 24

    @property
    def batch_size(self):
        return 3

    @property
    def device(self):
        return torch.device("cpu")

    def tok_encode(self, string: str):
        return [self.ALPHABET.index(c) + 1 for c in string.lower() if c in self.ALPHABET]

    def tok_decode(self, tokens: Iterable[int]):
        return "".join(self.ALPHABET[t - 1] for t in tokens if t > 0)

    def _model_call(self, inps):
        with torch.no_grad():
            t = inps.shape[1]
            x = self.wte(inps) + self.wpe(torch.arange(t))
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            x = x + self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
            return self.head(x)[:, :, :self.vocab_size]


def process_results(doc, results):
    gold = doc["gold"]

    acc = 1.0 if np.argmax(results) == gold else 0.0  # BREAK
    completion_len = np.array([float(len(i)) for i in doc["choices"]])
    acc_norm = 1.0 if np.argmax(results / completion_len) == gold else 0.0  # BREAK

    return {
        "acc": acc,
        "acc_norm": acc_norm,
    }


def evaluate_multiple_choice(lm, docs):
    requests = [(doc["query"], " " + choice) for doc in docs for choice in doc["choices"]]
    answers = lm.loglikelihood(requests)
    vals = collections.defaultdict(list)
    i = 0
    for doc in docs:
        results = [answers[i + j][0] for j in range(len(doc["choices"]))]
        i += len(doc["choices"])
        for metric, value in process_results(doc, results).items():
            vals[metric].append(value)
    return {metric: np.mean(items) for metric, items in vals.items()}, answers  # BREAK


def target():
    torch.manual_seed(0)
    lm = TinyCharLM()
    docs1 = [
        {"query": "question: what is red? answer:", "choices": ["apple", "sky", "grass"], "gold": 0},
        {"query": "question: what is blue? answer:", "choices": ["sky", "sun", "coal"], "gold": 0},
        {"query": "question: a cat says? answer:", "choices": ["moo", "meow", "quack", "woof"], "gold": 1},
        {"query": "question: ice is? answer:", "choices": ["hot", "cold"], "gold": 1},
    ]
    docs2 = [
        {"query": "the opposite of up is", "choices": ["down", "left", "over"], "gold": 0},
        {"query": "two plus two is", "choices": ["three", "four", "five"], "gold": 1},
        {"query": "a long question that is truncated from the left because it is long, the answer is",
         "choices": ["yes", "no"], "gold": 0},
    ]
    return [
        (evaluate_multiple_choice, (lm, docs1), {}),
        (evaluate_multiple_choice, (lm, docs2), {}),
    ]


EXPECT = ("caller: a host-side evaluation loop (Python lists and sorting, a `tqdm`-wrapped generator, per-request "
          "`float(logits.sum())` and `bool(max_equal)` answers, NumPy metrics); compile `_model_call` (the model "
          "forward) and keep `_loglikelihood_tokens` eager")
