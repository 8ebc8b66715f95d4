"""SSIM loss module that caches its Gaussian window in `forward`, driven by the repository's `max_ssim.py`
optimisation loop (Po-Hsun-Su/pytorch-ssim: `pytorch_ssim/__init__.py`: `gaussian`, `create_window`, `_ssim`,
`SSIM`, `ssim`; `max_ssim.py`). `gaussian` builds the 1-D kernel from a Python list comprehension over
`range(window_size)` passed to `torch.tensor`; `create_window` wraps the 2-D window in a legacy
`torch.autograd.Variable`; `SSIM.forward` reads `img1.size()`, compares `channel == self.channel and
self.window.data.type() == img1.data.type()` (a string type check) and otherwise rebuilds the window, calls
`img1.is_cuda`/`window.type_as(img1)` and stores it back on the module (`self.window = window`,
`self.channel = channel`); `_ssim` is the grouped-`conv2d` SSIM map with a `size_average` branch. `max_ssim.py`
computes the initial SSIM with the functional `ssim`, prints it, then loops `while ssim_value < 0.95:` with
`optimizer.zero_grad()`, `ssim_out = -ssim_loss(img1, img2)`, `ssim_value = - ssim_out.data[0]`, `print`,
`backward()` and `optimizer.step()`.
Adaptations: the Einstein image (`einstein.png` read with OpenCV) is a random image made in the factory (16x16,
1 or 3 channels); `ssim_out.data[0]` (indexing a 0-d tensor, an error in current torch) is `ssim_out.item()`
(runnability change); the loop is wrapped in a function `max_ssim` with a step cap `max_steps` (the script runs
until 0.95); the optimised image and the module's cached window/channel are rebuilt at the start of each call so
that a call repeats exactly (`reset_`). The function returns the SSIM trajectory and the final image. The two calls
use a 1-channel and a 3-channel image (the second rebuilds the cached window)."""
import torch
import torch.nn.functional as F
from torch import optim
from torch.autograd import Variable


def gaussian(window_size, sigma):
    gauss = torch.exp(torch.tensor(
        [-(x - window_size//2)**2/float(2*sigma**2) for x in range(window_size)]))
    return gauss/gauss.sum()

def create_window(window_size, channel):
    _1D_window = gaussian(window_size, 1.5).unsqueeze(1)
    _2D_window = _1D_window.mm(_1D_window.t()).float().unsqueeze(0).unsqueeze(0)
    window = Variable(_2D_window.expand(channel, 1, window_size, window_size).contiguous())  # BREAK
    return window

def _ssim(img1, img2, window, window_size, channel, size_average = True):
    mu1 = F.conv2d(img1, window, padding = window_size//2, groups = channel)
    mu2 = F.conv2d(img2, window, padding = window_size//2, groups = channel)

    mu1_sq = mu1.pow(2)
    mu2_sq = mu2.pow(2)
    mu1_mu2 = mu1*mu2

    sigma1_sq = F.conv2d(img1*img1, window, padding = window_size//2, groups = channel) - mu1_sq
    sigma2_sq = F.conv2d(img2*img2, window, padding = window_size//2, groups = channel) - mu2_sq
    sigma12 = F.conv2d(img1*img2, window, padding = window_size//2, groups = channel) - mu1_mu2

    C1 = 0.01**2
    C2 = 0.03**2

    ssim_map = ((2*mu1_mu2 + C1)*(2*sigma12 + C2))/((mu1_sq + mu2_sq + C1)*(sigma1_sq + sigma2_sq + C2))

    if size_average:
        return ssim_map.mean()
    else:
        return ssim_map.mean(1).mean(1).mean(1)

class SSIM(torch.nn.Module):
    def __init__(self, window_size = 11, size_average = True):
        super(SSIM, self).__init__()
        self.window_size = window_size
        self.size_average = size_average
        self.channel = 1
        self.window = create_window(window_size, self.channel)

    def forward(self, img1, img2):
        (_, channel, _, _) = img1.size()

        if channel == self.channel and self.window.data.type() == img1.data.type():
            window = self.window
        else:
            window = create_window(self.window_size, channel)

            if img1.is_cuda:
                window = window.cuda(img1.get_device())
            window = window.type_as(img1)

            self.window = window
            self.channel = channel


        return _ssim(img1, img2, window, self.window_size, channel, self.size_average)

def ssim(img1, img2, window_size = 11, size_average = True):
    (_, channel, _, _) = img1.size()
    window = create_window(window_size, channel)

    if img1.is_cuda:
        window = window.cuda(img1.get_device())
    window = window.type_as(img1)

    return _ssim(img1, img2, window, window_size, channel, size_average)


def reset_(ssim_loss, img2_init):
    """Adaptation: fresh optimised image and the module's initial cached window, so that a call repeats exactly."""
    ssim_loss.channel = 1
    ssim_loss.window = create_window(ssim_loss.window_size, ssim_loss.channel)
    return Variable(img2_init.clone(), requires_grad=True)  # BREAK


def max_ssim(ssim_loss, img1, img2_init, max_steps):
    img2 = reset_(ssim_loss, img2_init)

    ssim_value = ssim(img1, img2).item()  # BREAK
    print("Initial ssim:", ssim_value)  # BREAK

    optimizer = optim.Adam([img2], lr=0.01)  # BREAK

    values = [ssim_value]
    step = 0
    while ssim_value < 0.95 and step < max_steps:
        optimizer.zero_grad()  # BREAK
        ssim_out = -ssim_loss(img1, img2)
        ssim_value = - ssim_out.item()
        print(ssim_value)
        values.append(ssim_value)
        ssim_out.backward()
        optimizer.step()  # BREAK
        step += 1
    return values, img2.detach()


def target():
    torch.manual_seed(0)
    ssim_loss = SSIM()
    img1_a = torch.rand(1, 1, 16, 16)
    img2_a = torch.rand(1, 1, 16, 16)
    img1_b = torch.rand(1, 3, 16, 16)
    img2_b = (img1_b + 0.3 * torch.rand(1, 3, 16, 16)).clamp(0, 1)
    return [
        (max_ssim, (ssim_loss, img1_a, img2_a, 4), {}),
        (max_ssim, (ssim_loss, img1_b, img2_b, 3), {}),
    ]


EXPECT = ("caller: the `while ssim_value < 0.95` loop with `.item()`, `print` and the optimizer step is eager "
          "driver code (compile the SSIM loss, read the value after the step); `SSIM.forward`'s cached-window "
          "branch (`self.window.data.type()` string test, storing `self.window`/`self.channel`) and `gaussian`'s "
          "list comprehension are expected to trace or be guarded without a fix")
