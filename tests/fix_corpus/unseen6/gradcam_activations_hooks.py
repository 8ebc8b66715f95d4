"""Grad-CAM activation capture: `ActivationsAndGradients` registers a forward hook that appends
`activation.cpu().detach()` to a Python list and a (legacy) `register_backward_hook` on the target layer; `BaseCAM.forward`
picks the target classes with `np.argmax(outputs.cpu().data.numpy(), axis=-1)`, wraps each in a
`ClassifierOutputTarget` object (list comprehension) and sums `target(output)` over `zip(targets, outputs)`
(jacobgil/pytorch-grad-cam pytorch_grad_cam/activations_and_gradients.py (the revision with
`register_backward_hook`), base_cam.py: BaseCAM.__init__/forward, utils/model_targets.py: ClassifierOutputTarget).
The call stops before `loss.backward(retain_graph=True)` and the NumPy/OpenCV CAM computation
(`compute_cam_per_layer`, `scale_cam_image`): it returns the summed target score, the chosen categories and the
captured activations. The model is a small CNN stand-in for a ResNet, in eval mode; `use_cuda=False`."""
import numpy as np
import torch
import torch.nn as nn


class ActivationsAndGradients:
    """ Class for extracting activations and
    registering gradients from targetted intermediate layers """

    def __init__(self, model, target_layer, reshape_transform):
        self.model = model
        self.gradients = []
        self.activations = []
        self.reshape_transform = reshape_transform

        target_layer.register_forward_hook(self.save_activation)
        target_layer.register_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        activation = output
        if self.reshape_transform is not None:
            activation = self.reshape_transform(activation)
        self.activations.append(activation.cpu().detach())

    def save_gradient(self, module, grad_input, grad_output):
        # Gradients are computed in reverse order
        grad = grad_output[0]
        if self.reshape_transform is not None:
            grad = self.reshape_transform(grad)
        self.gradients = [grad.cpu().detach()] + self.gradients

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)


class ClassifierOutputTarget:
    def __init__(self, category):
        self.category = category

    def __call__(self, model_output):
        if len(model_output.shape) == 1:
            return model_output[self.category]  # BREAK
        return model_output[:, self.category]


class BaseCAM:
    def __init__(self, model, target_layers, use_cuda=False, reshape_transform=None, compute_input_gradient=False,
                 uses_gradients=True):
        self.model = model.eval()
        self.target_layers = target_layers
        self.cuda = use_cuda
        if self.cuda:
            self.model = model.cuda()
        self.reshape_transform = reshape_transform
        self.compute_input_gradient = compute_input_gradient
        self.uses_gradients = uses_gradients
        self.activations_and_grads = ActivationsAndGradients(self.model, target_layers[0], reshape_transform)

    def forward(self, input_tensor, targets=None, eigen_smooth=False):
        if self.cuda:
            input_tensor = input_tensor.cuda()

        if self.compute_input_gradient:
            input_tensor = torch.autograd.Variable(input_tensor, requires_grad=True)

        outputs = self.activations_and_grads(input_tensor)
        if targets is None:
            target_categories = np.argmax(outputs.cpu().data.numpy(), axis=-1)
            targets = [ClassifierOutputTarget(category) for category in target_categories]

        loss = sum([target(output) for target, output in zip(targets, outputs)])
        # (here the original runs loss.backward(retain_graph=True) and compute_cam_per_layer)
        return loss, [t.category for t in targets], list(self.activations_and_grads.activations)

    def __call__(self, input_tensor, targets=None, aug_smooth=False, eigen_smooth=False):
        return self.forward(input_tensor, targets, eigen_smooth)


class SmallCNN(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.layer4 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = self.layer4(self.layer1(x))
        return self.fc(x.mean(dim=(2, 3)))


def target():
    torch.manual_seed(0)
    model = SmallCNN()
    cam = BaseCAM(model=model, target_layers=[model.layer4])
    x1 = torch.randn(3, 3, 8, 8)
    x2 = torch.randn(3, 3, 8, 8)
    return [
        (cam, (x1,), {}),
        (cam, (x2,), {}),
    ]


EXPECT = ("rewrite: choose the categories on the tensor (`outputs.argmax(dim=-1)`) and gather the scores with "
          "`outputs.gather(1, idx[:, None]).sum()` instead of a NumPy argmax, per-row target objects and a Python "
          "`sum`; the hook's list append and the legacy backward hook stay (they are side effects the caller "
          "reads), so if the hook still breaks the capture has to run eagerly (split: compile the model, keep "
          "ActivationsAndGradients and the target selection outside)")
