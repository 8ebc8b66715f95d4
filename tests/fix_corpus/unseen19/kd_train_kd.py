"""One knowledge-distillation epoch `train_kd` from haitongli/knowledge-distillation-pytorch (`train.py`, stored
revision b1e4b6a, the one whose `train_kd` runs the teacher under `torch.no_grad()` per batch; an older revision
002b7ab that reads precomputed NumPy teacher outputs was read and not used), with `model/net.py` (stored revision
e4c4013: `Net`, `loss_fn_kd`, `accuracy`, `metrics`) and `utils.py` (`RunningAverage`). `train_kd` loops under
`with tqdm(total=len(dataloader)) as t:`, wraps batches in `Variable`, runs the student and the teacher, computes
the KL/cross-entropy KD loss, steps the optimizer, every `save_summary_steps` batches moves outputs and labels to
NumPy and computes a dict comprehension of metrics (`np.argmax` accuracy), updates a Python running average with
the loss, shows it with `t.set_postfix(loss='{:05.3f}'.format(loss_avg()))`, and finally averages the summaries
with `np.mean` over a dict comprehension and logs them with `logging.info`.
Adaptations for runnability, made before the first commit: `.cuda(async=True)` is written `.cuda(non_blocking=True)`
(`async` is a keyword since Python 3.7; the branch is off, `params.cuda` is False); `loss.data[0]` is written
`loss.item()` (indexing a 0-d tensor fails in current torch); and `train_kd` ends with `return metrics_mean` (the
original returns nothing; the added line makes the calls' outputs comparable). `utils.Params` (reads a JSON file) is
a stand-in holding the same fields; `utils.py`'s TensorFlow logger is not used. The teacher (a pretrained ResNet or
WRN loaded from a checkpoint in the original) is a randomly initialised original `Net` with more channels; the
data loader is a list of random CIFAR-shaped batches made in the factory. Student, teacher and Adam optimizer are
built in the factory, one student/optimizer pair per call. The student trains, so a call repeats exactly only on a
fresh copy. Randomness: `F.dropout` in the student draws from torch's global generator, seeded in the factory."""
import copy
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from tqdm import tqdm


# ---- utils.py
class Params():
    """Stand-in for utils.Params (which loads the same fields from a JSON file)."""

    def __init__(self, **params):
        self.__dict__.update(params)

    @property
    def dict(self):
        """Gives dict-like access to Params instance by `params.dict['learning_rate']"""
        return self.__dict__


class RunningAverage():
    """A simple class that maintains the running average of a quantity

    Example:
    ```
    loss_avg = RunningAverage()
    loss_avg.update(2)
    loss_avg.update(4)
    loss_avg() = 3
    ```
    """
    def __init__(self):
        self.steps = 0
        self.total = 0

    def update(self, val):
        self.total += val
        self.steps += 1

    def __call__(self):
        return self.total/float(self.steps)


class utils:
    RunningAverage = RunningAverage


# ---- model/net.py
class Net(nn.Module):
    def __init__(self, params):
        super(Net, self).__init__()
        self.num_channels = params.num_channels

        self.conv1 = nn.Conv2d(3, self.num_channels, 3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(self.num_channels)
        self.conv2 = nn.Conv2d(self.num_channels, self.num_channels*2, 3, stride=1, padding=1)
        self.bn2 = nn.BatchNorm2d(self.num_channels*2)
        self.conv3 = nn.Conv2d(self.num_channels*2, self.num_channels*4, 3, stride=1, padding=1)
        self.bn3 = nn.BatchNorm2d(self.num_channels*4)

        # 2 fully connected layers to transform the output of the convolution layers to the final output
        self.fc1 = nn.Linear(4*4*self.num_channels*4, self.num_channels*4)
        self.fcbn1 = nn.BatchNorm1d(self.num_channels*4)
        self.fc2 = nn.Linear(self.num_channels*4, 10)
        self.dropout_rate = params.dropout_rate

    def forward(self, s):
        #                                                  -> batch_size x 3 x 32 x 32
        # we apply the convolution layers, followed by batch normalisation, maxpool and relu x 3
        s = self.bn1(self.conv1(s))                         # batch_size x num_channels x 32 x 32
        s = F.relu(F.max_pool2d(s, 2))                      # batch_size x num_channels x 16 x 16
        s = self.bn2(self.conv2(s))                         # batch_size x num_channels*2 x 16 x 16
        s = F.relu(F.max_pool2d(s, 2))                      # batch_size x num_channels*2 x 8 x 8
        s = self.bn3(self.conv3(s))                         # batch_size x num_channels*4 x 8 x 8
        s = F.relu(F.max_pool2d(s, 2))                      # batch_size x num_channels*4 x 4 x 4

        # flatten the output for each image
        s = s.view(-1, 4*4*self.num_channels*4)             # batch_size x 4*4*num_channels*4

        # apply 2 fully connected layers with dropout
        s = F.dropout(F.relu(self.fcbn1(self.fc1(s))),
            p=self.dropout_rate, training=self.training)    # batch_size x self.num_channels*4
        s = self.fc2(s)                                     # batch_size x 10

        return s


def loss_fn_kd(outputs, labels, teacher_outputs, params):
    """
    Compute the knowledge-distillation (KD) loss given outputs, labels.
    "Hyperparameters": temperature and alpha

    NOTE: the KL Divergence for PyTorch comparing the softmaxs of teacher
    and student expects the input tensor to be log probabilities! See Issue #2
    """
    alpha = params.alpha
    T = params.temperature
    KD_loss = nn.KLDivLoss()(F.log_softmax(outputs/T, dim=1),
                             F.softmax(teacher_outputs/T, dim=1)) * (alpha * T * T) + \
              F.cross_entropy(outputs, labels) * (1. - alpha)

    return KD_loss


def accuracy(outputs, labels):
    """
    Compute the accuracy, given the outputs and labels for all images.

    Args:
        outputs: (np.ndarray) output of the model
        labels: (np.ndarray) [0, 1, ..., num_classes-1]

    Returns: (float) accuracy in [0,1]
    """
    outputs = np.argmax(outputs, axis=1)
    return np.sum(outputs==labels)/float(labels.size)


# maintain all metrics required in this dictionary- these are used in the training and evaluation loops
metrics = {
    'accuracy': accuracy,
    # could add more metrics such as accuracy for each token type
}


# ---- train.py
def train_kd(model, teacher_model, optimizer, loss_fn_kd, dataloader, metrics, params):
    """Train the model on `num_steps` batches

    Args:
        model: (torch.nn.Module) the neural network
        optimizer: (torch.optim) optimizer for parameters of model
        loss_fn_kd:
        dataloader:
        metrics: (dict)
        params: (Params) hyperparameters
    """

    # set model to training mode
    model.train()
    teacher_model.eval()

    # summary for current training loop and a running average object for loss
    summ = []
    loss_avg = utils.RunningAverage()

    # Use tqdm for progress bar
    with tqdm(total=len(dataloader)) as t:  # BREAK
        for i, (train_batch, labels_batch) in enumerate(dataloader):
            # move to GPU if available
            if params.cuda:
                train_batch, labels_batch = train_batch.cuda(non_blocking=True), \
                                            labels_batch.cuda(non_blocking=True)
            # convert to torch Variables
            train_batch, labels_batch = Variable(train_batch), Variable(labels_batch)

            # compute model output, fetch teacher output, and compute KD loss
            output_batch = model(train_batch)

            # get one batch output from teacher_outputs list

            with torch.no_grad():
                output_teacher_batch = teacher_model(train_batch)
            if params.cuda:
                output_teacher_batch = output_teacher_batch.cuda(non_blocking=True)

            loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch, params)

            # clear previous gradients, compute gradients of all variables wrt loss
            optimizer.zero_grad()
            loss.backward()

            # performs updates using calculated gradients
            optimizer.step()  # BREAK

            # Evaluate summaries only once in a while
            if i % params.save_summary_steps == 0:
                # extract data from torch Variable, move to cpu, convert to numpy arrays
                output_batch = output_batch.data.cpu().numpy()
                labels_batch = labels_batch.data.cpu().numpy()

                # compute all metrics on this batch
                summary_batch = {metric:metrics[metric](output_batch, labels_batch)  # BREAK
                                 for metric in metrics}
                summary_batch['loss'] = loss.item()
                summ.append(summary_batch)

            # update the average loss
            loss_avg.update(loss.item())

            t.set_postfix(loss='{:05.3f}'.format(loss_avg()))
            t.update()

    # compute mean of all metrics in summary
    metrics_mean = {metric:np.mean([x[metric] for x in summ]) for metric in summ[0]}  # BREAK
    metrics_string = " ; ".join("{}: {:05.3f}".format(k, v) for k, v in metrics_mean.items())
    logging.info("- Train metrics: " + metrics_string)
    return metrics_mean


def target():
    torch.manual_seed(0)
    params1 = Params(num_channels=4, dropout_rate=0.5, alpha=0.9, temperature=4.0, cuda=False,
                     save_summary_steps=1, learning_rate=1e-3)
    params2 = Params(num_channels=4, dropout_rate=0.5, alpha=0.5, temperature=2.0, cuda=False,
                     save_summary_steps=2, learning_rate=1e-3)
    teacher_model = Net(Params(num_channels=8, dropout_rate=0.3))
    model = Net(params1)
    optimizer = optim.Adam(model.parameters(), lr=params1.learning_rate)
    model2, optimizer2 = copy.deepcopy((model, optimizer))

    def loader(n, bs):
        return [(torch.randn(bs, 3, 32, 32), torch.randint(0, 10, (bs,))) for _ in range(n)]

    dl1, dl2 = loader(3, 4), loader(4, 3)
    return [
        (train_kd, (model, teacher_model, optimizer, loss_fn_kd, dl1, metrics, params1), {}),
        (train_kd, (model2, teacher_model, optimizer2, loss_fn_kd, dl2, metrics, params2), {}),
    ]


EXPECT = ("extract: the per-batch NumPy metrics, loss.item() running average, tqdm postfix and logging are "
          "host-side bookkeeping around a compilable student/teacher/KD-loss step; the optimizer step stays eager glue")
