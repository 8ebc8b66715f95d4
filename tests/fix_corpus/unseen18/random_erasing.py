"""Random Erasing data augmentation of zhunzhong07/Random-Erasing (`utils/transforms.py` `RandomErasing`, the
tensor version of the stored revision; the top-level `transforms.py` of another stored revision erases a 2-D NumPy
array instead and was read and not used). `RandomErasing.__call__` draws with Python's `random`
(`random.uniform` for the apply probability, area and aspect ratio; `random.randint` for the corner), tries up to
100 times in a `for attempt in range(100)` loop computing `int(round(math.sqrt(...)))` sizes from
`img.size()[1] * img.size()[2]`, branches on `img.size()[0] == 3`, writes the per-channel means into the image in
place and returns it (early `return img` when not applied).
Adaptations: `utils/transforms.py` gets `random` and `math` through `from torchvision.transforms import *` (old
torchvision's transforms module exported them); torchvision does not import here, so they are imported directly.
The images are random `[C, H, W]` tensors made in the factory (CIFAR-sized 3 x 32 x 32 and Fashion-MNIST-sized
1 x 28 x 28) instead of dataset samples after `ToTensor`/`Normalize`. The called function is the original
transform (`RandomErasing.__call__`, through transform objects built in the factory with the `cifar.py` and
`fashionmnist.py` settings: `EPSILON=0.5` and the CIFAR means, and `EPSILON=1.0` with a grey mean). Each call
draws from Python's global `random` generator (seeded in the factory) and, like the original, erases in place in
the image it is given, so a call repeats exactly only on a fresh copy of its arguments and the same generator
state."""
import math
import random

import numpy as np
import torch


class RandomErasing(object):
    def __init__(self, EPSILON = 0.5, sl = 0.02, sh = 0.4, r1 = 0.3, mean=[0.4914, 0.4822, 0.4465]):
        self.EPSILON = EPSILON
        self.mean = mean
        self.sl = sl
        self.sh = sh
        self.r1 = r1
       
    def __call__(self, img):

        if random.uniform(0, 1) > self.EPSILON:  # BREAK
            return img

        for attempt in range(100):
            area = img.size()[1] * img.size()[2]
       
            target_area = random.uniform(self.sl, self.sh) * area
            aspect_ratio = random.uniform(self.r1, 1/self.r1)

            h = int(round(math.sqrt(target_area * aspect_ratio)))  # BREAK
            w = int(round(math.sqrt(target_area / aspect_ratio)))  # BREAK

            if w <= img.size()[2] and h <= img.size()[1]:
                x1 = random.randint(0, img.size()[1] - h)
                y1 = random.randint(0, img.size()[2] - w)
                if img.size()[0] == 3:
                    #img[0, x1:x1+h, y1:y1+w] = random.uniform(0, 1)
                    #img[1, x1:x1+h, y1:y1+w] = random.uniform(0, 1)
                    #img[2, x1:x1+h, y1:y1+w] = random.uniform(0, 1)
                    img[0, x1:x1+h, y1:y1+w] = self.mean[0]
                    img[1, x1:x1+h, y1:y1+w] = self.mean[1]
                    img[2, x1:x1+h, y1:y1+w] = self.mean[2]
                    #img[:, x1:x1+h, y1:y1+w] = torch.from_numpy(np.random.rand(3, h, w))
                else:
                    img[0, x1:x1+h, y1:y1+w] = self.mean[1]  # BREAK
                    # img[0, x1:x1+h, y1:y1+w] = torch.from_numpy(np.random.rand(1, h, w))
                return img

        return img


def target():
    torch.manual_seed(0)
    random.seed(0)
    cifar_erasing = RandomErasing(EPSILON=0.5, mean=[0.4914, 0.4822, 0.4465])
    fashion_erasing = RandomErasing(EPSILON=1.0, mean=[0.4914, 0.4822, 0.4465])
    return [
        (cifar_erasing, (torch.randn(3, 32, 32),), {}),
        (fashion_erasing, (torch.randn(1, 28, 28),), {}),
        (cifar_erasing, (torch.randn(3, 32, 32),), {}),
    ]


EXPECT = "caller"
