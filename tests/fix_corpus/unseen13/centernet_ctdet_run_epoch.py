"""A CenterNet detection epoch (train then val) through `BaseTrainer.run_epoch` (xingyizhou/CenterNet:
`src/lib/trains/base_trainer.py` `ModelWithLoss`, `BaseTrainer`; `src/lib/trains/ctdet.py` `CtdetLoss`,
`CtdetTrainer._get_losses`; `src/lib/models/losses.py` `_neg_loss`, `FocalLoss`, `RegL1Loss`; `src/lib/models/utils.py`
`_sigmoid`, `_gather_feat`, `_transpose_and_gather_feat`). `CtdetLoss.forward` starts from int `0` accumulators,
loops over `opt.num_stacks` output dicts, applies `_sigmoid` (in-place `sigmoid_` then `clamp`) and writes it back
into the dict, branches on many `opt` flags (`mse_loss`, `eval_oracle_*`, `wh_weight > 0`, `dense_wh`,
`cat_spec_wh`, `reg_offset`), and returns a `loss_stats` dict. `_neg_loss` (the CornerNet focal loss) branches on
`if num_pos == 0:` where `num_pos` is a tensor sum. `RegL1Loss` gathers with `_transpose_and_gather_feat` and uses
`F.l1_loss(..., size_average=False)`. `run_epoch` switches `train()`/`eval()` on the `phase` string (val:
`torch.cuda.empty_cache()`), builds `AverageMeter`s in a dict comprehension, reads `time.time()`, moves every batch
entry `if k != 'meta'`, steps the optimizer in the train phase, writes a class attribute `Bar.suffix` with
`str.format` and `bar.elapsed_td`/`bar.eta_td`, updates meters with `loss_stats[l].mean().item()`, prints every
`print_iter` iterations, `del`s the outputs and returns `{k: v.avg ...}` plus the elapsed minutes.
Adaptations: the DLA/Hourglass network is a small stand-in conv net returning `[{'hm', 'wh', 'reg'}]` (one
stack); `progress.bar.Bar` (not installed) is a minimal stand-in with the used members (`suffix`, `elapsed_td`,
`eta_td`, `next`, `finish`); `utils.utils.AverageMeter` is written after the stored `AverageMeter` pattern of the
repository; the COCO loader is a list of batch dicts (`input`, `hm`, `reg_mask`, `ind`, `wh`, `reg`) of random
tensors made in the factory (the second call's first batch has an empty heatmap, so `num_pos == 0`); `opt` is an
`argparse.Namespace` with the ctdet defaults that the code reads (`print_iter` 1, `device` cpu, `gpus` [0]).
So that a call repeats exactly, the called function `train_val` restores model and optimizer from copies taken
in the factory (`reset_`), then runs `trainer.train` and `trainer.val`; it returns both result dicts (without
the timing entry) and a head weight."""
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import argparse
import copy
import datetime
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- src/lib/models/utils.py
def _sigmoid(x):
  y = torch.clamp(x.sigmoid_(), min=1e-4, max=1-1e-4)
  return y

def _gather_feat(feat, ind, mask=None):
    dim  = feat.size(2)
    ind  = ind.unsqueeze(2).expand(ind.size(0), ind.size(1), dim)
    feat = feat.gather(1, ind)
    if mask is not None:
        mask = mask.unsqueeze(2).expand_as(feat)
        feat = feat[mask]
        feat = feat.view(-1, dim)
    return feat

def _transpose_and_gather_feat(feat, ind):
    feat = feat.permute(0, 2, 3, 1).contiguous()
    feat = feat.view(feat.size(0), -1, feat.size(3))
    feat = _gather_feat(feat, ind)
    return feat


# ---- src/lib/models/losses.py
def _neg_loss(pred, gt):
  ''' Modified focal loss. Exactly the same as CornerNet.
      Runs faster and costs a little bit more memory
    Arguments:
      pred (batch x c x h x w)
      gt_regr (batch x c x h x w)
  '''
  pos_inds = gt.eq(1).float()
  neg_inds = gt.lt(1).float()

  neg_weights = torch.pow(1 - gt, 4)

  loss = 0

  pos_loss = torch.log(pred) * torch.pow(1 - pred, 2) * pos_inds
  neg_loss = torch.log(1 - pred) * torch.pow(pred, 2) * neg_weights * neg_inds

  num_pos  = pos_inds.float().sum()
  pos_loss = pos_loss.sum()
  neg_loss = neg_loss.sum()

  if num_pos == 0:  # BREAK
    loss = loss - neg_loss
  else:
    loss = loss - (pos_loss + neg_loss) / num_pos
  return loss

class FocalLoss(nn.Module):
  '''nn.Module warpper for focal loss'''
  def __init__(self):
    super(FocalLoss, self).__init__()
    self.neg_loss = _neg_loss

  def forward(self, out, target):
    return self.neg_loss(out, target)

class RegL1Loss(nn.Module):
  def __init__(self):
    super(RegL1Loss, self).__init__()

  def forward(self, output, mask, ind, target):
    pred = _transpose_and_gather_feat(output, ind)
    mask = mask.unsqueeze(2).expand_as(pred).float()
    # loss = F.l1_loss(pred * mask, target * mask, reduction='elementwise_mean')
    loss = F.l1_loss(pred * mask, target * mask, size_average=False)
    loss = loss / (mask.sum() + 1e-4)
    return loss


# ---- src/lib/trains/ctdet.py
class CtdetLoss(torch.nn.Module):
  def __init__(self, opt):
    super(CtdetLoss, self).__init__()
    self.crit = torch.nn.MSELoss() if opt.mse_loss else FocalLoss()
    self.crit_reg = RegL1Loss() if opt.reg_loss == 'l1' else None
    self.crit_wh = torch.nn.L1Loss(reduction='sum') if opt.dense_wh else self.crit_reg
    self.opt = opt

  def forward(self, outputs, batch):
    opt = self.opt
    hm_loss, wh_loss, off_loss = 0, 0, 0
    for s in range(opt.num_stacks):
      output = outputs[s]
      if not opt.mse_loss:
        output['hm'] = _sigmoid(output['hm'])

      if opt.eval_oracle_hm:
        output['hm'] = batch['hm']

      hm_loss += self.crit(output['hm'], batch['hm']) / opt.num_stacks
      if opt.wh_weight > 0:
        if opt.dense_wh:
          mask_weight = batch['dense_wh_mask'].sum() + 1e-4
          wh_loss += (
            self.crit_wh(output['wh'] * batch['dense_wh_mask'],
            batch['dense_wh'] * batch['dense_wh_mask']) /
            mask_weight) / opt.num_stacks
        elif opt.cat_spec_wh:
          wh_loss += self.crit_wh(
            output['wh'], batch['cat_spec_mask'],
            batch['ind'], batch['cat_spec_wh']) / opt.num_stacks
        else:
          wh_loss += self.crit_wh(
            output['wh'], batch['reg_mask'],
            batch['ind'], batch['wh']) / opt.num_stacks

      if opt.reg_offset and opt.off_weight > 0:
        off_loss += self.crit_reg(output['reg'], batch['reg_mask'],
                             batch['ind'], batch['reg']) / opt.num_stacks

    loss = opt.hm_weight * hm_loss + opt.wh_weight * wh_loss + \
           opt.off_weight * off_loss
    loss_stats = {'loss': loss, 'hm_loss': hm_loss,
                  'wh_loss': wh_loss, 'off_loss': off_loss}
    return loss, loss_stats


# ---- stand-ins: progress.bar.Bar, utils.utils.AverageMeter, the network
class Bar(object):
  """Minimal stand-in for progress.bar.Bar (not installed)."""
  suffix = ''

  def __init__(self, message='', max=100):
    self.message = message
    self.max = max
    self.index = 0
    self._start = time.time()  # BREAK

  @property
  def elapsed_td(self):
    return datetime.timedelta(seconds=int(time.time() - self._start))

  @property
  def eta_td(self):
    return datetime.timedelta(seconds=0)

  def next(self):
    self.index += 1

  def finish(self):
    pass


class AverageMeter(object):
  """Computes and stores the average and current value"""
  def __init__(self):
    self.reset()

  def reset(self):
    self.val = 0
    self.avg = 0
    self.sum = 0
    self.count = 0

  def update(self, val, n=1):
    self.val = val
    self.sum += val * n
    self.count += n
    if self.count > 0:
      self.avg = self.sum / self.count


class TinyCenterNet(nn.Module):
  """Stand-in for the DLA-34 / Hourglass network: backbone + hm/wh/reg heads, one stack."""
  def __init__(self, num_classes=3, head_conv=8):
    super(TinyCenterNet, self).__init__()
    self.base = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True),
                              nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(inplace=True))
    self.heads = {'hm': num_classes, 'wh': 2, 'reg': 2}
    for head in self.heads:
      fc = nn.Sequential(nn.Conv2d(8, head_conv, 3, padding=1), nn.ReLU(inplace=True),
                         nn.Conv2d(head_conv, self.heads[head], 1))
      if 'hm' in head:
        fc[-1].bias.data.fill_(-2.19)
      self.__setattr__(head, fc)

  def forward(self, x):
    x = self.base(x)
    z = {}
    for head in self.heads:
      z[head] = self.__getattr__(head)(x)
    return [z]


# ---- src/lib/trains/base_trainer.py
class ModelWithLoss(torch.nn.Module):
  def __init__(self, model, loss):
    super(ModelWithLoss, self).__init__()
    self.model = model
    self.loss = loss

  def forward(self, batch):
    outputs = self.model(batch['input'])
    loss, loss_stats = self.loss(outputs, batch)
    return outputs[-1], loss, loss_stats

class BaseTrainer(object):
  def __init__(
    self, opt, model, optimizer=None):
    self.opt = opt
    self.optimizer = optimizer
    self.loss_stats, self.loss = self._get_losses(opt)
    self.model_with_loss = ModelWithLoss(model, self.loss)

  def run_epoch(self, phase, epoch, data_loader):
    model_with_loss = self.model_with_loss
    if phase == 'train':
      model_with_loss.train()
    else:
      if len(self.opt.gpus) > 1:
        model_with_loss = self.model_with_loss.module
      model_with_loss.eval()
      torch.cuda.empty_cache()

    opt = self.opt
    results = {}
    data_time, batch_time = AverageMeter(), AverageMeter()
    avg_loss_stats = {l: AverageMeter() for l in self.loss_stats}
    num_iters = len(data_loader) if opt.num_iters < 0 else opt.num_iters
    bar = Bar('{}/{}'.format(opt.task, opt.exp_id), max=num_iters)
    end = time.time()  # BREAK
    for iter_id, batch in enumerate(data_loader):
      if iter_id >= num_iters:
        break
      data_time.update(time.time() - end)  # BREAK

      for k in batch:
        if k != 'meta':
          batch[k] = batch[k].to(device=opt.device, non_blocking=True)
      output, loss, loss_stats = model_with_loss(batch)
      loss = loss.mean()
      if phase == 'train':
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()  # BREAK
      batch_time.update(time.time() - end)
      end = time.time()

      Bar.suffix = '{phase}: [{0}][{1}/{2}]|Tot: {total:} |ETA: {eta:} '.format(
        epoch, iter_id, num_iters, phase=phase,
        total=bar.elapsed_td, eta=bar.eta_td)
      for l in avg_loss_stats:
        avg_loss_stats[l].update(
          loss_stats[l].mean().item(), batch['input'].size(0))
        Bar.suffix = Bar.suffix + '|{} {:.4f} '.format(l, avg_loss_stats[l].avg)
      if opt.print_iter > 0:
        if iter_id % opt.print_iter == 0:
          print('{}/{}| {}'.format(opt.task, opt.exp_id, Bar.suffix))
      else:
        bar.next()

      del output, loss, loss_stats

    bar.finish()
    ret = {k: v.avg for k, v in avg_loss_stats.items()}
    ret['time'] = bar.elapsed_td.total_seconds() / 60.
    return ret, results

  def _get_losses(self, opt):
    raise NotImplementedError

  def val(self, epoch, data_loader):
    return self.run_epoch('val', epoch, data_loader)

  def train(self, epoch, data_loader):
    return self.run_epoch('train', epoch, data_loader)


class CtdetTrainer(BaseTrainer):
  def __init__(self, opt, model, optimizer=None):
    super(CtdetTrainer, self).__init__(opt, model, optimizer=optimizer)

  def _get_losses(self, opt):
    loss_states = ['loss', 'hm_loss', 'wh_loss', 'off_loss']
    loss = CtdetLoss(opt)
    return loss_states, loss


def reset_(model, optimizer, model_state, opt_state):
  """Adaptation: restore model and optimizer from the factory's copies."""
  model.load_state_dict(model_state)  # BREAK
  optimizer.load_state_dict(opt_state)


def train_val(trainer, model, train_loader, val_loader, model_state, opt_state, epoch=1):
  reset_(model, trainer.optimizer, model_state, opt_state)
  log_dict_train, _ = trainer.train(epoch, train_loader)
  with torch.no_grad():
    log_dict_val, preds = trainer.val(epoch, val_loader)
  log_dict_train.pop('time')
  log_dict_val.pop('time')
  return log_dict_train, log_dict_val, model.hm[-1].weight.detach().clone()


def target():
  torch.manual_seed(0)
  opt = argparse.Namespace(task='ctdet', exp_id='default', mse_loss=False, reg_loss='l1', dense_wh=False,
                           norm_wh=False, cat_spec_wh=False, num_stacks=1, eval_oracle_hm=False,
                           eval_oracle_wh=False, eval_oracle_offset=False, wh_weight=0.1, reg_offset=True,
                           off_weight=1, hm_weight=1, num_iters=-1, print_iter=1, gpus=[0],
                           device=torch.device('cpu'), debug=0, test=False, hide_data_time=True)
  model = TinyCenterNet(num_classes=3)
  optimizer = torch.optim.Adam(model.parameters(), 1.25e-4)
  trainer = CtdetTrainer(opt, model, optimizer)
  model_state = copy.deepcopy(model.state_dict())
  opt_state = copy.deepcopy(optimizer.state_dict())

  def make_batch(bs, max_objs, empty=False):
    hm = torch.rand(bs, 3, 8, 8) * 0.5
    ind = torch.randint(0, 64, (bs, max_objs))
    reg_mask = (torch.rand(bs, max_objs) > 0.3).to(torch.uint8)
    if not empty:
      for b in range(bs):
        for j in range(max_objs):
          if reg_mask[b, j]:
            hm[b, j % 3].view(-1)[ind[b, j]] = 1.0
    return {'input': torch.randn(bs, 3, 16, 16), 'hm': hm, 'reg_mask': reg_mask, 'ind': ind,
            'wh': torch.rand(bs, max_objs, 2) * 4, 'reg': torch.rand(bs, max_objs, 2)}

  train1 = [make_batch(2, 4) for _ in range(2)]
  val1 = [make_batch(2, 4)]
  train2 = [make_batch(2, 5, empty=True), make_batch(2, 5)]
  val2 = [make_batch(2, 5)]
  return [
    (train_val, (trainer, model, train1, val1, model_state, opt_state), {}),
    (train_val, (trainer, model, train2, val2, model_state, opt_state), {"epoch": 2}),
  ]


EXPECT = ("rewrite: `_neg_loss`'s `if num_pos == 0:` on a tensor sum has a branch-free equivalent "
          "(`torch.where(num_pos == 0, -neg_loss, -(pos_loss + neg_loss) / num_pos)`, both branches computed from "
          "the same tensors); the `run_epoch` bookkeeping (`.item()` meters, `time.time()`, `Bar.suffix` "
          "formatting, print, optimizer step) stays as eager glue")
