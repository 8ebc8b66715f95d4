"""Grad-CAM of utkuozbulak/pytorch-cnn-visualizations (`src/gradcam.py` `CamExtractor`, `GradCam`; the stored
revision 697e7fa that resizes with PIL; an older stored revision resizing with `cv2` was read and not used, and
`src/guided_backprop.py` was read first and not used: its hooks are closures over the `GuidedBackprop` object, so
a deep copy of its arguments writes the gradient to the wrong object). `CamExtractor.forward_pass_on_convolutions`
walks `self.model.features._modules.items()`, compares `int(module_pos)` with the target layer and registers a
tensor hook (`x.register_hook(self.save_gradient)`, a bound method storing the gradient on the extractor);
`GradCam.generate_cam` picks the class with `np.argmax(model_output.data.numpy())` when none is given, builds the
one-hot target with the legacy `torch.FloatTensor(1, n).zero_()` and a Python index assignment, zeroes the
gradients, calls `backward(gradient=..., retain_graph=True)`, reads the hooked gradient and the activations with
`.data.numpy()`, and computes the map in NumPy (`np.mean`, a Python loop `cam += w * target[i, :, :]` over the
weights, normalisation, `np.uint8`) and resizes it through `PIL.Image`.
Adaptations: the pretrained torchvision AlexNet of `misc_functions.get_example_params` (torchvision does not import
here; its weights are a download) is a small AlexNet-shaped stand-in with the attributes the code reads
(`features`, an `nn.Sequential` whose children are named "0", "1", ..., then `classifier`), randomly initialised;
the preprocessed image (`preprocess_image`: PIL, resizing, ImageNet normalisation) is a random `[1, 3, 32, 32]`
tensor made in the factory with `requires_grad=True`. For runnability with Pillow 13, `Image.ANTIALIAS` (removed
in Pillow 10) is written `Image.LANCZOS`, the filter it was an alias of. The model and the `GradCam` object are
built in the factory, one per call; the called function is the original `GradCam.generate_cam` with the object
passed as `self`. Two calls: a given target class on one image, and `target_class=None` (the `np.argmax` branch)
on another image and target layer. No randomness; the calls only overwrite gradients and the extractor's
`gradients` attribute."""
from PIL import Image
import numpy as np
import torch
import torch.nn as nn


class CamExtractor():
    """
        Extracts cam features from the model
    """
    def __init__(self, model, target_layer):
        self.model = model
        self.target_layer = target_layer
        self.gradients = None

    def save_gradient(self, grad):
        self.gradients = grad  # BREAK

    def forward_pass_on_convolutions(self, x):
        """
            Does a forward pass on convolutions, hooks the function at given layer
        """
        conv_output = None
        for module_pos, module in self.model.features._modules.items():
            x = module(x)  # Forward
            if int(module_pos) == self.target_layer:
                x.register_hook(self.save_gradient)
                conv_output = x  # Save the convolution output on that layer
        return conv_output, x

    def forward_pass(self, x):
        """
            Does a full forward pass on the model
        """
        # Forward pass on the convolutions
        conv_output, x = self.forward_pass_on_convolutions(x)
        x = x.view(x.size(0), -1)  # Flatten
        # Forward pass on the classifier
        x = self.model.classifier(x)
        return conv_output, x


class GradCam():
    """
        Produces class activation map
    """
    def __init__(self, model, target_layer):
        self.model = model
        self.model.eval()
        # Define extractor
        self.extractor = CamExtractor(self.model, target_layer)

    def generate_cam(self, input_image, target_class=None):
        # Full forward pass
        # conv_output is the output of convolutions at specified layer
        # model_output is the final output of the model (1, 1000)
        conv_output, model_output = self.extractor.forward_pass(input_image)
        if target_class is None:
            target_class = np.argmax(model_output.data.numpy())
        # Target for backprop
        one_hot_output = torch.FloatTensor(1, model_output.size()[-1]).zero_()
        one_hot_output[0][target_class] = 1
        # Zero grads
        self.model.features.zero_grad()
        self.model.classifier.zero_grad()
        # Backward pass with specified target
        model_output.backward(gradient=one_hot_output, retain_graph=True)
        # Get hooked gradients
        guided_gradients = self.extractor.gradients.data.numpy()[0]
        # Get convolution outputs
        target = conv_output.data.numpy()[0]
        # Get weights from gradients
        weights = np.mean(guided_gradients, axis=(1, 2))  # Take averages for each gradient
        # Create empty numpy array for cam
        cam = np.ones(target.shape[1:], dtype=np.float32)
        # Multiply each weight with its conv output and then, sum
        for i, w in enumerate(weights):
            cam += w * target[i, :, :]
        cam = np.maximum(cam, 0)
        cam = (cam - np.min(cam)) / (np.max(cam) - np.min(cam))  # Normalize between 0-1
        cam = np.uint8(cam * 255)  # Scale between 0-255 to visualize
        cam = np.uint8(Image.fromarray(cam).resize((input_image.shape[2],
                       input_image.shape[3]), Image.LANCZOS))/255
        # ^ I am extremely unhappy with this line. Originally resizing was done in cv2 which
        # supports resizing numpy matrices with antialiasing, however,
        # when I moved the repository to PIL, this option was out of the window.
        # So, in order to use resizing with ANTIALIAS feature of PIL,
        # I briefly convert matrix to PIL image and then back.
        # If there is a more beautiful way, do not hesitate to send a PR.
        return cam


class SmallAlexNet(nn.Module):
    """Stand-in for torchvision's AlexNet (same `features`/`classifier` layout, CIFAR-sized)."""
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
        )
        self.classifier = nn.Sequential(nn.Linear(16 * 8 * 8, 32), nn.ReLU(inplace=True), nn.Linear(32, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def target():
    torch.manual_seed(0)
    calls = []
    for target_layer, target_class in ((4, 3), (3, None)):
        grad_cam = GradCam(SmallAlexNet(), target_layer=target_layer)
        prep_img = torch.randn(1, 3, 32, 32).requires_grad_(True)
        calls.append((GradCam.generate_cam, (grad_cam, prep_img, target_class), {}))
    return calls


EXPECT = "split"
