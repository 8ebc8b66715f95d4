"""Class-balanced sampling (ufoym/imbalanced-dataset-sampler torchsampler/imbalanced.py: `ImbalancedDatasetSampler`,
the stored early revision, used as in the README: `DataLoader(train_dataset, sampler=ImbalancedDatasetSampler(
train_dataset), batch_size=...)`). The constructor counts labels in a Python dict by calling `_get_label` per index
(for an MNIST dataset `dataset.train_labels[idx].item()`; otherwise a `callback_get_label`, `isinstance` dispatch over
torchvision dataset classes, or `NotImplementedError`), builds per-sample weights in a comprehension and stores
`torch.DoubleTensor(weights)`; `__iter__` returns a generator over `torch.multinomial(self.weights, self.num_samples,
replacement=True)` that indexes the Python list `self.indices` with tensor elements.
Adaptations: torchvision is not installed, so `torchvision.datasets.MNIST`/`ImageFolder` are minimal stand-in
classes in a namespace of that name (the MNIST stand-in has `train_labels` and `data`, seeded, with a 10:3:1 class
imbalance, 4x4 images); the epoch around the sampler is a short evaluation pass of a linear classifier over the
sampled batches that returns the per-class counts of the sampled labels and the mean logits (an adaptation: the
original sampler is used by a training loop). So that a call repeats exactly, the called function seeds torch's
global generator first (`torch.manual_seed`, an adaptation). The first call uses the MNIST path with the default
`num_samples`; the second a `callback_get_label` and `num_samples=20`."""
from types import SimpleNamespace

import torch
import torch.utils.data


class _MNISTStandIn(torch.utils.data.Dataset):
    """Adaptation: stand-in for torchvision.datasets.MNIST (in-memory, seeded)."""

    def __init__(self, data, train_labels):
        self.data = data
        self.train_labels = train_labels

    def __len__(self):
        return len(self.train_labels)

    def __getitem__(self, idx):
        return self.data[idx], self.train_labels[idx]


class _ImageFolderStandIn(torch.utils.data.Dataset):
    """Adaptation: stand-in for torchvision.datasets.ImageFolder (never instantiated here)."""
    imgs = []


torchvision = SimpleNamespace(datasets=SimpleNamespace(MNIST=_MNISTStandIn, ImageFolder=_ImageFolderStandIn))


class ImbalancedDatasetSampler(torch.utils.data.sampler.Sampler):
    """Samples elements randomly from a given list of indices for imbalanced dataset
    Arguments:
        indices (list, optional): a list of indices
        num_samples (int, optional): number of samples to draw
        callback_get_label func: a callback-like function which takes two arguments - dataset and index
    """

    def __init__(self, dataset, indices=None, num_samples=None, callback_get_label=None):
                
        # if indices is not provided, 
        # all elements in the dataset will be considered
        self.indices = list(range(len(dataset))) \
            if indices is None else indices

        # define custom callback
        self.callback_get_label = callback_get_label

        # if num_samples is not provided, 
        # draw `len(indices)` samples in each iteration
        self.num_samples = len(self.indices) \
            if num_samples is None else num_samples
            
        # distribution of classes in the dataset 
        label_to_count = {}
        for idx in self.indices:
            label = self._get_label(dataset, idx)
            if label in label_to_count:
                label_to_count[label] += 1
            else:
                label_to_count[label] = 1
                
        # weight for each sample
        weights = [1.0 / label_to_count[self._get_label(dataset, idx)]
                   for idx in self.indices]
        self.weights = torch.DoubleTensor(weights)

    def _get_label(self, dataset, idx):
        if self.callback_get_label:
            return self.callback_get_label(dataset, idx)
        elif isinstance(dataset, torchvision.datasets.MNIST):
            return dataset.train_labels[idx].item()  # BREAK
        elif isinstance(dataset, torchvision.datasets.ImageFolder):
            return dataset.imgs[idx][1]
        elif isinstance(dataset, torch.utils.data.Subset):
            return dataset.dataset.imgs[idx][1]
        else:
            raise NotImplementedError
                
    def __iter__(self):
        return (self.indices[i] for i in torch.multinomial(  # BREAK
            self.weights, self.num_samples, replacement=True))

    def __len__(self):
        return self.num_samples


def balanced_pass(dataset, model, num_classes, seed, num_samples=None, callback_get_label=None):
    torch.manual_seed(seed)  # adaptation: fixes the multinomial draw  # BREAK
    loader = torch.utils.data.DataLoader(  # BREAK
        dataset,
        sampler=ImbalancedDatasetSampler(dataset, num_samples=num_samples, callback_get_label=callback_get_label),
        batch_size=8)
    counts = torch.zeros(num_classes, dtype=torch.long)
    logits_sum = torch.zeros(num_classes)
    n = 0
    with torch.no_grad():
        for images, labels in loader:  # BREAK
            counts += torch.bincount(labels, minlength=num_classes)
            logits_sum += model(images.flatten(1)).sum(0)
            n += labels.numel()
    return counts, logits_sum / n


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    labels = torch.cat([torch.zeros(30, dtype=torch.long), torch.ones(9, dtype=torch.long),
                        torch.full((3,), 2, dtype=torch.long)])
    labels = labels[torch.randperm(len(labels), generator=gen)]
    data = torch.randn(len(labels), 4, 4, generator=gen) + labels.view(-1, 1, 1).float()
    dataset = torchvision.datasets.MNIST(data, labels)
    model = torch.nn.Linear(16, 3)
    return [
        (balanced_pass, (dataset, model, 3, 0), {}),
        (balanced_pass, (dataset, model, 3, 1), {"num_samples": 20,
                                                 "callback_get_label": lambda ds, idx: int(ds.train_labels[idx])}),  # BREAK
    ]


EXPECT = ("caller: building the sampler is a host pass over the dataset (a Python dict of label counts filled by "
          "`dataset.train_labels[idx].item()` per index, a weight list, `torch.DoubleTensor(list)`) and `__iter__` "
          "yields Python-list elements indexed by tensor elements of `torch.multinomial`; it is data-loading code: "
          "build the sampler and iterate the DataLoader in the caller, compiling only the model step over each batch")
