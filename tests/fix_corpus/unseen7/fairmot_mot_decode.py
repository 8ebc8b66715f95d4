"""FairMOT's detection decoding before association: in `JDETracker.update`, under `torch.no_grad()`, the heads'
outputs are post-processed with `hm = output['hm'].sigmoid_()`, `F.normalize(id_feature, dim=1)`,
`dets, inds = mot_decode(hm, wh, reg=reg, ltrb=self.opt.ltrb, K=self.opt.K)` (3x3 max-pool NMS on the heatmap,
two-stage `torch.topk`, integer/true division of the flat indices, gathers of the box sizes and offsets) and
`_tranpose_and_gather_feat(id_feature, inds)` for the re-ID embeddings of the K peaks (ifzhang/FairMOT
src/lib/models/decode.py: _nms, _topk, mot_decode; src/lib/models/utils.py: _gather_feat, _tranpose_and_gather_feat;
src/lib/tracker/multitracker.py: JDETracker.update). The DLA-34 backbone and heads are replaced by a small
convolutional stand-in producing the same `hm`/`wh`/`id`/`reg` dictionary (1 class, ltrb boxes, 8-d embeddings) on a
16x16 output map; K = 10. The host-side parts of `update` after decoding (`.cpu().numpy()`, `post_process`, the
Kalman-filter association) stay outside the call. Expected not to break (a control)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _gather_feat(feat, ind, mask=None):
    dim  = feat.size(2)
    ind  = ind.unsqueeze(2).expand(ind.size(0), ind.size(1), dim)
    feat = feat.gather(1, ind)
    if mask is not None:
        mask = mask.unsqueeze(2).expand_as(feat)
        feat = feat[mask]
        feat = feat.view(-1, dim)
    return feat


def _tranpose_and_gather_feat(feat, ind):
    feat = feat.permute(0, 2, 3, 1).contiguous()
    feat = feat.view(feat.size(0), -1, feat.size(3))
    feat = _gather_feat(feat, ind)
    return feat


def _nms(heat, kernel=3):
    pad = (kernel - 1) // 2

    hmax = nn.functional.max_pool2d(
        heat, (kernel, kernel), stride=1, padding=pad)
    keep = (hmax == heat).float()
    return heat * keep


def _topk(scores, K=40):
    batch, cat, height, width = scores.size()

    topk_scores, topk_inds = torch.topk(scores.view(batch, cat, -1), K)

    topk_inds = topk_inds % (height * width)
    topk_ys   = torch.true_divide(topk_inds, width).int().float()
    topk_xs   = (topk_inds % width).int().float()

    topk_score, topk_ind = torch.topk(topk_scores.view(batch, -1), K)
    topk_clses = torch.true_divide(topk_ind, K).int()
    topk_inds = _gather_feat(
        topk_inds.view(batch, -1, 1), topk_ind).view(batch, K)
    topk_ys = _gather_feat(topk_ys.view(batch, -1, 1), topk_ind).view(batch, K)
    topk_xs = _gather_feat(topk_xs.view(batch, -1, 1), topk_ind).view(batch, K)

    return topk_score, topk_inds, topk_clses, topk_ys, topk_xs


def mot_decode(heat, wh, reg=None, ltrb=False, K=100):
    batch, cat, height, width = heat.size()

    # heat = torch.sigmoid(heat)
    # perform nms on heatmaps
    heat = _nms(heat)

    scores, inds, clses, ys, xs = _topk(heat, K=K)
    if reg is not None:
        reg = _tranpose_and_gather_feat(reg, inds)
        reg = reg.view(batch, K, 2)
        xs = xs.view(batch, K, 1) + reg[:, :, 0:1]
        ys = ys.view(batch, K, 1) + reg[:, :, 1:2]
    else:
        xs = xs.view(batch, K, 1) + 0.5
        ys = ys.view(batch, K, 1) + 0.5
    wh = _tranpose_and_gather_feat(wh, inds)
    if ltrb:
        wh = wh.view(batch, K, 4)
    else:
        wh = wh.view(batch, K, 2)
    clses = clses.view(batch, K, 1).float()
    scores = scores.view(batch, K, 1)
    if ltrb:
        bboxes = torch.cat([xs - wh[..., 0:1],
                            ys - wh[..., 1:2],
                            xs + wh[..., 2:3],
                            ys + wh[..., 3:4]], dim=2)
    else:
        bboxes = torch.cat([xs - wh[..., 0:1] / 2,
                            ys - wh[..., 1:2] / 2,
                            xs + wh[..., 0:1] / 2,
                            ys + wh[..., 1:2] / 2], dim=2)
    detections = torch.cat([bboxes, scores, clses], dim=2)

    return detections, inds


class TinyMOTNet(nn.Module):
    """Stand-in for the DLA-34 with hm/wh/id/reg heads; returns a list whose last entry is the heads' dict."""

    def __init__(self, ch=8, heads=None):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, ch, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, stride=2, padding=1), nn.ReLU())
        self.heads = heads
        for head, classes in heads.items():
            self.__setattr__(head, nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
                                                 nn.Conv2d(ch, classes, 1)))

    def forward(self, x):
        y = self.base(x)
        z = {}
        for head in self.heads:
            z[head] = self.__getattr__(head)(y)
        return [z]


def decode_step(model, im_blob, reg_offset=True, ltrb=True, K=10):
    """The no-grad part of JDETracker.update up to the embeddings of the detections."""
    with torch.no_grad():
        output = model(im_blob)[-1]
        hm = output['hm'].sigmoid_()
        wh = output['wh']
        id_feature = output['id']
        id_feature = F.normalize(id_feature, dim=1)

        reg = output['reg'] if reg_offset else None
        dets, inds = mot_decode(hm, wh, reg=reg, ltrb=ltrb, K=K)  # NO BREAK in torch 2.13
        id_feature = _tranpose_and_gather_feat(id_feature, inds)
        id_feature = id_feature.squeeze(0)
    return dets, id_feature


def target():
    torch.manual_seed(0)
    model = TinyMOTNet(heads={'hm': 1, 'wh': 4, 'id': 8, 'reg': 2})
    model.eval()
    im1 = torch.randn(1, 3, 64, 64)
    im2 = torch.randn(1, 3, 64, 64)
    return [
        (decode_step, (model, im1), {}),
        (decode_step, (model, im2), {}),
    ]


EXPECT = "none: does not break (max-pool NMS, topk, integer/true division and gathers are all traceable tensor ops)"
