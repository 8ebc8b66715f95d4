"""FID between two image sets (mseitzer/pytorch-fid src/pytorch_fid/fid_score.py: `get_activations`,
`calculate_frechet_distance`, `calculate_activation_statistics`, the body of `calculate_fid_given_paths`):
`get_activations` puts the model in eval mode, prints a warning and clamps the batch size when it exceeds the data,
loops over a `tqdm`-wrapped `DataLoader`, runs the model under `torch.no_grad()`, pools with `adaptive_avg_pool2d`
when `if pred.size(2) != 1 or pred.size(3) != 1:`, moves each batch to NumPy with `.squeeze(3).squeeze(2).cpu().numpy()`
and writes it into a preallocated `np.empty` array by slice; the statistics are `np.mean`/`np.cov`, and the Frechet
distance uses SciPy's `linalg.sqrtm`, `np.isfinite(...).all()` with a print and retry, `np.iscomplexobj` with a
`ValueError`, and `np.trace`.
Adaptations: images come from memory instead of files (`ImagePathDataset` with `PIL.Image.open` and
`torchvision.transforms.ToTensor` becomes a dataset over a tensor of images; torchvision and PIL are not used); the
`DataLoader` keeps `shuffle=False, drop_last=False` but uses `num_workers=0` instead of `cpu_count()` (no worker
processes); InceptionV3 (weights are a download) is replaced by a small convolutional stand-in that, like
`InceptionV3`, returns a list of feature maps (here `dims=8` channels at 2x2, so the pooling branch runs);
`calculate_fid_given_paths`'s path checks and `.npz` loading are dropped: `calculate_fid_given_images` computes the two
sets' statistics and the distance as that function does. The first call uses batch size 5; the second batch size 64,
larger than the 24 images (the warning branch), on a different second set."""
import numpy as np
import torch
from scipy import linalg
from torch.nn.functional import adaptive_avg_pool2d

try:
    from tqdm import tqdm
except ImportError:
    # If tqdm is not available, provide a mock version of it
    def tqdm(x):
        return x


class ImageTensorDataset(torch.utils.data.Dataset):
    """Adaptation: in-memory stand-in for ImagePathDataset."""

    def __init__(self, images, transforms=None):
        self.files = images
        self.transforms = transforms

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = self.files[i]
        if self.transforms is not None:
            img = self.transforms(img)
        return img


class InceptionStandIn(torch.nn.Module):
    """Adaptation: stand-in for pytorch_fid.inception.InceptionV3 (returns a list of feature maps)."""

    def __init__(self, dims=8):
        super().__init__()
        self.blocks = torch.nn.Sequential(
            torch.nn.Conv2d(3, 6, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(6, dims, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d((2, 2)))

    def forward(self, inp):
        return [self.blocks(inp)]


def get_activations(files, model, batch_size=50, dims=2048, device='cpu'):
    model.eval()

    if batch_size > len(files):
        print(('Warning: batch size is bigger than the data size. '  # BREAK
               'Setting batch size to data size'))
        batch_size = len(files)

    dataset = ImageTensorDataset(files, transforms=None)
    dataloader = torch.utils.data.DataLoader(dataset,  # BREAK
                                             batch_size=batch_size,
                                             shuffle=False,
                                             drop_last=False,
                                             num_workers=0)

    pred_arr = np.empty((len(files), dims))

    start_idx = 0

    for batch in tqdm(dataloader):  # BREAK
        batch = batch.to(device)

        with torch.no_grad():
            pred = model(batch)[0]

        # If model output is not scalar, apply global spatial average pooling.
        # This happens if you choose a dimensionality not equal 2048.
        if pred.size(2) != 1 or pred.size(3) != 1:
            pred = adaptive_avg_pool2d(pred, output_size=(1, 1))

        pred = pred.squeeze(3).squeeze(2).cpu().numpy()

        pred_arr[start_idx:start_idx + pred.shape[0]] = pred

        start_idx = start_idx + pred.shape[0]

    return pred_arr


def calculate_frechet_distance(mu1, sigma1, mu2, sigma2, eps=1e-6):
    mu1 = np.atleast_1d(mu1)
    mu2 = np.atleast_1d(mu2)

    sigma1 = np.atleast_2d(sigma1)
    sigma2 = np.atleast_2d(sigma2)

    assert mu1.shape == mu2.shape, \
        'Training and test mean vectors have different lengths'
    assert sigma1.shape == sigma2.shape, \
        'Training and test covariances have different dimensions'

    diff = mu1 - mu2

    # Product might be almost singular
    covmean, _ = linalg.sqrtm(sigma1.dot(sigma2), disp=False)
    if not np.isfinite(covmean).all():  # BREAK
        msg = ('fid calculation produces singular product; '
               'adding %s to diagonal of cov estimates') % eps
        print(msg)
        offset = np.eye(sigma1.shape[0]) * eps
        covmean = linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))

    # Numerical error might give slight imaginary component
    if np.iscomplexobj(covmean):  # BREAK
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            m = np.max(np.abs(covmean.imag))
            raise ValueError('Imaginary component {}'.format(m))
        covmean = covmean.real

    tr_covmean = np.trace(covmean)

    return (diff.dot(diff) + np.trace(sigma1)
            + np.trace(sigma2) - 2 * tr_covmean)


def calculate_activation_statistics(files, model, batch_size=50, dims=2048,
                                    device='cpu'):
    act = get_activations(files, model, batch_size, dims, device)
    mu = np.mean(act, axis=0)
    sigma = np.cov(act, rowvar=False)  # BREAK
    return mu, sigma


def calculate_fid_given_images(images, model, batch_size, device, dims):
    """Adaptation of calculate_fid_given_paths: two in-memory image sets instead of two paths."""
    m1, s1 = calculate_activation_statistics(images[0], model, batch_size,
                                             dims, device)
    m2, s2 = calculate_activation_statistics(images[1], model, batch_size,
                                             dims, device)
    fid_value = calculate_frechet_distance(m1, s1, m2, s2)

    return fid_value


def target():
    torch.manual_seed(0)
    model = InceptionStandIn(dims=8)
    gen = torch.Generator().manual_seed(0)
    real = torch.rand(24, 3, 16, 16, generator=gen)
    fake1 = (real + 0.3 * torch.randn(24, 3, 16, 16, generator=gen)).clamp(0, 1)
    fake2 = torch.rand(24, 3, 16, 16, generator=gen) ** 2
    return [
        (calculate_fid_given_images, ((real, fake1), model, 5, 'cpu', 8), {}),
        (calculate_fid_given_images, ((real, fake2), model, 64, 'cpu', 8), {}),
    ]


EXPECT = ("caller: the model forward is the only tensor work worth compiling; the activations are moved to NumPy "
          "per batch (`.cpu().numpy()`, a slice write into `np.empty`) and the statistics and distance are NumPy "
          "and SciPy (`np.cov`, `linalg.sqrtm`, `np.iscomplexobj`) on the host, so compile the model and leave "
          "`get_activations`' loop and `calculate_frechet_distance` eager in the caller")
