"""Training with early stopping on the validation loss (Bjarten/early-stopping-pytorch:
`early_stopping_pytorch/early_stopping.py`: `EarlyStopping`; `MNIST_Early_Stopping_example.ipynb`: `Net`,
`train_model`). `train_model` runs epochs of `optimizer.zero_grad()`/`loss.backward()`/`optimizer.step()` with
`train_losses.append(loss.item())`, a validation pass appending `loss.item()`, `np.average` of the Python lists,
an f-string progress message with nested format specs (`f'[{epoch:>{epoch_len}}/{n_epochs:>{epoch_len}}] '`),
then calls the `EarlyStopping` object: `__call__` checks `np.isnan(val_loss)`, compares with the best loss
(`elif val_loss < self.best_val_loss - self.delta:`), counts and reports through `self.trace_func` (`print`) with an
f-string, sets `self.early_stop`, and `save_checkpoint` prints and writes `torch.save(model.state_dict(),
self.path)`; `train_model` breaks on `early_stopping.early_stop` and finally reloads the best checkpoint with
`model.load_state_dict(torch.load(...))`.
Provenance note: `EarlyStopping` was read from the stored repository; the notebook's `train_model` was read from a
copy found by code search whose text matches the notebook (the stored `.ipynb` was not read), and the notebook's
`Net` (three `Linear` layers with dropout 0.5 on flattened 28x28 images) was written from the collector's knowledge.
Adaptations: the MNIST loaders are lists of `(data, target)` batches, and the notebook's globals (`train_loader`,
`valid_loader`, `optimizer`, `criterion`) are module attributes set by the call (`run_training`, an adaptation);
the checkpoint path `'checkpoint.pt'` is a file in a temporary directory made in the factory (`CHECKPOINT`), used by
both `EarlyStopping(path=...)` and the final `torch.load`; `Net`'s hidden width is 32 instead of 512. So that a call
repeats exactly, `run_training` restores the model and optimizer from copies taken in the factory and seeds torch
(dropout) first (`reset_`). The two calls use different data, patience and epoch counts."""
import copy
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class EarlyStopping:
    """Early stops the training if validation loss doesn't improve after a given patience."""
    def __init__(self, patience=7, verbose=False, delta=0, path='checkpoint.pt', trace_func=print):
        """
        Args:
            patience (int): How long to wait after last time validation loss improved.
                            Default: 7
            verbose (bool): If True, prints a message for each validation loss improvement.
                            Default: False
            delta (float): Minimum change in the monitored quantity to qualify as an improvement.
                            Default: 0
            path (str): Path for the checkpoint to be saved to.
                            Default: 'checkpoint.pt'
            trace_func (function): trace print function.
                            Default: print
        """
        self.patience = patience
        self.verbose = verbose
        self.counter = 0
        self.best_val_loss = None
        self.early_stop = False
        self.val_loss_min = np.inf
        self.delta = delta
        self.path = path
        self.trace_func = trace_func

    def __call__(self, val_loss, model):
        # Check if validation loss is nan
        if np.isnan(val_loss):  # BREAK
            self.trace_func("Validation loss is NaN. Ignoring this epoch.")
            return

        if self.best_val_loss is None:
            self.best_val_loss = val_loss
            self.save_checkpoint(val_loss, model)
        elif val_loss < self.best_val_loss - self.delta:  # BREAK
            # Significant improvement detected
            self.best_val_loss = val_loss
            self.save_checkpoint(val_loss, model)
            self.counter = 0  # Reset counter since improvement occurred
        else:
            # No significant improvement
            self.counter += 1
            self.trace_func(f'EarlyStopping counter: {self.counter} out of {self.patience}')  # BREAK
            if self.counter >= self.patience:
                self.early_stop = True

    def save_checkpoint(self, val_loss, model):
        '''Saves model when validation loss decreases.'''
        if self.verbose:
            self.trace_func(f'Validation loss decreased ({self.val_loss_min:.6f} --> {val_loss:.6f}).  Saving model ...')  # BREAK
        torch.save(model.state_dict(), self.path)  # BREAK
        self.val_loss_min = val_loss


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(28 * 28, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        # flatten image input
        x = x.view(-1, 28 * 28)
        # add hidden layer, with relu activation function
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        # add hidden layer, with relu activation function
        x = F.relu(self.fc2(x))
        x = self.dropout(x)
        # add output layer
        x = self.fc3(x)
        return x


# the notebook's globals (adaptation: set by run_training)
train_loader = None
valid_loader = None
optimizer = None
criterion = nn.CrossEntropyLoss()
CHECKPOINT = 'checkpoint.pt'


def train_model(model, batch_size, patience, n_epochs):

    # to track the training loss as the model trains
    train_losses = []
    # to track the validation loss as the model trains
    valid_losses = []
    # to track the average training loss per epoch as the model trains
    avg_train_losses = []
    # to track the average validation loss per epoch as the model trains
    avg_valid_losses = []

    # initialize the early_stopping object
    early_stopping = EarlyStopping(patience=patience, verbose=True, path=CHECKPOINT)

    for epoch in range(1, n_epochs + 1):

        ###################
        # train the model #
        ###################
        model.train() # prep model for training
        for batch, (data, target) in enumerate(train_loader, 1):
            # clear the gradients of all optimized variables
            optimizer.zero_grad()  # BREAK
            # forward pass: compute predicted outputs by passing inputs to the model
            output = model(data)
            # calculate the loss
            loss = criterion(output, target)
            # backward pass: compute gradient of the loss with respect to model parameters
            loss.backward()
            # perform a single optimization step (parameter update)
            optimizer.step()  # BREAK
            # record training loss
            train_losses.append(loss.item())

        ######################
        # validate the model #
        ######################
        model.eval() # prep model for evaluation
        for data, target in valid_loader:
            # forward pass: compute predicted outputs by passing inputs to the model
            output = model(data)
            # calculate the loss
            loss = criterion(output, target)
            # record validation loss
            valid_losses.append(loss.item())

        # print training/validation statistics
        # calculate average loss over an epoch
        train_loss = np.average(train_losses)
        valid_loss = np.average(valid_losses)
        avg_train_losses.append(train_loss)
        avg_valid_losses.append(valid_loss)

        epoch_len = len(str(n_epochs))

        print_msg = (f'[{epoch:>{epoch_len}}/{n_epochs:>{epoch_len}}] ' +
                     f'train_loss: {train_loss:.5f} ' +
                     f'valid_loss: {valid_loss:.5f}')

        print(print_msg)

        # clear lists to track next epoch
        train_losses = []
        valid_losses = []

        # early_stopping needs the validation loss to check if it has decresed,
        # and if it has, it will make a checkpoint of the current model
        early_stopping(valid_loss, model)

        if early_stopping.early_stop:
            print("Early stopping")
            break

    # load the last checkpoint with the best model
    model.load_state_dict(torch.load(CHECKPOINT))

    return  model, avg_train_losses, avg_valid_losses


def reset_(model, opt, model_state, opt_state):
    """Adaptation: restore the initial model/optimizer and seed dropout so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    opt.load_state_dict(opt_state)  # BREAK
    torch.manual_seed(0)  # BREAK


def run_training(model, opt, model_state, opt_state, loaders, batch_size, patience, n_epochs):
    """Adaptation: sets the notebook's globals, then runs its `train_model(...)` cell."""
    global train_loader, valid_loader, optimizer
    reset_(model, opt, model_state, opt_state)
    train_loader, valid_loader = loaders
    optimizer = opt
    model, train_loss, valid_loss = train_model(model, batch_size, patience, n_epochs)
    return model.fc3.weight.detach().clone(), train_loss, valid_loss


def target():
    global CHECKPOINT
    torch.manual_seed(0)
    CHECKPOINT = os.path.join(tempfile.mkdtemp(prefix="u11_es_"), 'checkpoint.pt')
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(opt.state_dict())

    def batches(n, bs):
        return [(torch.rand(bs, 1, 28, 28), torch.randint(0, 10, (bs,))) for _ in range(n)]

    loaders1 = (batches(3, 16), batches(1, 16))
    loaders2 = (batches(2, 12), batches(2, 8))
    return [
        (run_training, (model, opt, model_state, opt_state, loaders1, 16, 2, 6), {}),
        (run_training, (model, opt, model_state, opt_state, loaders2, 12, 1, 4), {}),
    ]


EXPECT = ("caller: `train_model` is an eager epoch loop (`loss.item()` lists, `np.average`, f-string prints, the "
          "`EarlyStopping` object's Python comparisons, `torch.save`/`torch.load` checkpoint files, `break`); "
          "compile the model (and the loss) and keep the loop and the early-stopping bookkeeping eager")
