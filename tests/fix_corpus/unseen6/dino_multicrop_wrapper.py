"""DINO multi-crop forward: crops of equal resolution are grouped with
`torch.cumsum(torch.unique_consecutive(torch.tensor([inp.shape[-1] for inp in x]), return_counts=True)[1], 0)`, then
`for end_idx in idx_crops:` slices the Python list of crops with the tensor bounds `x[start_idx: end_idx]`
(facebookresearch/dino utils.py: MultiCropWrapper; vision_transformer.py: DINOHead, trunc_normal_ replaced by
nn.init.trunc_normal_). The ViT backbone is replaced by a minimal resolution-agnostic conv stand-in (its `fc`/`head`
set to Identity as in MultiCropWrapper.__init__); the head is DINOHead with a weight-normalised last layer. The calls
take two global 16x16 crops and four (first call) or two (second call) local 8x8 crops, as the DINO data
augmentation makes them."""
import torch
import torch.nn as nn


class Backbone(nn.Module):
    """Stand-in for vit_tiny: any crop size in, one embedding per crop out."""

    def __init__(self, embed_dim=16):
        super().__init__()
        self.patch = nn.Conv2d(3, embed_dim, 4, stride=4)
        self.norm = nn.LayerNorm(embed_dim)
        self.fc = nn.Linear(embed_dim, 10)
        self.head = nn.Linear(embed_dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).mean(-1)
        return self.head(self.fc(self.norm(x)))


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, use_bn=False, norm_last_layer=True, nlayers=3, hidden_dim=2048, bottleneck_dim=256):
        super().__init__()
        nlayers = max(nlayers, 1)
        if nlayers == 1:
            self.mlp = nn.Linear(in_dim, bottleneck_dim)
        else:
            layers = [nn.Linear(in_dim, hidden_dim)]
            if use_bn:
                layers.append(nn.BatchNorm1d(hidden_dim))
            layers.append(nn.GELU())
            for _ in range(nlayers - 2):
                layers.append(nn.Linear(hidden_dim, hidden_dim))
                if use_bn:
                    layers.append(nn.BatchNorm1d(hidden_dim))
                layers.append(nn.GELU())
            layers.append(nn.Linear(hidden_dim, bottleneck_dim))
            self.mlp = nn.Sequential(*layers)
        self.apply(self._init_weights)
        self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        if norm_last_layer:
            self.last_layer.weight_g.requires_grad = False

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.mlp(x)
        x = nn.functional.normalize(x, dim=-1, p=2)
        x = self.last_layer(x)
        return x


class MultiCropWrapper(nn.Module):
    """
    Perform forward pass separately on each resolution input.
    The inputs corresponding to a single resolution are clubbed and single
    forward is run on the same resolution inputs. Hence we do several
    forward passes = number of different resolutions used. We then
    concatenate all the output features and run the head forward on these
    concatenated features.
    """
    def __init__(self, backbone, head):
        super(MultiCropWrapper, self).__init__()
        # disable layers dedicated to ImageNet labels classification
        backbone.fc, backbone.head = nn.Identity(), nn.Identity()
        self.backbone = backbone
        self.head = head

    def forward(self, x):
        # convert to list
        if not isinstance(x, list):
            x = [x]
        idx_crops = torch.cumsum(torch.unique_consecutive(  # BREAK
            torch.tensor([inp.shape[-1] for inp in x]),
            return_counts=True,
        )[1], 0)
        start_idx, output = 0, torch.empty(0).to(x[0].device)
        for end_idx in idx_crops:
            _out = self.backbone(torch.cat(x[start_idx: end_idx]))  # BREAK
            # The output is a tuple with XCiT model. See:
            # https://github.com/facebookresearch/xcit/blob/master/xcit.py#L404-L405
            if isinstance(_out, tuple):
                _out = _out[0]
            # accumulate outputs
            output = torch.cat((output, _out))
            start_idx = end_idx
        # Run the head forward on the concatenated features.
        return self.head(output)


def _crops(batch, n_local):
    return ([torch.randn(batch, 3, 16, 16) for _ in range(2)]
            + [torch.randn(batch, 3, 8, 8) for _ in range(n_local)])


def target():
    torch.manual_seed(0)
    student = MultiCropWrapper(Backbone(16), DINOHead(16, 32, hidden_dim=32, bottleneck_dim=8)).eval()
    crops1 = _crops(2, 4)
    crops2 = _crops(2, 2)
    return [
        (student, (crops1,), {}),
        (student, (crops2,), {}),
    ]


EXPECT = ("rewrite: the crop grouping depends only on the crops' shapes, so compute it in Python "
          "(`itertools.groupby` over `[inp.shape[-1] for inp in x]` and accumulate the counts as ints) instead of "
          "`unique_consecutive`/`cumsum` on a tensor; the loop then slices the list with int bounds")
