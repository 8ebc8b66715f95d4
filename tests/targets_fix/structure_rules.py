"""Shapes of code the structural rules key on (tests/test_fix_v3.py), one factory each.
Written for the tests, not taken from the corpus: the names here are deliberately unlike
those of the fix corpus and the unseen set."""
import io
import os
import time
import warnings

import numpy as np
import torch
from torch.autograd import Variable as LegacyVar


class GatedStack(torch.nn.Module):
    """A per-block gate drawn as a tensor, then `if not gate:` running the block; the block's
    own output tuple is bound only inside the branch."""

    def __init__(self, d=6, n=3, p=0.4):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(n))
        self.p = p

    def forward(self, h):
        for blk in self.blocks:
            coin = torch.rand(())
            drop = bool(self.training) and bool(coin < self.p)  # GATE
            if not drop:
                res = (torch.tanh(blk(h)), coin)
                h = res[0]
        return h


def gated():
    torch.manual_seed(0)
    return [(GatedStack().train(), (torch.randn(2, 6),), {})]


def pad_to_64(t):
    out = t if t.data_ptr() % 64 == 0 else t.contiguous()  # COPY
    return out * 2


def copied():
    torch.manual_seed(0)
    return [(pad_to_64, (torch.randn(5, 3),), {})]


def keep_or_mask(x, keep):
    if not torch.jit.is_tracing() and keep.all():  # TRACER
        return x
    return x.masked_fill(~keep, 0.0)


def tracer():
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    return [(keep_or_mask, (x, torch.ones(3, 4, dtype=torch.bool)), {}),
            (keep_or_mask, (x, torch.rand(3, 4) > 0.3), {})]


def clamp_unless_traced(x):
    # The tracer path skips the clamp: counting compiling as tracing changes the outputs.
    if not torch.jit.is_scripting() and (x < 0).any():  # TRACER_SKIPS
        x = x.clamp(min=0)
    return x * 3


def tracer_refused():
    torch.manual_seed(0)
    return [(clamp_unless_traced, (torch.randn(4, 4),), {})]


class Pool(torch.nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d, 2, batch_first=True)

    def forward(self, x, ids):
        blank = ids == 0
        any_blank = blank.any()
        out, _ = self.attn(x, x, x, key_padding_mask=blank if any_blank else None, need_weights=False)  # MASK
        return out


def masked():
    torch.manual_seed(0)
    ids = torch.tensor([[3, 4, 0, 0], [5, 6, 7, 8]])
    return [(Pool().eval(), (torch.randn(2, 4, 6), ids), {})]


def aligned_rows(t):
    if t.data_ptr() % 32:  # COPY_IF
        t = t.clone()
    return t.flip(0)


def copied_if():
    torch.manual_seed(0)
    return [(aligned_rows, (torch.randn(4, 2),), {})]


class Normalised(torch.nn.Module):
    """`.item()` of a one-element, not 0-d, tensor: the kept value must stay 0-d."""

    def forward(self, x, count):
        denom = torch.clamp(count * 2, min=1).item()  # ITEM_1ELT
        return x.sum(0) / denom, x.mean() * denom


def one_element():
    torch.manual_seed(0)
    return [(Normalised(), (torch.randn(3, 2), torch.tensor([3.0])), {})]


def histogram(labels, n_bins: int):
    return torch.bincount(labels, minlength=n_bins).float() / labels.numel()  # BINCOUNT


def binned():
    torch.manual_seed(0)
    return [(histogram, (torch.tensor([0, 2, 2, 1, 4]), 6), {})]


log = __import__("logging").getLogger("structure_rules")


class Checked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.seen = 0

    def check_range(self, x):
        """Warns about out-of-range inputs; changes nothing."""
        if (x.abs() > 100).any():  # REPORT
            log.warning("inputs out of range")

    def count_range(self, x):
        if (x.abs() > 100).any():  # STATEFUL
            log.warning("inputs out of range")
            self.seen += 1

    def forward(self, x):
        self.check_range(x)
        return self.proj(x).relu()


class Counted(Checked):
    def forward(self, x):
        self.count_range(x)
        return self.proj(x).relu()


def reported():
    torch.manual_seed(0)
    return [(Checked(), (torch.randn(2, 4),), {})]


def counted():
    torch.manual_seed(0)
    return [(Counted(), (torch.randn(2, 4),), {})]


def clip_outliers(x, limit: float):
    out = x.clone()
    big = out.abs() > limit
    if big.any():  # GUARDED
        out[big] = limit
        out.masked_fill_(big, limit)
    return out * 2


def guarded():
    torch.manual_seed(0)
    return [(clip_outliers, (torch.randn(4, 4) * 3, 2.0), {}), (clip_outliers, (torch.randn(4, 4), 9.0), {})]


def host_spans(n_rows: int, width: int, lengths):
    import numpy as np
    total = int(width * 0.5 + np.random.rand())  # HOST_A
    out = np.zeros((n_rows, width), dtype=bool)
    for i in range(n_rows):
        keep = int(lengths[i].item())  # HOST_B
        out[i, : min(keep, total)] = True
    return out


class SpanMasked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(3, 3)
        self.out = torch.nn.Linear(3, 3)

    def forward(self, x, lengths):
        h = self.inp(x)
        spans = torch.from_numpy(host_spans(h.shape[0], h.shape[1], lengths))
        h = h.masked_fill(spans[..., None], 0.0)
        return self.out(h)


def spans():
    torch.manual_seed(0)
    import numpy as np
    np.random.seed(0)
    return [(SpanMasked(), (torch.randn(2, 5, 3), torch.tensor([3, 5])), {})]


def reported_loud():
    torch.manual_seed(0)
    return [(Checked(), (torch.randn(2, 4) * 1000,), {})]


def token_loss(pred, target, ignore: float = -1.0):
    valid = target != ignore
    return torch.nn.functional.smooth_l1_loss(pred[valid], target[valid])  # MASKED_LOSS


def masked_loss():
    torch.manual_seed(0)
    t = torch.randn(4, 6)
    t[t < -0.5] = -1.0
    return [(token_loss, (torch.randn(4, 6), t), {})]


def row_energy(x, keep):
    return (x[keep] ** 2).mean()  # ROW_MASK


def row_masked():
    # A mask over rows: as it is, it would broadcast over the last dim (wrong elements).
    torch.manual_seed(0)
    return [(row_energy, (torch.randn(4, 4), torch.tensor([True, False, True, True])), {})]


def positive_share(scores, labels):
    hits = labels > 0
    n_hits = len(hits.nonzero())  # COUNTED
    return torch.nn.functional.softplus(scores).sum() / max(n_hits, 1)


def counted_rows():
    torch.manual_seed(0)
    return [(positive_share, (torch.randn(10), torch.randint(0, 3, (10,))), {})]


def hinge_total(margin, target):
    active = target > 0
    # nothing active: no loss
    if not active.any():  # EARLY
        return margin.sum() * 0.0
    gap = torch.relu(1.0 - margin)
    return torch.where(active, gap, 0).sum() / active.sum()


def early_return():
    torch.manual_seed(0)
    return [(hinge_total, (torch.randn(6), torch.tensor([1, 0, 2, 0, 0, 1])), {}),
            (hinge_total, (torch.randn(6), torch.zeros(6, dtype=torch.long)), {})]


def per_row_or_zero(x, keep):
    if not keep.any():  # EARLY_SHAPE
        return x.new_zeros(())
    rows = x * keep[:, None]
    return rows.sum(1)


def early_shape():
    # The early value is 0-d, the late one a row vector: one torch.where cannot be both.
    torch.manual_seed(0)
    return [(per_row_or_zero, (torch.randn(3, 2), torch.tensor([False, False, False])), {})]


def scrub(tokens, noise):
    tokens[noise > 0.5] = 0   # writes into its input
    return tokens * 2


def scrubbed():
    torch.manual_seed(0)
    return [(scrub, (torch.randint(1, 9, (4, 5)), torch.rand(4, 5)), {})]


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tag = torch.nn.Embedding(2, 4)

    def forward(self, feats, kinds):
        feats = feats * 1.0
        feats[kinds == 1] += self.tag.weight[1]  # TAGGED
        return feats


def tagged():
    torch.manual_seed(0)
    return [(Tagger(), (torch.randn(2, 3, 4), torch.tensor([[0, 1, 1], [1, 0, 0]])), {})]


def swap_in(tokens, pool, pick):
    tokens = tokens.clone()
    tokens[pick] = pool[pick]  # SWAPPED
    return tokens


def swapped():
    torch.manual_seed(0)
    return [(swap_in, (torch.randint(0, 9, (3, 5)), torch.randint(0, 9, (3, 5)), torch.rand(3, 5) > 0.5), {})]


def checked_scale(x):
    y = x * 2
    assert not torch.isinf(y).any(), "overflow"  # ASSERTED
    return y


def asserted():
    torch.manual_seed(0)
    return [(checked_scale, (torch.randn(4),), {})]


def legacy_wrap(x, w):
    from torch.autograd import Variable
    return x @ Variable(w)  # LEGACY


def legacy():
    torch.manual_seed(0)
    return [(legacy_wrap, (torch.randn(2, 3), torch.randn(3, 2)), {})]


def _running_mean(values):
    it = iter(values)
    n, acc = 1, next(it)
    for n, v in enumerate(it, 2):  # noqa: B007 - n is the count after the loop
        acc = acc + v
    return acc / n


def _row_norm(r):
    torch._dynamo.graph_break()   # a break inside the generator's items
    return r.abs().sum()


def rows_mean(x):
    return _running_mean(_row_norm(r) for r in x)  # GEN_ARG


def gen_arg():
    torch.manual_seed(0)
    return [(rows_mean, (torch.randn(3, 4),), {})]


class Memo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(16, 4))
        self.register_buffer("filled", torch.tensor(0))
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, n: int):
        if n <= self.filled.item():  # MEMO
            return self.table[:n]
        rows = torch.arange(n, dtype=torch.float32)[:, None] * self.scale
        self.table[:n] = rows.detach()
        self.filled.fill_(n)
        return rows


def memo():
    torch.manual_seed(0)
    m = Memo()
    return [(m, (6,), {}), (m, (4,), {})]


def stale_memo():
    # A cache that claims rows it never computed: a hit returns zeros, a miss the rows.
    torch.manual_seed(0)
    m = Memo()
    m.filled.fill_(16)
    return [(m, (6,), {})]


class Penalised(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        penalty = torch.tensor([0.0], device=x.device, requires_grad=self.training)  # GRAD_FLAG
        return penalty + self.proj(x).pow(2).mean()


def penalised():
    torch.manual_seed(0)
    return [(Penalised(), (torch.randn(2, 3),), {})]


def bounded(x):
    torch._check_tensor_all(x.abs() < 100)  # CHECKED_ALL
    return x.tanh()


def checked_all():
    torch.manual_seed(0)
    return [(bounded, (torch.randn(5),), {})]


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRU(4, 6, batch_first=True)
        self.head = torch.nn.Linear(6, 2)

    def forward(self, seq):
        out, _ = self.cell(seq)  # RNN
        return self.head(out[:, -1])


def recurrent():
    torch.manual_seed(0)
    return [(Recurrent().eval(), (torch.randn(2, 5, 4),), {})]


def binary_share(y):
    if not torch.equal(y, y ** 2):  # EQUAL
        raise ValueError("y must hold only 0 and 1")
    return y.mean()


def binary():
    torch.manual_seed(0)
    return [(binary_share, ((torch.rand(6) > 0.5).float(),), {})]


def align_to_peak(signal, scores):
    # rotate the signal so that its strongest lag comes first
    lag = scores.argmax()
    return torch.roll(signal, -int(lag), dims=-1)  # ROLL


def rolled():
    torch.manual_seed(0)
    return [(align_to_peak, (torch.randn(3, 8), torch.randn(8)), {}),
            (align_to_peak, (torch.randn(3, 8), torch.randn(8)), {})]


def top_columns(table, scores):
    order = scores.argsort(descending=True)
    picked = torch.stack([table[:, order[j]] for j in range(2)], dim=-1)  # COLUMN
    return picked.sum(-1)


def columns():
    torch.manual_seed(0)
    return [(top_columns, (torch.randn(4, 6), torch.randn(6)), {})]


def best_rows(table, ranks):
    # row r of each group gets the group's entry its rank names: a plain index, then a 0-d tensor
    out = torch.zeros_like(table)
    for g in range(table.size(0)):
        for r in range(table.size(1)):
            out[g, r] = table[g, ranks[g][r]]  # RANK_PICK
    return out


def pad_masks(x, lengths):
    # each row's positions past its length zeroed: a slice whose start is read from a tensor
    mask = torch.ones_like(x)
    for i in range(x.size(0)):
        mask[i, :, lengths[i]:] = 0  # PAD_FILL
    return x * mask


def padded():
    torch.manual_seed(0)
    return [(pad_masks, (torch.randn(3, 2, 6), torch.tensor([6, 2, 4])), {}),
            (pad_masks, (torch.randn(3, 2, 6), torch.tensor([1, 5, 3])), {})]


def ranked():
    torch.manual_seed(0)
    return [(best_rows, (torch.randn(2, 3, 4), torch.stack([torch.randperm(3) for _ in range(2)])), {})]


class MidRiser(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("levels", torch.tensor(15.0))

    def forward(self, x):
        scale = x.abs().amax(dim=-1, keepdim=True) / self.levels
        zero = torch.full_like(scale, (self.levels + 1) / 2)  # FILL
        return torch.round(x / scale) + zero


def mid_riser():
    torch.manual_seed(0)
    return [(MidRiser(), (torch.randn(2, 5),), {})]


VERBOSE = False


def checked_softmax(x):
    y = x.softmax(-1)
    if torch.isnan(y).any() and VERBOSE:  # FLAG
        print("softmax produced a NaN")
    return y * 2


def flagged():
    torch.manual_seed(0)
    return [(checked_softmax, (torch.randn(3, 4),), {})]


def valid_mean(loss, labels):
    n = labels[labels >= 0].numel()  # NUMEL
    return loss.sum() / max(n, 1)


def counted_numel():
    torch.manual_seed(0)
    return [(valid_mean, (torch.rand(6), torch.tensor([0, -1, 2, 1, -1, 0])), {})]


LOUD = True


def checked_softmax_loud(x):
    y = x.softmax(-1)
    if torch.isnan(y).any() and LOUD:  # FLAG_ON
        print("softmax produced a NaN")
    return y * 2


def flagged_on():
    torch.manual_seed(0)
    return [(checked_softmax_loud, (torch.randn(3, 4),), {})]


def grad_ratio(g, w):
    gn = g.norm()
    if gn == 0:  # GRAD_FACTORY
        ratio = 1.0
    else:
        ratio = w.norm() / gn
    return w - 0.1 * ratio * g


def grad_factory():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    lin(torch.randn(4, 3)).sum().backward()   # the factory itself runs autograd
    return [(grad_ratio, (lin.weight.grad.clone(), lin.weight.detach().clone()), {})]


class hush(warnings.catch_warnings):
    """Silences user warnings while a size is read (a filter change Dynamo cannot trace)."""

    def __enter__(self):
        out = super().__enter__()  # HUSH_ENTER
        warnings.simplefilter("ignore", category=UserWarning)
        return out


def fold_rows(x, rows):
    with hush():  # HUSH
        rows = int(rows)
    return x.view(rows, -1).sum(0)


def hushed():
    torch.manual_seed(0)
    return [(fold_rows, (torch.randn(4, 6), 2), {}), (fold_rows, (torch.randn(4, 6), 4), {})]


def log_buckets(x):
    n = np.ceil(np.log2(x.shape[-1])).astype(int).item()  # NP_SCALAR
    return x[..., :n] * 2


def np_scalar():
    torch.manual_seed(0)
    return [(log_buckets, (torch.randn(3, 10),), {})]


class mute(warnings.catch_warnings):
    def __enter__(self):
        out = super().__enter__()  # MUTE_ENTER
        warnings.simplefilter("ignore")
        return out


def noisy_rows(x, rows):
    with mute():
        warnings.warn("rows read on the host")  # noqa: B028 - attributed to this line: silenced eagerly
        rows = int(rows)
    return x.view(rows, -1).sum(0)


def muted():
    torch.manual_seed(0)
    return [(noisy_rows, (torch.randn(4, 6), 2), {})]


def paced(x, t0):
    print("run started at", round(t0, 3))   # a number that differs between two builds
    if x.sum() > 0:  # PACED
        y = x * 2
    else:
        y = -x
    return y


def paced_factory():
    torch.manual_seed(0)
    return [(paced, (torch.randn(4), time.time()), {})]


# ----- region splits over real code shapes (a returning tail, gaps apart, a callee compiled alone)

TALLIES: dict[str, float] = {}


def tally_hits(scores, labels):
    """Records a hit rate on the host (a metrics helper returning nothing)."""
    picked = scores.argmax(1)
    hits = (picked == labels).nonzero().numel()  # TALLY
    TALLIES["hit_rate"] = hits / labels.numel()


class ScoredHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 4)

    def scored_loss(self, scores, labels):
        tally_hits(scores, labels)
        return torch.nn.functional.cross_entropy(scores, labels)

    def forward(self, x, labels):
        scores = self.proj(x).relu()
        return self.scored_loss(scores, labels)  # TAIL


def tail_split():
    torch.manual_seed(0)
    head = ScoredHead()
    return [(head, (torch.randn(5, 6), torch.tensor([0, 1, 2, 3, 0])), {}),
            (head, (torch.randn(5, 6), torch.tensor([3, 3, 1, 0, 2])), {})]


class TwoChecks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        if h.max() > 10:  # CHECK_A
            print("large activations after a")
        h = self.b(h.tanh())
        if h.min() < -10:  # CHECK_B
            print("small activations after b")
        return h.sum(-1)


def two_gaps():
    torch.manual_seed(0)
    m = TwoChecks()
    return [(m, (torch.randn(3, 4),), {}), (m, (torch.randn(2, 4) * 50,), {})]


def top_pairs(emb, k):
    print("mining", tuple(emb.shape))  # MINING
    sims = emb @ emb.t()
    vals = sims.topk(k, dim=1).values.tolist()  # PAIRS
    best = []
    for row in vals:
        for v in row:
            best.append(v)
    return sorted(best, reverse=True)[:k]


def mine_pairs(tokens, table):
    emb = table[tokens].mean(1)
    return top_pairs(emb, 2)  # TOP


def outer_split():
    torch.manual_seed(0)
    table = torch.randn(10, 4)
    return [(mine_pairs, (torch.tensor([[1, 2], [3, 4], [5, 6]]), table), {}),
            (mine_pairs, (torch.tensor([[7, 8], [9, 1], [2, 2]]), table), {})]


class Clipper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.outer = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.inner(x)
        if h.abs().max() > 3:  # CLIP
            print("clipping activations")
        return self.outer(h.clamp(-3, 3))


class ClippedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = torch.nn.Linear(4, 4)
        self.clip = Clipper()

    def forward(self, x):
        y = self.pre(x).relu()
        z = self.clip(y)
        return z.softmax(-1)


def chained():
    torch.manual_seed(0)
    net = ClippedNet()
    return [(net, (torch.randn(3, 4),), {}), (net, (torch.randn(3, 4) * 40,), {})]


class ClippedTwice(ClippedNet):
    def again(self, z):
        return self.clip(z * 0.5)  # AGAIN

    def forward(self, x):
        y = self.pre(x).relu()
        z = self.clip(y)
        return self.again(z).softmax(-1)


def chained_twice():
    torch.manual_seed(0)
    net = ClippedTwice()
    return [(net, (torch.randn(3, 4),), {}), (net, (torch.randn(3, 4) * 40,), {})]


class Stepper(torch.nn.Module):
    """A decode loop with a host-side stop test, compiled as a bound method."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 4)
        self.head = torch.nn.Linear(4, 1)

    def generate(self, h, max_steps, keep_scores=False):
        h = h.tanh() * 2
        if keep_scores:
            scores = []
        outs = []
        for _ in range(max_steps):
            h = self.cell(h, h)
            outs.append(h)
            if keep_scores:
                scores.append(self.head(h))
            if self.head(h).sigmoid().mean() > 0.36:  # STOP
                break
        seq = torch.stack(outs)
        return seq.sum(0) / len(outs), len(outs)


def stepped():
    torch.manual_seed(0)
    m = Stepper().eval()
    return [(m.generate, (torch.randn(2, 4), 6), {}), (m.generate, (torch.randn(2, 4) * 3, 6), {})]


def _mean_over(x, keep):
    n = keep.nonzero().size(0)  # NZ_COUNT
    total = (x * keep).sum()
    if n > 0:
        return total / n
    return total * 0


def mean_counted():
    torch.manual_seed(0)
    x = torch.randn(6)
    return [(_mean_over, (x, x > 0), {}), (_mean_over, (x, x > 5), {})]


def _count_out(x, keep):
    n = len(keep.nonzero())  # NZ_RETURNED
    return (x * keep).sum(), n


def count_returned():
    torch.manual_seed(0)
    x = torch.randn(6)
    return [(_count_out, (x, x > 0), {}), (_count_out, (x, x > 1), {})]


class Board:
    """A scalar board (a summary writer's shape): it keeps what it is given as numbers."""

    def __init__(self):
        self.rows = []

    def add_scalar(self, tag, value, step):
        self.rows.append((tag, round(float(value), 5), step))


BOARD = Board()


def _train_step(x, w, epoch):
    loss = ((x @ w).tanh() ** 2).mean()
    BOARD.add_scalar("loss", loss.item(), epoch)  # BOARD
    return loss * 2


def boarded():
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    # two batches of one epoch (an int that changes per call turns symbolic: not deferrable)
    return [(_train_step, (torch.randn(5, 4), w, 1), {}), (_train_step, (torch.randn(5, 4), w, 1), {})]


def _board_norm(t, step):
    BOARD.add_scalar("norm", t.norm().item(), step)  # BOARD_INNER
    return t / 2


def _train_step_inner(x, w, step):
    h = _board_norm(x @ w, step)
    return h.sum()


def boarded_inner():
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    return [(_train_step_inner, (torch.randn(5, 4), w, 1), {}), (_train_step_inner, (torch.randn(5, 4), w, 2), {})]


def _amp_step(x, w):
    with torch.cuda.amp.autocast():  # a deprecated spelling: torch warns FutureWarning, naming this line
        y = (x @ w).relu()
    scale = y.sum().item()  # AMP_ITEM
    return y * scale


def amp_step():
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    return [(_amp_step, (torch.randn(5, 4), w), {}), (_amp_step, (torch.randn(5, 4), w), {})]


def _owners(scores):
    best = scores.argmax(1)
    owner = torch.full((scores.size(1),), -1)
    for r in range(best.size(0)):
        owner[best[r]] = r  # OWNER
    return owner


def owners():
    torch.manual_seed(0)
    return [(_owners, (torch.randn(3, 7),), {}), (_owners, (torch.randn(3, 7),), {})]



class RunningMean(torch.nn.Module):
    """A running mean started from the first batch: state set under a test on a buffer."""

    def __init__(self, momentum, clip=None):
        super().__init__()
        self.momentum, self.clip = momentum, clip
        self.register_buffer("seen", torch.zeros(()))
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x):
        batch = x.mean(0)
        if self.seen == 0:  # FIRST_BATCH
            self.mean += batch
            self.seen += 1
        elif self.clip is not None:
            self.mean = torch.clamp(self.mean * self.momentum + batch * (1 - self.momentum), -self.clip, self.clip)
        else:
            self.mean = self.mean * self.momentum + batch * (1 - self.momentum)
        return x - self.mean


def running_mean():
    torch.manual_seed(0)
    m = RunningMean(0.9)
    return [(m, (torch.randn(5, 4),), {}), (m, (torch.randn(5, 4) + 1,), {})]


class RunningMeanOutlier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(()))
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x):
        batch = x.mean(0)
        if self.seen == 0:  # FIRST_OUTLIER
            self.mean += batch
            self.seen += 1
        elif batch.abs().max() > 0.5:
            self.mean = self.mean * 0.5 + batch * 0.5
        return x - self.mean


def running_mean_outlier():
    torch.manual_seed(0)
    m = RunningMeanOutlier()
    return [(m, (torch.randn(5, 4),), {}), (m, (torch.randn(5, 4) + 1,), {})]


def boarded_steps():
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    return [(_train_step, (torch.randn(5, 4), w, step), {}) for step in (1, 2, 3)]


class Saturating(torch.nn.Module):
    """A head that reports, under a data-dependent test, that its pre-activations saturate;
    the messages read the module's own settings."""

    def __init__(self, bound=1.5):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.bound = bound
        self.label = "head"

    def forward(self, x):
        z = self.lin(x)
        if z.abs().max() > self.bound:  # SATURATE
            print(f"{self.label}: |z| up to {z.abs().max().item():.3f} > {self.bound}")
        elif z.abs().max() < 0.05:
            print(f"{self.label}: vanishing")
        return torch.tanh(z)


def saturating():
    torch.manual_seed(0)
    m = Saturating()
    return [(m, (torch.randn(5, 4) * 4,), {}), (m, (torch.randn(5, 4) * 0.1,), {})]


class SaturatingNoted(Saturating):
    def note(self, text):
        print(text)

    def forward(self, x):
        z = self.lin(x)
        if z.abs().max() > self.bound:  # SATURATE_NOTE
            self.note(f"|z| up to {z.abs().max().item():.3f}")
        return torch.tanh(z)


def saturating_noted():
    torch.manual_seed(0)
    m = SaturatingNoted()
    return [(m, (torch.randn(5, 4) * 4,), {}), (m, (torch.randn(5, 4) * 0.1,), {})]


def _normalised(scores, scale):
    total = scores.sum()
    if total <= 0:  # NORM_WARN
        warnings.warn("no positive mass: uniform weights", stacklevel=1)
        weights = torch.full_like(scores, 1.0 / scores.numel())
    else:
        weights = scores / total
    return weights * scale


def normalised():
    torch.manual_seed(0)
    return [(_normalised, (torch.rand(6), 2.0), {}), (_normalised, (-torch.rand(6), 2.0), {})]


def _normalised_told(scores, scale):
    total = scores.sum()
    if total <= 0:  # NORM_TOLD
        weights = torch.full_like(scores, 1.0 / scores.numel())
        print(f"uniform weights of {weights[0].item():.3f}")
    else:
        weights = scores / total
    return weights * scale


def normalised_told():
    torch.manual_seed(0)
    return [(_normalised_told, (torch.rand(6), 2.0), {}), (_normalised_told, (-torch.rand(6), 2.0), {})]


def _smoothed_nll(logits, target, eps):
    n = logits.size(-1)
    soft = LegacyVar(torch.full_like(logits, eps / (n - 1)))  # LEGACY_VAR
    soft.scatter_(1, target[:, None], 1 - eps)
    return -(soft * logits.log_softmax(-1)).sum(-1).mean()


def smoothed_nll():
    torch.manual_seed(0)
    return [(_smoothed_nll, (torch.randn(5, 4), torch.tensor([0, 1, 2, 3, 0]), 0.1), {}),
            (_smoothed_nll, (torch.randn(5, 4), torch.tensor([3, 2, 1, 0, 0]), 0.2), {})]


def _volatile_scale(x):
    frozen = LegacyVar(x * 2, volatile=True)  # LEGACY_VOLATILE
    return frozen + 1


def volatile_scale():
    torch.manual_seed(0)
    return [(_volatile_scale, (torch.randn(3),), {}), (_volatile_scale, (torch.randn(3),), {})]


def _bounded_gain(x, lo, hi):
    g = x.norm() / x.numel()
    if g < lo:  # GAIN_CHAIN
        g = x.new_tensor(lo)
    elif g > hi:  # GAIN_ELIF
        g = x.new_tensor(hi)
    return x * g


def bounded_gain():
    torch.manual_seed(0)
    return [(_bounded_gain, (torch.randn(4), 0.6, 0.9), {}), (_bounded_gain, (torch.randn(4) * 5, 0.6, 0.9), {}),
            (_bounded_gain, (torch.randn(4) * 1.4, 0.6, 0.9), {})]


def _implicit_dim(x, w):
    p = torch.nn.functional.log_softmax(x @ w)  # torch warns (no dim), naming this line, on every eager call
    scale = p.exp().sum().item()  # IMPLICIT_ITEM
    return p * scale


def implicit_dim():
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    return [(_implicit_dim, (torch.randn(5, 4), w), {}), (_implicit_dim, (torch.randn(5, 4), w), {})]


def _copied_offsets(x, offsets):
    base = x.new_tensor(offsets)  # torch's C op warns (copy construct from a tensor) on every eager call
    scale = (x + base).abs().max().item()  # COPIED_ITEM
    return x / scale


def copied_offsets():
    torch.manual_seed(0)
    offsets = torch.arange(4.0)
    return [(_copied_offsets, (torch.randn(3, 4), offsets), {}), (_copied_offsets, (torch.randn(3, 4), offsets), {})]


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.out = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        return self.out(torch.tanh(self.emb(ids)))


def _greedy(model, ids, steps, stop):
    for _ in range(steps):
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        if nxt == stop:  # STOP_TOKEN
            break
        ids = torch.cat([ids, nxt], 1)
    return ids


def greedy():
    torch.manual_seed(0)
    lm = TinyLM()
    return [(_greedy, (lm, torch.tensor([[1, 2]]), 6, 3), {}), (_greedy, (lm, torch.tensor([[4]]), 6, 5), {})]


def _halving(x, floor):
    while x.abs().max() > floor:  # HALVE
        x = x / 2
    return x


def halving():
    torch.manual_seed(0)
    return [(_halving, (torch.randn(4) * 8, 1.0), {}), (_halving, (torch.randn(4) * 3, 1.0), {})]


def _window_from(x):
    start = int(x.abs().argmax())  # WINDOW_START
    return x[start:]


def seeded_window(x, seed):
    torch.manual_seed(seed)  # SEEDED
    return (_window_from(x * 2) + torch.rand(1)).sum()


def seeded():
    torch.manual_seed(0)
    return [(seeded_window, (torch.randn(6), 3), {}), (seeded_window, (torch.randn(6), 5), {})]


def _jitter(shape):
    return torch.from_numpy(np.random.normal(0.0, 0.1, size=shape)).float()  # compiled: torch's stream  # NP_DRAW


class NumpyMixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x + _jitter(x.shape))
        if h.sum() > 0:  # NP_MIXED
            h = h * 2
        else:
            h = h - 1
        return h


def numpy_mixed():
    torch.manual_seed(0)
    m = NumpyMixed()
    return [(m, (torch.randn(3, 4),), {}), (m, (torch.randn(3, 4) - 1,), {})]



def _passed_through(x):
    return x


def passed_through():
    torch.manual_seed(0)
    return [(_passed_through, (torch.randn(4),), {})]


class Totals(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, xs):
        total = 0.0
        for x in xs:
            total += self.lin(x).sum().item()  # RUNNING_TOTAL
        return total


def running_total():
    torch.manual_seed(0)
    return [(Totals(), ([torch.randn(2, 3), torch.randn(4, 3)],), {})]


def _epoch_steps(model, batches):
    total = 0.0
    for x in batches:
        out = model(x)
        total += float(out.relu().sum())  # EPOCH_READ
    return total


def epoch_entry(model, batches, seed):
    torch.manual_seed(seed)
    return _epoch_steps(model, batches)  # EPOCH_CALL


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x).tanh()


def epoch():
    torch.manual_seed(0)
    model = Scorer()
    return [(epoch_entry, (model, [torch.randn(2, 3), torch.randn(4, 3)], 0), {}),
            (epoch_entry, (model, [torch.randn(5, 3)], 1), {})]


def fit_then_score(model, batches, held_out):
    w = held_out[0].mean()
    fit = _epoch_steps(model, batches)  # FIT_CALL
    score = _epoch_steps(model, held_out)  # SCORE_CALL
    return fit + score, w * 2


def fit_score():
    torch.manual_seed(0)
    model = Scorer()
    return [(fit_then_score, (model, [torch.randn(2, 3), torch.randn(4, 3)], [torch.randn(3, 3)]), {}),
            (fit_then_score, (model, [torch.randn(5, 3)], [torch.randn(1, 3), torch.randn(2, 3)]), {})]


class Runner:
    def __init__(self, model):
        self.model = model

    def _steps(self, batches):
        total = 0.0
        for x in batches:
            total += float(self.model(x).relu().sum())  # RUNNER_READ
        return total

    def fit(self, batches):
        return self._steps(batches)

    def score(self, batches):
        return self._steps(batches[:1])


def run_fit_score(runner, batches, held_out):
    w = held_out[0].mean()
    fit = runner.fit(batches)  # RUNNER_FIT
    score = runner.score(held_out)  # RUNNER_SCORE
    return fit + score, w * 2


def runner_fit_score():
    torch.manual_seed(0)
    runner = Runner(Scorer())
    return [(run_fit_score, (runner, [torch.randn(2, 3), torch.randn(4, 3)], [torch.randn(3, 3)]), {}),
            (run_fit_score, (runner, [torch.randn(5, 3)], [torch.randn(1, 3), torch.randn(2, 3)]), {})]


class Meter:
    @staticmethod
    def summed(model, batches):
        total = 0.0
        for x in batches:
            total += float(model(x).relu().sum())  # METER_READ
        return total


def meter_entry(model, meter, batches, seed):
    torch.manual_seed(seed)
    return meter.summed(model, batches)


def meter_epoch():
    torch.manual_seed(0)
    model, meter = Scorer(), Meter()
    return [(meter_entry, (model, meter, [torch.randn(2, 3), torch.randn(4, 3)], 0), {}),
            (meter_entry, (model, meter, [torch.randn(5, 3)], 1), {})]


def drifting(x, w):
    scale = float(w.abs().max())  # DRIFT_SCALE
    y = x / scale
    if (x < 0).any():  # DRIFT_IF
        # compiled, NumPy's draw comes from torch's stream: only inputs with a negative
        # entry (the fresh set, never the factory's) take this branch
        y = y + torch.as_tensor(np.random.rand(*y.shape), dtype=y.dtype)
    return y * 2


def drifting_calls():
    torch.manual_seed(0)
    return [(drifting, (torch.rand(4) + 1, torch.rand(4) + 0.5), {}),
            (drifting, (torch.rand(6) + 1, torch.rand(4) + 0.5), {})]


class Snapshot(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, t):
        return self.lin(t)


def save_padded(model, t):
    out = t if t.data_ptr() % 64 == 0 else t.contiguous()  # COPY_PICKLED
    torch.save(model, io.BytesIO())   # pickles Snapshot: found through sys.modules by its module's name
    return model(out * 2)


def pickled():
    torch.manual_seed(0)
    return [(save_padded, (Snapshot(), torch.randn(5, 3)), {})]


class Probe(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, t):
        return self.lin(t).relu()


def build_probe(x, seed):
    scale = x.abs().mean() + 1

    def reinit(m):   # a nested def a later part calls: the part before must hand it over
        if not isinstance(m, torch.nn.Linear):
            return   # its own return: not one of the function being split
        m.weight.data.fill_(0.1)

    torch.manual_seed(seed)  # REINIT_SEED
    probe = Probe()
    probe.apply(reinit)
    return probe(x) * scale


def nested_def():
    torch.manual_seed(0)
    return [(build_probe, (torch.randn(3, 4), 0), {})]


RUN_SCALE = None


def scaled(x):
    return x * RUN_SCALE


def configure_and_run(x, seed):
    global RUN_SCALE
    torch.manual_seed(seed)  # GLOBAL_SEED
    RUN_SCALE = float(x.shape[0])   # the part after the gap sets the module's global; scaled() reads it
    return scaled(x).sum()


def global_set():
    torch.manual_seed(0)
    return [(configure_and_run, (torch.randn(3, 4), 0), {})]


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, t):
        return t * self.k


class Chain:
    def __init__(self, steps):
        self.steps = steps

    def __call__(self, t):
        for step in self.steps:
            t = step(t)
        return t


def chained_run(x, seed):
    torch.manual_seed(seed)  # CHAIN_SEED
    chain = Chain([])
    chain.steps.append(Scale(2.0))   # built in the part between the gaps: Dynamo cannot return it
    x = x + 1
    print("steps:", len(chain.steps))  # CHAIN_PRINT
    return chain(x).sum()


def built_chain():
    torch.manual_seed(0)
    return [(chained_run, (torch.randn(3, 4), 0), {})]


class TinyReg(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x):
        return torch.tanh(self.lin(x))


def train_epoch(model, opt, batches):
    total = torch.zeros(())
    for x, y in batches:
        opt.zero_grad()  # EPOCH_ZERO
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()  # EPOCH_STEP
        total = total + loss.detach()
    return total


def fit(model, opt, batches, initial, seed):
    model.load_state_dict(initial)  # FIT_RESTORE
    torch.manual_seed(seed)  # FIT_SEED
    return train_epoch(model, opt, batches)


def epoch_driver():
    torch.manual_seed(0)
    model = TinyReg()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    return [(fit, (model, opt, batches, initial, 0), {})]


def rows_tensor(rows):
    return torch.ones(()).new(rows)  # CRASH_ROWS (eager takes float64 rows; a fake tensor call does not)


def scale_by_rows(x, rows):
    y = x.sin()
    t = rows_tensor(rows)  # CRASH_CALL
    return (y * t.sum()).cos()


def grid_offsets(x, n):
    # Legacy typed constructors of NumPy grids: compiled, Dynamo traces the grids as tensors and
    # fails in each constructor's fake tensor call (eager takes the int64 arrays).
    g = np.arange(n)
    a, b = np.meshgrid(g, g)
    xs = torch.FloatTensor(a).view(-1, 1)  # LEGACY_A
    ys = torch.FloatTensor(b).view(-1, 1)  # LEGACY_B
    scale = x.abs().max().item()  # GRID_ITEM
    return torch.cat((xs, ys), 1) * x.sum() / scale


def legacy_grid():
    torch.manual_seed(0)
    return [(grid_offsets, (torch.randn(4), 3), {})]


def crashing_rows():
    return [(scale_by_rows, (torch.randn(3), np.random.RandomState(0).rand(2, 3)), {})]


def degree_weighted(x, graph):
    # SciPy's sparse sum returns an np.matrix: compiled, Dynamo traces NumPy as tensor ops and
    # fails inside SciPy (a fake tensor call that cannot view as np.matrix), not in this file.
    deg = np.asarray(graph.sum(1)).flatten()  # SPARSE_SUM
    return torch.tanh(x * torch.from_numpy(deg).float()[:, None]).sum(1)


def sparse_degrees():
    import scipy.sparse as sp
    rng = np.random.RandomState(3)
    return [(degree_weighted, (torch.randn(n, 3), sp.csr_matrix((rng.rand(n, n) > 0.5).astype(np.float64))), {})
            for n in (5, 7)]


def boost_if_hot(level, y):
    if level > 0.8:  # HOT_TEST (a tensor here once the caller's .item() is kept as one)
        return y * 2
    return y - 1


def hot_mix(x, w):
    level = x.abs().mean().item()  # HOT_ITEM
    return torch.tanh(boost_if_hot(level, x @ w))


def hot_levels():
    torch.manual_seed(0)
    w = torch.randn(4, 4)
    return [(hot_mix, (torch.randn(3, 4), w), {}), (hot_mix, (torch.randn(3, 4) * 0.1, w), {})]


_MADE_MARK = False


def timed_report(x):
    t0 = time.perf_counter()
    y = x.cos().sum()
    print("step took", round(time.perf_counter() - t0) * 0)  # TIMED_PRINT
    return y * 2


def once_only():
    # Runs in the first process that builds it; any later process (a repeat census) fails to
    # load it: a repeat census that cannot run to the end, made on purpose.
    global _MADE_MARK
    mark = os.path.join(os.environ["GRAPHSTITCH_TEST_MARK_DIR"], "built")
    if os.path.exists(mark) and not _MADE_MARK:
        raise RuntimeError("built once already, in another process")
    if not _MADE_MARK:
        open(mark, "w").close()
        _MADE_MARK = True
    return [(timed_report, (torch.randn(5),), {})]


def epoch_then_names(model, batches, names):
    torch.manual_seed(0)  # NAMES_SEED
    for x in batches:
        loss = model(x).sum()
        # a break in a loop: Dynamo skips the frame, and nothing after the loop is traced
        print("loss", loss.item())  # NAMES_PRINT
    y = model(batches[0])
    labels = []
    for k in y.argmax(-1):   # a break in a loop too, first traced once a split compiles this part
        labels.append(names[int(k)])  # NAMES_LOOKUP
    return y.sum(), labels


def named_epochs():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    return [(epoch_then_names, (model, [torch.randn(2, 4) for _ in range(2)], ["a", "b", "c"]), {})]


def scale_down(h):
    s = float(h.abs().max())  # HATCHED_ITEM
    return h.cos() / s


def rows_then_scale(x, rows):
    t = rows_tensor(rows)   # (the compiled run fails in it: the baseline disables it, in a patched copy)
    return scale_down(x.sin() * t.sum())


def crashing_then_scaling():
    return [(rows_then_scale, (torch.randn(3), np.random.RandomState(1).rand(2, 3)), {})]


class Shadow:
    """Keeps detached copies of the parameters it is given (as a moving average does)."""

    def __init__(self, parameters):
        self.copies = [p.clone().detach() for p in parameters if p.requires_grad]


def make_optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def shadowed_steps(model, xs, seed):
    torch.manual_seed(seed)  # SHADOW_SEED
    # a generator argument to a call that breaks: Dynamo skips the frame from here on
    optimizer = make_optimizer(model.parameters())  # SHADOW_OPT
    # compiled in a split's part, returned to the eager print: an internal error of Dynamo's
    shadow = Shadow(model.parameters())  # SHADOW_BUILT
    print(f"shadowing {len(shadow.copies)} tensors")  # SHADOW_PRINT
    out = []
    for x in xs:
        out.append((model(x) * 0.5).sum().detach())
    return torch.stack(out), shadow.copies, len(optimizer.param_groups)


def shadowing():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    return [(shadowed_steps, (model, [torch.randn(2, 3) for _ in range(2)], 1), {})]


class Cell(torch.nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.mix = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, z):
        return self.ln(z + self.mix(z).relu())


class Tower(torch.nn.Module):
    """A loop over user-defined cells that reports each cell's output as a float: a split can
    run the whole loop eagerly (few graphs, little compiled) or keep it in Python with each
    cell compiled (more graphs, most of the code)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Linear(4, 8)
        self.cells = torch.nn.ModuleList(Cell() for _ in range(3))
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        z = self.stem(x)
        for k, cell in enumerate(self.cells):
            z = cell(z)
            print("cell", k, float(z.abs().mean()))  # TOWER_REPORT
        return self.head(z)


def tower():
    torch.manual_seed(0)
    t = Tower()
    return [(t, (torch.randn(2, 4),), {}), (t, (torch.randn(3, 4),), {})]


class Critic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x).tanh()


class Learner:
    """A training step compiled as the unbound method (`torch.compile(Learner.step)`)."""

    def __init__(self):
        self.net = Critic()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.seen = 0

    def step(self, batches):
        for x in batches:
            loss = self.net(x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()  # UNBOUND_STEP
            self.seen += 1
        return self.net.lin.weight.detach() * 1


def unbound_step():
    torch.manual_seed(0)
    a, b = Learner(), Learner()
    b.net.load_state_dict(a.net.state_dict())
    return [(Learner.step, (a, [torch.randn(3, 4), torch.randn(3, 4)]), {}),
            (Learner.step, (b, [torch.randn(5, 4)]), {})]


@torch.no_grad()
def tally_scores(net, batches):
    net.eval()
    totals = []
    for xb in batches:
        totals.append(net(xb).sum().item())  # NO_GRAD_TALLY
    net.train()
    return sum(totals) / len(totals)


def no_grad_tally():
    torch.manual_seed(0)
    net = Critic()
    return [(tally_scores, (net, [torch.randn(2, 4), torch.randn(3, 4)]), {}),
            (tally_scores, (net, [torch.randn(5, 4)]), {})]


def tiled_grid(scale, base):
    # a size read from a tensor: the number feeds `view`/`expand`, where a tensor would be
    # read back as a Python int (the same break, a line later)
    side = int(scale[0])  # SIZE_ARG
    grid = base[: side * side].view(side, side)
    return grid.expand(2, side, side) * 2


def sized():
    torch.manual_seed(0)
    return [(tiled_grid, (torch.tensor([3.0]), torch.randn(16)), {}),
            (tiled_grid, (torch.tensor([2.0]), torch.randn(16)), {})]


def chunked_total(x, chunk):
    # rows chunk by chunk: the next start is read back from the chunk's index tensor
    total = torch.zeros(x.shape[1:])
    pos = 0
    while pos < x.shape[0]:
        idx = torch.arange(pos, min(x.shape[0], pos + chunk))
        pos = int(idx[-1]) + 1  # ARANGE_END
        total = total + x[idx].sum(0) * pos
    return total


def chunked():
    torch.manual_seed(0)
    return [(chunked_total, (torch.randn(7, 3), 3), {}), (chunked_total, (torch.randn(7, 3), 3), {})]


class Replay(torch.nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.rows = rows
        self.seen = []

    def forward(self, x, n):
        if len(self.rows) < n:  # an early return, before the graph work
            return torch.zeros(())
        h = self.lin(torch.stack(self.rows[:n])) * x
        self.seen.append(h.sum().item())  # EARLY_GUARD
        return h.relu().sum() + len(self.seen)


def replayed():
    torch.manual_seed(0)
    m = Replay([torch.randn(3) for _ in range(6)])
    return [(m, (torch.randn(3), 4), {}), (m, (torch.randn(3), 2), {}), (m, (torch.randn(3), 9), {})]


def stepped_total(x, start):
    idx = torch.arange(start, start + 3)
    total = x[idx].sum()
    for _ in range(2):
        total = total + int(idx[-1])  # ARANGE_STALE
        start = start + 1
    return total


def stale_bound():
    torch.manual_seed(0)
    return [(stepped_total, (torch.randn(8), 1), {}), (stepped_total, (torch.randn(8), 4), {})]
