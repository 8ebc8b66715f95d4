"""Contrastive representation distillation (CRD) loss from HobbitLong/RepDistiller (`crd/criterion.py`: `CRDLoss`,
`ContrastLoss`, `Embed`, `Normalize`; `crd/memory.py`: `ContrastMemory`, `AliasMethod`). `ContrastMemory.forward`
reads its hyper-parameters back from a `params` buffer with `int(self.params[0].item())` and `.item()`s, draws
negative indices with `AliasMethod.draw` (`random_`, `index_select`, `torch.bernoulli`) when `idx is None` and writes
the positives into column 0 with `idx.select(1, 0).copy_(y.data)`, scores both memory banks with `bmm`/`exp`, sets
the normalisation constants the first time (`if Z_v1 < 0:` writes `self.params[2]`, reads it back with
`.clone().detach().item()` and prints it), and updates both memory banks under `no_grad` with a momentum mix,
renormalisation and `index_copy_`; `AliasMethod.__init__` builds its tables with Python loops over the
probabilities and `pop`/`append` lists. `ContrastLoss` uses `select`/`narrow`, `clone().fill_` and in-place `log_`.
Adaptations: `self.multinomial.cuda()` is skipped (CPU); `opt` is a namespace with small sizes (`n_data` 64,
`nce_k` 16, `feat_dim` 8); the called function `distill_step` is a minimal stand-in for one step of
`helper/loops.py` `train_distill` with CRD only (not opened): it embeds given student/teacher features, computes
`criterion_kd(f_s, f_t, index, contrast_idx)`, and steps SGD over the two embeddings. So that a call repeats, it seeds
torch and restores the criterion (embeddings, memory banks and the `params` buffer, whose Z entries start at -1)
from a copy taken in the factory; call 1 draws the negatives (`contrast_idx=None`), call 2 passes them, as the
dataset's sample mode does; it returns the losses and the updated memory banks' sums."""
import argparse
import copy
import math

import torch
from torch import nn

eps = 1e-7


# ---- crd/memory.py
class ContrastMemory(nn.Module):
    """
    memory buffer that supplies large amount of negative samples.
    """
    def __init__(self, inputSize, outputSize, K, T=0.07, momentum=0.5):
        super(ContrastMemory, self).__init__()
        self.nLem = outputSize
        self.unigrams = torch.ones(self.nLem)
        self.multinomial = AliasMethod(self.unigrams)
        # self.multinomial.cuda()  (adaptation: CPU)
        self.K = K

        self.register_buffer('params', torch.tensor([K, T, -1, -1, momentum]))
        stdv = 1. / math.sqrt(inputSize / 3)
        self.register_buffer('memory_v1', torch.rand(outputSize, inputSize).mul_(2 * stdv).add_(-stdv))
        self.register_buffer('memory_v2', torch.rand(outputSize, inputSize).mul_(2 * stdv).add_(-stdv))

    def forward(self, v1, v2, y, idx=None):
        K = int(self.params[0].item())  # BREAK
        T = self.params[1].item()  # BREAK
        Z_v1 = self.params[2].item()  # BREAK
        Z_v2 = self.params[3].item()  # BREAK

        momentum = self.params[4].item()  # BREAK
        batchSize = v1.size(0)
        outputSize = self.memory_v1.size(0)
        inputSize = self.memory_v1.size(1)

        # original score computation
        if idx is None:
            idx = self.multinomial.draw(batchSize * (self.K + 1)).view(batchSize, -1)
            idx.select(1, 0).copy_(y.data)
        # sample
        weight_v1 = torch.index_select(self.memory_v1, 0, idx.view(-1)).detach()
        weight_v1 = weight_v1.view(batchSize, K + 1, inputSize)
        out_v2 = torch.bmm(weight_v1, v2.view(batchSize, inputSize, 1))
        out_v2 = torch.exp(torch.div(out_v2, T))
        # sample
        weight_v2 = torch.index_select(self.memory_v2, 0, idx.view(-1)).detach()
        weight_v2 = weight_v2.view(batchSize, K + 1, inputSize)
        out_v1 = torch.bmm(weight_v2, v1.view(batchSize, inputSize, 1))
        out_v1 = torch.exp(torch.div(out_v1, T))

        # set Z if haven't been set yet
        if Z_v1 < 0:
            self.params[2] = out_v1.mean() * outputSize
            Z_v1 = self.params[2].clone().detach().item()  # BREAK
            print("normalization constant Z_v1 is set to {:.1f}".format(Z_v1))  # BREAK
        if Z_v2 < 0:
            self.params[3] = out_v2.mean() * outputSize
            Z_v2 = self.params[3].clone().detach().item()  # BREAK
            print("normalization constant Z_v2 is set to {:.1f}".format(Z_v2))  # BREAK

        # compute out_v1, out_v2
        out_v1 = torch.div(out_v1, Z_v1).contiguous()
        out_v2 = torch.div(out_v2, Z_v2).contiguous()

        # update memory
        with torch.no_grad():
            l_pos = torch.index_select(self.memory_v1, 0, y.view(-1))
            l_pos.mul_(momentum)
            l_pos.add_(torch.mul(v1, 1 - momentum))
            l_norm = l_pos.pow(2).sum(1, keepdim=True).pow(0.5)
            updated_v1 = l_pos.div(l_norm)
            self.memory_v1.index_copy_(0, y, updated_v1)

            ab_pos = torch.index_select(self.memory_v2, 0, y.view(-1))
            ab_pos.mul_(momentum)
            ab_pos.add_(torch.mul(v2, 1 - momentum))
            ab_norm = ab_pos.pow(2).sum(1, keepdim=True).pow(0.5)
            updated_v2 = ab_pos.div(ab_norm)
            self.memory_v2.index_copy_(0, y, updated_v2)

        return out_v1, out_v2


class AliasMethod(object):
    """
    From: https://hips.seas.harvard.edu/blog/2013/03/03/the-alias-method-efficient-sampling-with-many-discrete-outcomes/
    """
    def __init__(self, probs):

        if probs.sum() > 1:
            probs.div_(probs.sum())
        K = len(probs)
        self.prob = torch.zeros(K)
        self.alias = torch.LongTensor([0]*K)

        # Sort the data into the outcomes with probabilities
        # that are larger and smaller than 1/K.
        smaller = []
        larger = []
        for kk, prob in enumerate(probs):
            self.prob[kk] = K*prob
            if self.prob[kk] < 1.0:
                smaller.append(kk)
            else:
                larger.append(kk)

        # Loop though and create little binary mixtures that
        # appropriately allocate the larger outcomes over the
        # overall uniform mixture.
        while len(smaller) > 0 and len(larger) > 0:
            small = smaller.pop()
            large = larger.pop()

            self.alias[small] = large
            self.prob[large] = (self.prob[large] - 1.0) + self.prob[small]

            if self.prob[large] < 1.0:
                smaller.append(large)
            else:
                larger.append(large)

        for last_one in smaller+larger:
            self.prob[last_one] = 1

    def cuda(self):
        self.prob = self.prob.cuda()
        self.alias = self.alias.cuda()

    def draw(self, N):
        """ Draw N samples from multinomial """
        K = self.alias.size(0)

        kk = torch.zeros(N, dtype=torch.long, device=self.prob.device).random_(0, K)  # BREAK
        prob = self.prob.index_select(0, kk)
        alias = self.alias.index_select(0, kk)
        # b is whether a random number is greater than q
        b = torch.bernoulli(prob)
        oq = kk.mul(b.long())
        oj = alias.mul((1-b).long())

        return oq + oj


# ---- crd/criterion.py
class CRDLoss(nn.Module):
    """CRD Loss function
    includes two symmetric parts:
    (a) using teacher as anchor, choose positive and negatives over the student side
    (b) using student as anchor, choose positive and negatives over the teacher side
    """
    def __init__(self, opt):
        super(CRDLoss, self).__init__()
        self.embed_s = Embed(opt.s_dim, opt.feat_dim)
        self.embed_t = Embed(opt.t_dim, opt.feat_dim)
        self.contrast = ContrastMemory(opt.feat_dim, opt.n_data, opt.nce_k, opt.nce_t, opt.nce_m)
        self.criterion_t = ContrastLoss(opt.n_data)
        self.criterion_s = ContrastLoss(opt.n_data)

    def forward(self, f_s, f_t, idx, contrast_idx=None):
        f_s = self.embed_s(f_s)
        f_t = self.embed_t(f_t)
        out_s, out_t = self.contrast(f_s, f_t, idx, contrast_idx)
        s_loss = self.criterion_s(out_s)
        t_loss = self.criterion_t(out_t)
        loss = s_loss + t_loss
        return loss


class ContrastLoss(nn.Module):
    """
    contrastive loss, corresponding to Eq (18)
    """
    def __init__(self, n_data):
        super(ContrastLoss, self).__init__()
        self.n_data = n_data

    def forward(self, x):
        bsz = x.shape[0]
        m = x.size(1) - 1

        # noise distribution
        Pn = 1 / float(self.n_data)

        # loss for positive pair
        P_pos = x.select(1, 0)
        log_D1 = torch.div(P_pos, P_pos.add(m * Pn + eps)).log_()

        # loss for K negative pair
        P_neg = x.narrow(1, 1, m)
        log_D0 = torch.div(P_neg.clone().fill_(m * Pn), P_neg.add(m * Pn + eps)).log_()

        loss = - (log_D1.sum(0) + log_D0.view(-1, 1).sum(0)) / bsz

        return loss


class Embed(nn.Module):
    """Embedding module"""
    def __init__(self, dim_in=1024, dim_out=128):
        super(Embed, self).__init__()
        self.linear = nn.Linear(dim_in, dim_out)
        self.l2norm = Normalize(2)

    def forward(self, x):
        x = x.view(x.shape[0], -1)
        x = self.linear(x)
        x = self.l2norm(x)
        return x


class Normalize(nn.Module):
    """normalization layer"""
    def __init__(self, power=2):
        super(Normalize, self).__init__()
        self.power = power

    def forward(self, x):
        norm = x.pow(self.power).sum(1, keepdim=True).pow(1. / self.power)
        out = x.div(norm)
        return out


# ---- stand-in for one CRD step of helper/loops.py train_distill
def distill_step(criterion_kd, batches, initial_state, lr=0.05):
    torch.manual_seed(0)  # adaptation: so that a call repeats  # BREAK
    criterion_kd.load_state_dict(initial_state)  # BREAK
    optimizer = torch.optim.SGD(list(criterion_kd.embed_s.parameters()) + list(criterion_kd.embed_t.parameters()),  # BREAK
                                lr=lr, momentum=0.9)
    losses = []
    for feat_s, feat_t, index, contrast_idx in batches:
        loss_kd = criterion_kd(feat_s, feat_t, index, contrast_idx)
        optimizer.zero_grad()
        loss_kd.backward()
        optimizer.step()  # BREAK
        losses.append(loss_kd.detach())
    return (torch.cat(losses), criterion_kd.contrast.memory_v1.sum(), criterion_kd.contrast.memory_v2.sum(),
            criterion_kd.contrast.params.detach().clone())


def target():
    torch.manual_seed(0)
    opt = argparse.Namespace(s_dim=12, t_dim=16, feat_dim=8, nce_k=16, nce_t=0.07, nce_m=0.5, n_data=64)
    criterion_kd = CRDLoss(opt)
    initial_state = copy.deepcopy(criterion_kd.state_dict())

    def batches(n, bs, with_contrast):
        out = []
        for _ in range(n):
            index = torch.randperm(opt.n_data)[:bs]
            contrast_idx = None
            if with_contrast:
                contrast_idx = torch.randint(0, opt.n_data, (bs, opt.nce_k + 1))
                contrast_idx[:, 0] = index
            out.append((torch.randn(bs, 3, 2, 2), torch.randn(bs, opt.t_dim), index, contrast_idx))
        return out

    return [
        (distill_step, (criterion_kd, batches(3, 8, False), initial_state), {}),
        (distill_step, (criterion_kd, batches(2, 6, True), initial_state), {"lr": 0.1}),
    ]


EXPECT = ("rewrite: `ContrastMemory.forward` reads its constants back with `.item()` (`K`, `T`, `Z`, momentum) and "
          "decides `if Z_v1 < 0:` on them; keeping them as tensors (or reading `self.K`) and making the first-call "
          "normalisation a tensor select keeps the contrast graph whole, while the print of Z and the optimizer "
          "step stay eager")
