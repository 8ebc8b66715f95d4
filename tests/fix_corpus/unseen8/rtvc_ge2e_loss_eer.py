"""The speaker encoder's GE2E training step: the NumPy batch of mel frames goes in with `torch.from_numpy`, `sync(device)`
brackets the LSTM forward, and `SpeakerEncoder.loss` builds the similarity matrix with a per-speaker Python loop over
NumPy index arrays (`mask_matrix = 1 - np.eye(...)`, `mask = np.where(mask_matrix[j])[0]`,
`sim_matrix[mask, :, j] = (embeds[mask] * centroids_incl[j]).sum(dim=2)`), the targets from
`torch.from_numpy(np.repeat(np.arange(speakers_per_batch), utterances_per_speaker))`, the cross-entropy loss, and then,
under `torch.no_grad()`, the equal error rate on the host: `sim_matrix.detach().cpu().numpy()`, a ROC curve and
`brentq(lambda x: 1. - x - interp1d(fpr, tpr)(x), 0., 1.)` from SciPy (CorentinJ/Real-Time-Voice-Cloning
encoder/model.py: `SpeakerEncoder.__init__/forward/similarity_matrix/loss`; encoder/train.py: `sync` and the loop
body from `inputs = torch.from_numpy(speaker_batch.data).to(device)` to `loss, eer = model.loss(embeds_loss)` and `sync(loss_device)`).
Adaptations: the hyper-parameters of encoder/params_model.py / params_data.py are shrunk (40 mel channels -> 8,
hidden 256 -> 16, embedding 256 -> 8, 3 LSTM layers -> 2; 3 speakers x 4 utterances of 10 frames) and the model is
randomly initialised; `np.int` (removed from NumPy) is written `int`; scikit-learn is not installed, so
`sklearn.metrics.roc_curve` is replaced by a minimal NumPy stand-in (`roc_curve` below: thresholds at the distinct
scores, `fpr`/`tpr` with a leading `(0, 0)` point); the `profiler.tick(...)` calls, the backward pass,
`do_gradient_ops` and the optimizer step are left out. The step returns `(loss, eer)`. No state is changed."""
import numpy as np
import torch
from scipy.interpolate import interp1d
from scipy.optimize import brentq
from torch import nn

## Model parameters (shrunk)
model_hidden_size = 16
model_embedding_size = 8
model_num_layers = 2

## Data parameters (shrunk)
mel_n_channels = 8


def roc_curve(y_true, y_score):
    """Stand-in for sklearn.metrics.roc_curve (no drop_intermediate)."""
    order = np.argsort(-y_score, kind="mergesort")
    y_score = y_score[order]
    y_true = y_true[order]
    distinct = np.where(np.diff(y_score))[0]  # BREAK
    threshold_idxs = np.r_[distinct, y_true.size - 1]  # BREAK
    tps = np.cumsum(y_true)[threshold_idxs]
    fps = 1 + threshold_idxs - tps
    tps = np.r_[0, tps]  # BREAK
    fps = np.r_[0, fps]  # BREAK
    thresholds = np.r_[np.inf, y_score[threshold_idxs]]  # BREAK
    return fps / fps[-1], tps / tps[-1], thresholds


def sync(device: torch.device):
    # For correct profiling (cuda operations are async)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SpeakerEncoder(nn.Module):
    def __init__(self, device, loss_device):
        super().__init__()
        self.loss_device = loss_device

        # Network defition
        self.lstm = nn.LSTM(input_size=mel_n_channels,
                            hidden_size=model_hidden_size,
                            num_layers=model_num_layers,
                            batch_first=True).to(device)
        self.linear = nn.Linear(in_features=model_hidden_size,
                                out_features=model_embedding_size).to(device)
        self.relu = torch.nn.ReLU().to(device)

        # Cosine similarity scaling (with fixed initial parameter values)
        self.similarity_weight = nn.Parameter(torch.tensor([10.])).to(loss_device)
        self.similarity_bias = nn.Parameter(torch.tensor([-5.])).to(loss_device)

        # Loss
        self.loss_fn = nn.CrossEntropyLoss().to(loss_device)

    def forward(self, utterances, hidden_init=None):
        """
        Computes the embeddings of a batch of utterance spectrograms.

        :param utterances: batch of mel-scale filterbanks of same duration as a tensor of shape
        (batch_size, n_frames, n_channels)
        :param hidden_init: initial hidden state of the LSTM as a tensor of shape (num_layers,
        batch_size, hidden_size). Will default to a tensor of zeros if None.
        :return: the embeddings as a tensor of shape (batch_size, embedding_size)
        """
        # Pass the input through the LSTM layers and retrieve all outputs, the final hidden state
        # and the final cell state.
        out, (hidden, cell) = self.lstm(utterances, hidden_init)  # BREAK

        # We take only the hidden state of the last layer
        embeds_raw = self.relu(self.linear(hidden[-1]))

        # L2-normalize it
        embeds = embeds_raw / torch.norm(embeds_raw, dim=1, keepdim=True)

        return embeds

    def similarity_matrix(self, embeds):
        """
        Computes the similarity matrix according the section 2.1 of GE2E.

        :param embeds: the embeddings as a tensor of shape (speakers_per_batch,
        utterances_per_speaker, embedding_size)
        :return: the similarity matrix as a tensor of shape (speakers_per_batch,
        utterances_per_speaker, speakers_per_batch)
        """
        speakers_per_batch, utterances_per_speaker = embeds.shape[:2]

        # Inclusive centroids (1 per speaker). Cloning is needed for reverse differentiation
        centroids_incl = torch.mean(embeds, dim=1, keepdim=True)
        centroids_incl = centroids_incl.clone() / torch.norm(centroids_incl, dim=2, keepdim=True)

        # Exclusive centroids (1 per utterance)
        centroids_excl = (torch.sum(embeds, dim=1, keepdim=True) - embeds)
        centroids_excl /= (utterances_per_speaker - 1)
        centroids_excl = centroids_excl.clone() / torch.norm(centroids_excl, dim=2, keepdim=True)

        # Similarity matrix. The cosine similarity of already 2-normed vectors is simply the dot
        # product of these vectors (which is just an element-wise multiplication reduced by a sum).
        # We vectorize the computation for efficiency.
        sim_matrix = torch.zeros(speakers_per_batch, utterances_per_speaker,
                                 speakers_per_batch).to(self.loss_device)
        mask_matrix = 1 - np.eye(speakers_per_batch, dtype=int)
        for j in range(speakers_per_batch):
            mask = np.where(mask_matrix[j])[0]  # BREAK
            sim_matrix[mask, :, j] = (embeds[mask] * centroids_incl[j]).sum(dim=2)
            sim_matrix[j, :, j] = (embeds[j] * centroids_excl[j]).sum(dim=1)

        sim_matrix = sim_matrix * self.similarity_weight + self.similarity_bias
        return sim_matrix

    def loss(self, embeds):
        """
        Computes the softmax loss according the section 2.1 of GE2E.

        :param embeds: the embeddings as a tensor of shape (speakers_per_batch,
        utterances_per_speaker, embedding_size)
        :return: the loss and the EER for this batch of embeddings.
        """
        speakers_per_batch, utterances_per_speaker = embeds.shape[:2]

        # Loss
        sim_matrix = self.similarity_matrix(embeds)
        sim_matrix = sim_matrix.reshape((speakers_per_batch * utterances_per_speaker,
                                         speakers_per_batch))
        ground_truth = np.repeat(np.arange(speakers_per_batch), utterances_per_speaker)
        target = torch.from_numpy(ground_truth).long().to(self.loss_device)
        loss = self.loss_fn(sim_matrix, target)

        # EER (not backpropagated)
        with torch.no_grad():
            inv_argmax = lambda i: np.eye(1, speakers_per_batch, i, dtype=int)[0]  # BREAK
            labels = np.array([inv_argmax(i) for i in ground_truth])
            preds = sim_matrix.detach().cpu().numpy()

            # Snippet from https://yangcha.github.io/EER-ROC/
            fpr, tpr, thresholds = roc_curve(labels.flatten(), preds.flatten())
            eer = brentq(lambda x: 1. - x - interp1d(fpr, tpr)(x), 0., 1.)

        return loss, eer


def train_step(model, speaker_batch_data, speakers_per_batch, utterances_per_speaker, device, loss_device):
    # Forward pass
    inputs = torch.from_numpy(speaker_batch_data).to(device)
    sync(device)
    embeds = model(inputs)
    sync(device)
    embeds_loss = embeds.view((speakers_per_batch, utterances_per_speaker, -1)).to(loss_device)
    loss, eer = model.loss(embeds_loss)
    sync(loss_device)
    return loss, eer


def target():
    torch.manual_seed(0)
    device = torch.device("cpu")
    loss_device = torch.device("cpu")
    model = SpeakerEncoder(device, loss_device)
    rng = np.random.default_rng(0)
    speakers, utterances = 3, 4
    # utterances of a speaker share a per-speaker offset, so the embeddings cluster a little
    def batch():
        base = rng.normal(size=(speakers, 1, 1, mel_n_channels)).astype(np.float32)
        frames = base + 0.5 * rng.normal(size=(speakers, utterances, 10, mel_n_channels)).astype(np.float32)
        return frames.reshape(speakers * utterances, 10, mel_n_channels)
    data1 = batch()
    data2 = batch()
    return [
        (train_step, (model, data1, speakers, utterances, device, loss_device), {}),
        (train_step, (model, data2, speakers, utterances, device, loss_device), {}),
    ]


EXPECT = ("split: the EER is host work by design (`.cpu().numpy()`, the ROC curve, SciPy's `brentq` over an "
          "`interp1d`), so it should run eagerly after a compiled part that computes the embeddings, the similarity "
          "matrix and the loss; inside that part the NumPy index masks of `similarity_matrix` (`np.where(mask_matrix[j])`)"
          " and `torch.from_numpy(np.repeat(...))` can be traced or rewritten as tensor indices. `extract` of the "
          "`with torch.no_grad():` EER block into a helper under an escape hatch is the same fix written in the source")
