"""Post-hoc temperature scaling with an LBFGS closure and the expected-calibration-error metric
(gpleiss/temperature_scaling: `temperature_scaling.py`: `ModelWithTemperature` (`forward`, `temperature_scale`,
`set_temperature`), `_ECELoss`). `set_temperature` collects logits and labels from the validation loader under
`torch.no_grad()` into Python lists and `torch.cat`s them, computes NLL and ECE with `.item()` and prints them
with `%`-formatting, then optimises the single `nn.Parameter` temperature with `optim.LBFGS(..., max_iter=50)`
through a closure `eval()` (`zero_grad`, loss, `backward`, `return loss`) passed to `optimizer.step(eval)`, and
prints the optimal temperature (`self.temperature.item()`) and the NLL/ECE after scaling. `_ECELoss.forward` loops
over `zip(self.bin_lowers, self.bin_uppers)` (tensors made in `__init__` by `torch.linspace`), thresholds with
`bin_lower.item()`/`bin_upper.item()`, and branches on `if prop_in_bin.item() > 0:` before boolean-mask means
`accuracies[in_bin]` / `confidences[in_bin]` and an in-place `ece += ...`.
Adaptations: the `.cuda()` calls are dropped (CPU); the classifier is a small stand-in `nn.Sequential` (two
`Linear` layers, 10 features, 5 classes); the validation loader is a list of `(input, label)` batches made in the
factory. So that a call repeats exactly, the called function (`calibrate`, an adaptation) resets the temperature
to its initial 1.5 (`reset_`) before `set_temperature`; it returns the tuned temperature and the scaled logits of
the first batch. The two calls use different validation sets."""
import torch
from torch import nn, optim
from torch.nn import functional as F


class ModelWithTemperature(nn.Module):
    """
    A thin decorator, which wraps a model with temperature scaling
    model (nn.Module):
        A classification neural network
        NB: Output of the neural network should be the classification logits,
            NOT the softmax (or log softmax)!
    """
    def __init__(self, model):
        super(ModelWithTemperature, self).__init__()
        self.model = model
        self.temperature = nn.Parameter(torch.ones(1) * 1.5)

    def forward(self, input):
        logits = self.model(input)
        return self.temperature_scale(logits)

    def temperature_scale(self, logits):
        """
        Perform temperature scaling on logits
        """
        # Expand temperature to match the size of logits
        temperature = self.temperature.unsqueeze(1).expand(logits.size(0), logits.size(1))
        return logits / temperature

    # This function probably should live outside of this class, but whatever
    def set_temperature(self, valid_loader):
        """
        Tune the tempearature of the model (using the validation set).
        We're going to set it to optimize NLL.
        valid_loader (DataLoader): validation set loader
        """
        nll_criterion = nn.CrossEntropyLoss()
        ece_criterion = _ECELoss()

        # First: collect all the logits and labels for the validation set
        logits_list = []
        labels_list = []
        with torch.no_grad():
            for input, label in valid_loader:
                logits = self.model(input)
                logits_list.append(logits)
                labels_list.append(label)
            logits = torch.cat(logits_list)
            labels = torch.cat(labels_list)

        # Calculate NLL and ECE before temperature scaling
        before_temperature_nll = nll_criterion(logits, labels).item()  # BREAK
        before_temperature_ece = ece_criterion(logits, labels).item()
        print('Before temperature - NLL: %.3f, ECE: %.3f' % (before_temperature_nll, before_temperature_ece))

        # Next: optimize the temperature w.r.t. NLL
        optimizer = optim.LBFGS([self.temperature], lr=0.01, max_iter=50)

        def eval():
            optimizer.zero_grad()
            loss = nll_criterion(self.temperature_scale(logits), labels)
            loss.backward()
            return loss
        optimizer.step(eval)  # BREAK

        # Calculate NLL and ECE after temperature scaling
        after_temperature_nll = nll_criterion(self.temperature_scale(logits), labels).item()
        after_temperature_ece = ece_criterion(self.temperature_scale(logits), labels).item()
        print('Optimal temperature: %.3f' % self.temperature.item())
        print('After temperature - NLL: %.3f, ECE: %.3f' % (after_temperature_nll, after_temperature_ece))

        return self


class _ECELoss(nn.Module):
    """
    Calculates the Expected Calibration Error of a model.
    (This isn't necessary for temperature scaling, just a cool metric).

    The input to this loss is the logits of a model, NOT the softmax scores.

    This divides the confidence outputs into equally-sized interval bins.
    In each bin, we compute the confidence gap:

    bin_gap = | avg_confidence_in_bin - accuracy_in_bin |

    We then return a weighted average of the gaps, based on the number
    of samples in each bin
    """
    def __init__(self, n_bins=15):
        """
        n_bins (int): number of confidence interval bins
        """
        super(_ECELoss, self).__init__()  # BREAK
        bin_boundaries = torch.linspace(0, 1, n_bins + 1)
        self.bin_lowers = bin_boundaries[:-1]
        self.bin_uppers = bin_boundaries[1:]

    def forward(self, logits, labels):
        softmaxes = F.softmax(logits, dim=1)
        confidences, predictions = torch.max(softmaxes, 1)
        accuracies = predictions.eq(labels)

        ece = torch.zeros(1, device=logits.device)
        for bin_lower, bin_upper in zip(self.bin_lowers, self.bin_uppers):
            # Calculated |confidence - accuracy| in each bin
            in_bin = confidences.gt(bin_lower.item()) * confidences.le(bin_upper.item())  # BREAK
            prop_in_bin = in_bin.float().mean()
            if prop_in_bin.item() > 0:
                accuracy_in_bin = accuracies[in_bin].float().mean()
                avg_confidence_in_bin = confidences[in_bin].mean()
                ece += torch.abs(avg_confidence_in_bin - accuracy_in_bin) * prop_in_bin

        return ece


def reset_(scaled_model):
    """Adaptation: restore the initial temperature so that a call repeats exactly."""
    with torch.no_grad():
        scaled_model.temperature.fill_(1.5)


def calibrate(scaled_model, valid_loader):
    reset_(scaled_model)
    scaled_model.set_temperature(valid_loader)
    with torch.no_grad():
        out = scaled_model(valid_loader[0][0])
    return scaled_model.temperature.detach().clone(), out


def target():
    torch.manual_seed(0)
    orig_model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
    with torch.no_grad():
        orig_model[2].weight.mul_(4.0)  # over-confident logits, as after training
    scaled_model = ModelWithTemperature(orig_model)
    loader1 = [(torch.randn(16, 10), torch.randint(0, 5, (16,))) for _ in range(3)]
    loader2 = [(torch.randn(12, 10) * 2, torch.randint(0, 5, (12,))) for _ in range(2)]
    return [
        (calibrate, (scaled_model, loader1), {}),
        (calibrate, (scaled_model, loader2), {}),
    ]


EXPECT = ("caller: `set_temperature` is a host-side calibration routine (LBFGS closure, `.item()` metrics, "
          "`print`); compile `temperature_scale`/the model and keep the LBFGS driver eager. In `_ECELoss.forward` "
          "the `bin_lower.item()` thresholds and the `if prop_in_bin.item() > 0:` branch with boolean-mask means "
          "are a rewrite candidate (`torch.where` on `prop_in_bin > 0` with masked sums instead of "
          "`accuracies[in_bin]`)")
