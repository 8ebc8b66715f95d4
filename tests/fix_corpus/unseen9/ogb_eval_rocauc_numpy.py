"""OGB graph-property evaluation (snap-stanford/ogb examples/graphproppred/mol/main_pyg.py: `eval`;
ogb/graphproppred/evaluate.py: `Evaluator.__init__/_parse_and_check_input/eval/_eval_rocauc/_eval_rmse`). The loop
walks a `tqdm`-wrapped PyG `DataLoader`, skips a batch with `if batch.x.shape[0] == 1:`, runs the model under
`torch.no_grad()`, collects `batch.y.view(pred.shape).detach().cpu()` and `pred.detach().cpu()`, concatenates and
converts with `.numpy()`; the evaluator re-checks `isinstance(y_true, torch.Tensor)` (then
`.detach().cpu().numpy()`), validates shapes (raising `RuntimeError`s), and per task tests
`np.sum(y_true[:,i] == 1) > 0 and np.sum(y_true[:,i] == 0) > 0`, masks NaN labels with
`is_valid = y_true[:,i] == y_true[:,i]`, and averages `roc_auc_score` (or per-task RMSE) in Python.
Adaptations: `Evaluator.__init__` reads `master.csv` with pandas (not installed); a dict `META_INFO` with the same two
fields for the two datasets used (`ogbg-moltox21`: 12 tasks, rocauc; `ogbg-molesol`: 1 task, rmse) stands in for it;
scikit-learn's `roc_auc_score` (not installed) is replaced by a minimal rank-based stand-in (SciPy `rankdata`,
Mann-Whitney form); the `prcauc`/`accuracy` metrics and the `expected_*_format` properties are left out. The dataset
download is replaced by small seeded random graphs (`torch_geometric.data.Data`; tox21-like labels with NaNs for the
first call, real-valued targets for the second) in `torch_geometric.loader.DataLoader` (the example imports the
older `torch_geometric.data.DataLoader`), and the `GNN` (GIN with virtual node) by a one-layer message-passing
stand-in with `global_mean_pool`. No state is mutated between calls (the model is in eval mode, no grad)."""
import numpy as np
import torch
from scipy.stats import rankdata
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import global_mean_pool
from tqdm import tqdm

# Adaptation: stand-in for pd.read_csv(master.csv); the rows' "num tasks" and "eval metric" fields
META_INFO = {
    "ogbg-moltox21": {"num tasks": 12, "eval metric": "rocauc"},
    "ogbg-molesol": {"num tasks": 1, "eval metric": "rmse"},
}


def roc_auc_score(y_true, y_score):
    """Adaptation: stand-in for sklearn.metrics.roc_auc_score (binary labels, rank form)."""
    y_true = np.asarray(y_true)
    ranks = rankdata(y_score)
    n_pos = np.sum(y_true == 1)
    n_neg = len(y_true) - n_pos
    return (np.sum(ranks[y_true == 1]) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)  # BREAK


### Evaluator for graph classification
class Evaluator:
    def __init__(self, name):
        self.name = name

        meta_info = META_INFO
        if not self.name in meta_info:
            print(self.name)
            error_mssg = "Invalid dataset name {}.\n".format(self.name)
            error_mssg += "Available datasets are as follows:\n"
            error_mssg += "\n".join(meta_info.keys())
            raise ValueError(error_mssg)

        self.num_tasks = int(meta_info[self.name]["num tasks"])
        self.eval_metric = meta_info[self.name]["eval metric"]


    def _parse_and_check_input(self, input_dict):
        if self.eval_metric == "rocauc" or self.eval_metric == 'prcauc' or self.eval_metric == "rmse" or self.eval_metric == "accuracy":
            if not "y_true" in input_dict:
                RuntimeError("Missing key of y_true")
            if not "y_pred" in input_dict:
                RuntimeError("Missing key of y_pred")

            y_true, y_pred = input_dict["y_true"], input_dict["y_pred"]

            # converting to torch.Tensor to numpy on cpu
            if torch is not None and isinstance(y_true, torch.Tensor):
                y_true = y_true.detach().cpu().numpy()

            if torch is not None and isinstance(y_pred, torch.Tensor):
                y_pred = y_pred.detach().cpu().numpy()


            ## check type
            if not (isinstance(y_true, np.ndarray) and isinstance(y_true, np.ndarray)):
                raise RuntimeError("Arguments to Evaluator need to be either numpy ndarray or torch tensor")

            if not y_true.shape == y_pred.shape:
                raise RuntimeError("Shape of y_true and y_pred must be the same")

            if not y_true.ndim == 2:
                raise RuntimeError("y_true and y_pred mush to 2-dim arrray, {}-dim array given".format(y_true.ndim))

            if not y_true.shape[1] == self.num_tasks:
                raise RuntimeError("Number of tasks for {} should be {} but {} given".format(self.name, self.num_tasks, y_true.shape[1]))

            return y_true, y_pred

        else:
            raise ValueError("Undefined eval metric %s " % (self.eval_metric))


    def eval(self, input_dict):

        if self.eval_metric == "rocauc":
            y_true, y_pred = self._parse_and_check_input(input_dict)
            return self._eval_rocauc(y_true, y_pred)
        elif self.eval_metric == "rmse":
            y_true, y_pred = self._parse_and_check_input(input_dict)
            return self._eval_rmse(y_true, y_pred)
        else:
            raise ValueError("Undefined eval metric %s " % (self.eval_metric))

    def _eval_rocauc(self, y_true, y_pred):
        """
            compute ROC-AUC averaged across tasks
        """

        rocauc_list = []

        for i in range(y_true.shape[1]):
            #AUC is only defined when there is at least one positive data.
            if np.sum(y_true[:,i] == 1) > 0 and np.sum(y_true[:,i] == 0) > 0:  # BREAK
                is_valid = y_true[:,i] == y_true[:,i]
                rocauc_list.append(roc_auc_score(y_true[is_valid,i], y_pred[is_valid,i]))

        if len(rocauc_list) == 0:
            raise RuntimeError("No positively labeled data available. Cannot compute ROC-AUC.")

        return {"rocauc": sum(rocauc_list)/len(rocauc_list)}

    def _eval_rmse(self, y_true, y_pred):
        """
            compute RMSE score averaged across tasks
        """
        rmse_list = []

        for i in range(y_true.shape[1]):
            is_valid = y_true[:,i] == y_true[:,i]
            rmse_list.append(np.sqrt(((y_true[is_valid] - y_pred[is_valid])**2).mean()))  # BREAK

        return {"rmse": sum(rmse_list)/len(rmse_list)}


class GNNStandIn(torch.nn.Module):
    """Adaptation: stand-in for examples' GNN (one sum-aggregation layer, mean pooling, a linear head)."""

    def __init__(self, in_dim, emb_dim, num_tasks):
        super().__init__()
        self.lin_in = torch.nn.Linear(in_dim, emb_dim)
        self.lin_msg = torch.nn.Linear(emb_dim, emb_dim)
        self.graph_pred_linear = torch.nn.Linear(emb_dim, num_tasks)

    def forward(self, batched_data):
        x, edge_index, batch = batched_data.x, batched_data.edge_index, batched_data.batch
        h = torch.relu(self.lin_in(x))
        agg = torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]])
        h = torch.relu(h + self.lin_msg(agg))
        return self.graph_pred_linear(global_mean_pool(h, batch))


def eval(model, device, loader, evaluator):
    model.eval()
    y_true = []
    y_pred = []

    for step, batch in enumerate(tqdm(loader, desc="Iteration")):  # BREAK
        batch = batch.to(device)

        if batch.x.shape[0] == 1:
            pass
        else:
            with torch.no_grad():
                pred = model(batch)

            y_true.append(batch.y.view(pred.shape).detach().cpu())
            y_pred.append(pred.detach().cpu())

    y_true = torch.cat(y_true, dim = 0).numpy()
    y_pred = torch.cat(y_pred, dim = 0).numpy()

    input_dict = {"y_true": y_true, "y_pred": y_pred}

    return evaluator.eval(input_dict)


def _graphs(gen, n_graphs, num_tasks, classification):
    graphs = []
    for g in range(n_graphs):
        n = int(torch.randint(3, 7, (1,), generator=gen))
        x = torch.randn(n, 4, generator=gen)
        src = torch.arange(n)
        edge_index = torch.stack([torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src])])
        if classification:
            y = (torch.rand(1, num_tasks, generator=gen) < 0.4).float()
            y[torch.rand(1, num_tasks, generator=gen) < 0.15] = float('nan')
        else:
            y = torch.randn(1, num_tasks, generator=gen)
        graphs.append(Data(x=x, edge_index=edge_index, y=y))
    return graphs


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model_cls = GNNStandIn(4, 16, 12)
    model_reg = GNNStandIn(4, 16, 1)
    loader_cls = DataLoader(_graphs(gen, 40, 12, True), batch_size=8, shuffle=False)
    loader_reg = DataLoader(_graphs(gen, 20, 1, False), batch_size=6, shuffle=False)
    device = torch.device("cpu")
    return [
        (eval, (model_cls, device, loader_cls, Evaluator("ogbg-moltox21")), {}),
        (eval, (model_reg, device, loader_reg, Evaluator("ogbg-molesol")), {}),
    ]


EXPECT = ("caller: the evaluation is host work by design: predictions are collected per batch, moved to NumPy "
          "(`.numpy()`), and scored per task with NumPy masks (`y_true[:,i] == y_true[:,i]`) and a ROC-AUC on the "
          "host; compile the model's forward and keep the loader loop and `Evaluator.eval` eager in the caller")
