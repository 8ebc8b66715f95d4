"""One epoch of `train_net` with periodic validation from milesial/Pytorch-UNet (`train.py` `train_net`, the stored
revision; `evaluate.py` `evaluate`; `utils/dice_score.py` `dice_coeff`, `multiclass_dice_coeff`). `train_net`
iterates under `with tqdm(total=n_train, desc=f'Epoch ...') as pbar:`, `assert`s the channel count with an
f-string message, picks the mask dtype from `net.n_classes`, adds `loss.item()` to the epoch loss, records it
(`writer.add_scalar`) and shows it with `pbar.set_postfix(**{'loss (batch)': loss.item()})`, clips with
`nn.utils.clip_grad_value_`, steps RMSprop, and every `len(dataset) // (10 * batch_size)` global steps logs
weight/grad histograms from `value.data.cpu().numpy()` over `named_parameters()` (with `tag.replace('.', '/')`),
validates, steps `ReduceLROnPlateau` with the score and logs through `logging.info`. `evaluate` (the newer file
that replaced `eval.py`'s `eval_net`) loops over `tqdm(dataloader, ...)`, one-hot encodes masks with
`F.one_hot(...).permute(...)`, branches on `net.n_classes == 1`, and sums `multiclass_dice_coeff`, whose
`dice_coeff` recurses through `sum(dice_coeff(input[i, ...], ...) for i in range(...))` generator expressions and
tests `if sets_sum.item() == 0:`; it calls `net.eval()`/`net.train()` around the loop.
Adaptations: the `UNet` is a small stand-in with the attributes the code reads (`n_channels`, `n_classes`,
`bilinear`); `BasicDataset`/`random_split`/`DataLoader` are replaced by lists of `{'image', 'mask'}` batch dicts
made in the factory (`len(dataset)` is the stand-in `dataset_len` argument); `SummaryWriter` (tensorboard is not
installed) is a minimal recorder keeping `add_scalar`/`add_histogram`/`add_images` calls in a list; the
checkpoint `torch.save` (`save_cp`) is off; one epoch; `eval_net` is the read `evaluate`. So that a call repeats
exactly, the called function `train_net` restores the net from a copy taken in the factory (`reset_`) and builds
its optimizer and scheduler itself, as the original does; it returns the epoch loss, the last validation score
and the recorded scalars."""
import copy
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim, Tensor
from tqdm import tqdm


# ---- utils/dice_score.py
def dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon=1e-6):
    # Average of Dice coefficient for all batches, or for a single mask
    assert input.size() == target.size()
    if input.dim() == 2 and reduce_batch_first:
        raise ValueError(f'Dice: asked to reduce batch but got tensor without batch dimension (shape {input.shape})')

    if input.dim() == 2 or reduce_batch_first:
        inter = torch.dot(input.reshape(-1), target.reshape(-1))
        sets_sum = torch.sum(input) + torch.sum(target)
        if sets_sum.item() == 0:  # BREAK
            sets_sum = 2 * inter

        return (2 * inter + epsilon) / (sets_sum + epsilon)
    else:
        # compute and average metric for each batch element
        dice = sum(
            dice_coeff(input[i, ...], target[i, ...])  # BREAK
            for i in range(input.shape[0])
        )

        return dice / input.shape[0]


def multiclass_dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon=1e-6):
    # Average of Dice coefficient for all classes
    assert input.size() == target.size()
    dice = sum(
        dice_coeff(
            input[:, channel, ...],
            target[:, channel, ...],  # BREAK
            reduce_batch_first,
            epsilon,
        )
        for channel in range(input.shape[1])
    )

    return dice / input.shape[1]


# ---- evaluate.py
def evaluate(net, dataloader, device):
    net.eval()
    num_val_batches = len(dataloader)
    dice_score = 0

    # iterate over the validation set
    for batch in tqdm(dataloader, total=num_val_batches, desc='Validation round', unit='batch', leave=False):  # BREAK
        image, mask_true = batch['image'], batch['mask']
        # move images and labels to correct device and type
        image = image.to(device=device, dtype=torch.float32)
        mask_true = mask_true.to(device=device, dtype=torch.long)
        mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()

        with torch.no_grad():
            # predict the mask
            mask_pred = net(image)

            # convert to one-hot format
            if net.n_classes == 1:
                mask_pred = (F.sigmoid(mask_pred) > 0.5).float()
            else:
                mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()

            # compute the Dice score, ignoring background
            dice_score += multiclass_dice_coeff(mask_pred[:, 1:, ...], mask_true[:, 1:, ...], reduce_batch_first=False)

    net.train()
    return dice_score / num_val_batches


eval_net = evaluate


# ---- stand-ins
class UNet(nn.Module):
    """Stand-in for unet.UNet (same attributes), a two-level encoder/decoder."""
    def __init__(self, n_channels, n_classes, bilinear=True):
        super(UNet, self).__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear
        self.inc = nn.Sequential(nn.Conv2d(n_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
        self.outc = nn.Conv2d(16, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.up(self.down(x1))
        return self.outc(torch.cat([x2, x1], dim=1))


class SummaryWriter(object):
    """Stand-in for torch.utils.tensorboard.SummaryWriter (tensorboard not installed): records calls."""
    def __init__(self, comment=''):
        self.comment = comment
        self.records = []

    def add_scalar(self, tag, value, step):
        self.records.append((tag, float(value), step))

    def add_histogram(self, tag, values, step):
        self.records.append((tag, float(values.mean()), step))  # BREAK

    def add_images(self, tag, images, step):
        self.records.append((tag, tuple(images.shape), step))

    def close(self):
        pass


# ---- train.py
def train_net(net,
              device,
              train_loader,
              val_loader,
              dataset_len,
              initial_state,
              epochs=1,
              batch_size=2,
              lr=0.001,
              save_cp=False,
              img_scale=0.5):
    reset_(net, initial_state)
    n_train = sum(b['image'].shape[0] for b in train_loader)
    n_val = sum(b['image'].shape[0] for b in val_loader)

    writer = SummaryWriter(comment=f'LR_{lr}_BS_{batch_size}_SCALE_{img_scale}')  # BREAK
    global_step = 0

    logging.info(f'''Starting training:  # BREAK
        Epochs:          {epochs}
        Batch size:      {batch_size}
        Learning rate:   {lr}
        Training size:   {n_train}
        Validation size: {n_val}
        Checkpoints:     {save_cp}
        Device:          {device.type}
        Images scaling:  {img_scale}
    ''')

    optimizer = optim.RMSprop(net.parameters(), lr=lr, weight_decay=1e-8, momentum=0.9)  # BREAK
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'min' if net.n_classes > 1 else 'max', patience=2)
    if net.n_classes > 1:
        criterion = nn.CrossEntropyLoss()
    else:
        criterion = nn.BCEWithLogitsLoss()

    val_score = None
    for epoch in range(epochs):
        net.train()

        epoch_loss = 0
        with tqdm(total=n_train, desc=f'Epoch {epoch + 1}/{epochs}', unit='img') as pbar:
            for batch in train_loader:
                imgs = batch['image']
                true_masks = batch['mask']
                assert imgs.shape[1] == net.n_channels, \
                    f'Network has been defined with {net.n_channels} input channels, ' \
                    f'but loaded images have {imgs.shape[1]} channels. Please check that ' \
                    'the images are loaded correctly.'

                imgs = imgs.to(device=device, dtype=torch.float32)
                mask_type = torch.float32 if net.n_classes == 1 else torch.long
                true_masks = true_masks.to(device=device, dtype=mask_type)

                masks_pred = net(imgs)
                loss = criterion(masks_pred, true_masks)
                epoch_loss += loss.item()
                writer.add_scalar('Loss/train', loss.item(), global_step)

                pbar.set_postfix(**{'loss (batch)': loss.item()})

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_value_(net.parameters(), 0.1)
                optimizer.step()  # BREAK

                pbar.update(imgs.shape[0])
                global_step += 1
                if global_step % (dataset_len // (10 * batch_size)) == 0:
                    for tag, value in net.named_parameters():
                        tag = tag.replace('.', '/')
                        writer.add_histogram('weights/' + tag, value.data.cpu().numpy(), global_step)
                        writer.add_histogram('grads/' + tag, value.grad.data.cpu().numpy(), global_step)
                    val_score = eval_net(net, val_loader, device)
                    scheduler.step(val_score)
                    writer.add_scalar('learning_rate', optimizer.param_groups[0]['lr'], global_step)

                    if net.n_classes > 1:
                        logging.info('Validation cross entropy: {}'.format(val_score))
                        writer.add_scalar('Loss/test', val_score, global_step)
                    else:
                        logging.info('Validation Dice Coeff: {}'.format(val_score))
                        writer.add_scalar('Dice/test', val_score, global_step)

                    writer.add_images('images', imgs, global_step)

    writer.close()
    return torch.tensor(epoch_loss), val_score, [r for r in writer.records if r[0].startswith(('Loss', 'learning'))]


def reset_(net, initial_state):
    """Adaptation: restore the net from the factory's copy so that a call repeats."""
    net.load_state_dict(initial_state)  # BREAK


def target():
    torch.manual_seed(0)
    logging.basicConfig(level=logging.INFO, format='%(levelname)s: %(message)s')
    device = torch.device('cpu')
    net = UNet(n_channels=3, n_classes=2, bilinear=True)
    net.to(device=device)
    initial_state = copy.deepcopy(net.state_dict())

    def batches(n, bs, empty_fg=False):
        out = []
        for _ in range(n):
            mask = (torch.rand(bs, 8, 8) > 0.6).long()
            if empty_fg:
                mask.zero_()
            out.append({'image': torch.randn(bs, 3, 8, 8), 'mask': mask})
        return out

    train1, val1 = batches(4, 2), batches(1, 2)
    train2, val2 = batches(2, 2), batches(1, 2, empty_fg=True)
    return [
        (train_net, (net, device, train1, val1, 40, initial_state), {}),
        (train_net, (net, device, train2, val2, 20, initial_state), {"lr": 0.01}),
    ]


EXPECT = ("rewrite: `dice_coeff`'s `if sets_sum.item() == 0: sets_sum = 2 * inter` is a value select "
          "(`torch.where(sets_sum == 0, 2 * inter, sets_sum)`) that keeps the Dice graph whole; the training "
          "driver's `loss.item()`/`tqdm`/histogram `.cpu().numpy()` logging and the optimizer/scheduler steps "
          "remain eager glue")
