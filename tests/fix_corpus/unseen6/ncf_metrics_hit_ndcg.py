"""NCF evaluation metrics: per test batch, `torch.topk` of the predictions, then
`recommends = torch.take(item, indices).cpu().numpy().tolist()` and `gt_item = item[0].item()`, Python membership
(`gt_item in pred_items`), `pred_items.index(gt_item)` and `np.reciprocal(np.log2(index+2))`, averaged with `np.mean`
(guoyang9/NCF evaluate.py: hit, ndcg, metrics; model.py: NCF with model='NeuMF-end'). The stored evaluate.py is a
revision with debug prints of each batch; the upstream form without them is kept, and the `.cuda()` moves are
dropped (CPU). The test loader is a list of (user, item, label) batches as the NCF test sampler makes them: one user,
its held-out positive item first, then negatives. Dropout is 0 and the model is in eval mode."""
import numpy as np
import torch
import torch.nn as nn


def hit(gt_item, pred_items):
    if gt_item in pred_items:
        return 1
    return 0


def ndcg(gt_item, pred_items):
    if gt_item in pred_items:
        index = pred_items.index(gt_item)
        return np.reciprocal(np.log2(index+2))
    return 0


def metrics(model, test_loader, top_k):
    HR, NDCG = [], []

    for user, item, label in test_loader:
        predictions = model(user, item)
        _, indices = torch.topk(predictions, top_k)
        recommends = torch.take(
                item, indices).cpu().numpy().tolist()  # BREAK

        gt_item = item[0].item()
        HR.append(hit(gt_item, recommends))
        NDCG.append(ndcg(gt_item, recommends))

    return np.mean(HR), np.mean(NDCG)


class NCF(nn.Module):
    def __init__(self, user_num, item_num, factor_num, num_layers,
                 dropout, model, GMF_model=None, MLP_model=None):
        super(NCF, self).__init__()
        """
        user_num: number of users;
        item_num: number of items;
        factor_num: number of predictive factors;
        num_layers: the number of layers in MLP model;
        dropout: dropout rate between fully connected layers;
        model: 'MLP', 'GMF', 'NeuMF-end', and 'NeuMF-pre';
        GMF_model: pre-trained GMF weights;
        MLP_model: pre-trained MLP weights.
        """
        self.dropout = dropout
        self.model = model
        self.GMF_model = GMF_model
        self.MLP_model = MLP_model

        self.embed_user_GMF = nn.Embedding(user_num, factor_num)
        self.embed_item_GMF = nn.Embedding(item_num, factor_num)
        self.embed_user_MLP = nn.Embedding(
                user_num, factor_num * (2 ** (num_layers - 1)))
        self.embed_item_MLP = nn.Embedding(
                item_num, factor_num * (2 ** (num_layers - 1)))

        MLP_modules = []
        for i in range(num_layers):
            input_size = factor_num * (2 ** (num_layers - i))
            MLP_modules.append(nn.Dropout(p=self.dropout))
            MLP_modules.append(nn.Linear(input_size, input_size//2))
            MLP_modules.append(nn.ReLU())
        self.MLP_layers = nn.Sequential(*MLP_modules)

        if self.model in ['MLP', 'GMF']:
            predict_size = factor_num
        else:
            predict_size = factor_num * 2
        self.predict_layer = nn.Linear(predict_size, 1)

        self._init_weight_()

    def _init_weight_(self):
        """ We leave the weights initialization here. """
        if not self.model == 'NeuMF-pre':
            nn.init.normal_(self.embed_user_GMF.weight, std=0.01)
            nn.init.normal_(self.embed_user_MLP.weight, std=0.01)
            nn.init.normal_(self.embed_item_GMF.weight, std=0.01)
            nn.init.normal_(self.embed_item_MLP.weight, std=0.01)

            for m in self.MLP_layers:
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
            nn.init.kaiming_uniform_(self.predict_layer.weight,
                                    a=1, nonlinearity='sigmoid')

            for m in self.modules():
                if isinstance(m, nn.Linear) and m.bias is not None:
                    m.bias.data.zero_()

    def forward(self, user, item):
        if not self.model == 'MLP':
            embed_user_GMF = self.embed_user_GMF(user)
            embed_item_GMF = self.embed_item_GMF(item)
            output_GMF = embed_user_GMF * embed_item_GMF
        if not self.model == 'GMF':
            embed_user_MLP = self.embed_user_MLP(user)
            embed_item_MLP = self.embed_item_MLP(item)
            interaction = torch.cat((embed_user_MLP, embed_item_MLP), -1)
            output_MLP = self.MLP_layers(interaction)

        if self.model == 'GMF':
            concat = output_GMF
        elif self.model == 'MLP':
            concat = output_MLP
        else:
            concat = torch.cat((output_GMF, output_MLP), -1)

        prediction = self.predict_layer(concat)
        return prediction.view(-1)


def _test_loader(n_users, n_items, n_batches, n_neg):
    loader = []
    for _ in range(n_batches):
        u = torch.randint(0, n_users, (1,)).item()
        items = torch.randperm(n_items)[:n_neg + 1]
        loader.append((torch.full((n_neg + 1,), u, dtype=torch.long), items, torch.zeros(n_neg + 1)))
    return loader


def target():
    torch.manual_seed(0)
    model = NCF(20, 50, 8, 2, 0.0, 'NeuMF-end').eval()
    loader1 = _test_loader(20, 50, 4, 9)
    loader2 = _test_loader(20, 50, 4, 9)
    return [
        (metrics, (model, loader1, 3), {}),
        (metrics, (model, loader2, 3), {}),
    ]


EXPECT = ("rewrite: compute hit and NDCG on tensors per batch (`pos = (indices == 0).nonzero`-free form: "
          "`hit = (indices == 0).any()`, `ndcg = ((indices == 0).float() / torch.log2(torch.arange(k) + 2.)).sum()`, "
          "since the ground-truth item is `item[0]`) and keep the NumPy means in the caller; or split: compile the "
          "model call only and leave the list/NumPy bookkeeping of `metrics` eager")
