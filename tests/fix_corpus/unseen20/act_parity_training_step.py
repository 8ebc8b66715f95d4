"""Adaptive computation time (Graves 2016) from maxwells-daemons/pytorch-adaptive-computation-time
(`pytorch_adaptive_computation_time/models.py`: `AdaptiveCellWrapper`, `_CellUnrollWrapper`, `AdaptiveRNNCell`,
`AdaptiveGRUCell`, `AdaptiveGRU`; `pytorch_adaptive_computation_time/tasks/parity.py`: `ParityDataset`,
`ParityModel`; stored revision edfd2d7). `AdaptiveCellWrapper.forward` ponders for up to `time_limit - 1` steps in a
`for` loop with a `for ... else`, selects the first-step input with a conditional expression on `step == 0`,
accumulates halting values under `torch.no_grad()` with in-place `+=`, combines boolean masks with
`bitwise_and`/`bitwise_not`, and stops early with `if not continuing_mask.any().item(): break`.
`_CellUnrollWrapper.forward` loops over timesteps, builds per-layer hidden lists with comprehensions, and
`_apply_layers` applies optional dropout between layers and sums ponder costs. `ParityModel.training_step` runs the
cell and an output layer, computes the BCE loss plus ponder cost, and returns a dict of logs including
`.type(torch.float).mean().cpu()` accuracy and mean step count.

Adaptations: `ParityModel` subclasses `pytorch_lightning.LightningModule` (not installed); a minimal stand-in base
(an `nn.Module` whose `save_hyperparameters()` stores the caller's arguments in `self.hparams`) is written here,
and `add_argparse_args`/`configure_optimizers`/`train_dataloader`/`main` (Lightning trainer) are left out. The
parity batch (from `ParityDataset`'s infinite iterator in a `DataLoader`) is made in the factory by calling the
original `_make_example` (Python `random.randint`, `torch.randint`) and stacking. Sizes: 8 bits, hidden 16,
`time_limit` 6 (the task's default is 20), batch 8. Two calls: the original `ParityModel.training_step` (unbound,
with the model) on a parity batch, and an `AdaptiveGRU` (2 layers, dropout 0 so the call is deterministic) on a short
sequence; both models are built in the factory. The long docstrings of the classes and methods are shortened, and the
unused `AdaptiveRNN` class is left out.
"""
import argparse
import random
import sys
from typing import List, Optional, Tuple

import torch


# ---- pytorch_adaptive_computation_time/models.py
class AdaptiveCellWrapper(torch.nn.Module):
    """
    Wraps an RNN cell to add adaptive computation time.

    Note that the cell will need an input size of 1 plus the desired input size, to
    allow for the extra first-step flag input.
    """

    time_penalty: float
    ponder_epsilon: float
    time_limit: int

    _cell: torch.nn.modules.RNNCellBase
    _halting_unit: torch.nn.Module

    def __init__(
        self,
        cell: torch.nn.RNNCellBase,
        time_penalty: float,
        initial_halting_bias: float = -1.0,
        ponder_epsilon: float = 1e-2,
        time_limit: int = 100,
    ):
        super().__init__()

        if time_penalty <= 0:
            raise ValueError("time_penalty must be positive.")
        if ponder_epsilon < 0 or ponder_epsilon >= 1:
            raise ValueError(
                "ponder_epsilon must be between 0 (inclusive) and 1 (exclusive)"
            )

        self.time_penalty = time_penalty
        self.ponder_epsilon = ponder_epsilon
        self.time_limit = time_limit

        self._cell = cell
        self._halting_unit = torch.nn.Sequential(
            torch.nn.Linear(cell.hidden_size, 1),
            torch.nn.Flatten(),  # type: ignore
            torch.nn.Sigmoid(),
        )

        torch.nn.init.constant_(self._halting_unit[0].bias, initial_halting_bias)

    def forward(
        self, inputs: torch.Tensor, hidden: Optional[torch.Tensor] = None
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """
        Execute one timestep of the RNN, which may correspond to several internal steps.
        """
        batch_size = inputs.size(0)
        budget = torch.ones((batch_size, 1), device=inputs.device) - self.ponder_epsilon

        # Accumulate intermediate values throughout the ponder sequence
        total_hidden = torch.zeros(
            [batch_size, self._cell.hidden_size], device=inputs.device
        )
        total_remainder = torch.zeros_like(budget)
        total_steps = torch.zeros_like(budget)

        # Extend input with first-step flag
        first_inputs = torch.cat([inputs, torch.ones_like(budget)], dim=1)
        rest_inputs = torch.cat([inputs, torch.zeros_like(budget)], dim=1)

        # Sum of halting values for all steps except the last
        halt_accum = torch.zeros_like(budget)
        continuing_mask = torch.ones_like(budget, dtype=torch.bool)

        for step in range(self.time_limit - 1):
            step_inputs = first_inputs if step == 0 else rest_inputs
            hidden = self._cell(step_inputs, hidden)

            step_halt = self._halting_unit(hidden)
            masked_halt = continuing_mask * step_halt

            with torch.no_grad():
                halt_accum += masked_halt

            # Select indices ending at this step
            ending_mask = continuing_mask.bitwise_and(halt_accum + step_halt > budget)
            continuing_mask = continuing_mask.bitwise_and(ending_mask.bitwise_not())
            total_steps += continuing_mask

            # 3 cases, computed in parallel by masking batch elements:
            # - Continuing computation: weight new values by the halting probability
            # - Ending at this step: weight new values by the remaining budget
            # - Ended previously: no new values (accumulate zero)
            masked_remainder = ending_mask * (1 - halt_accum)
            combined_mask = masked_halt + masked_remainder

            total_hidden = total_hidden + (combined_mask * hidden)
            total_remainder = total_remainder + masked_halt

            # If all batch indices are done, stop iterations early
            if not continuing_mask.any().item():  # BREAK
                break

        else:  # Some elements ran past the hard limit
            # continuing_mask now selects for these elements
            masked_remainder = continuing_mask * (1 - halt_accum)
            total_hidden = total_hidden + (masked_remainder * hidden)

        # Equal gradient to the true cost; maximize all halting values except the last
        ponder_cost = -1 * self.time_penalty * total_remainder.mean()

        return total_hidden, ponder_cost, total_steps + 1


class _CellUnrollWrapper(torch.nn.Module):
    """
    Wraps an adaptive cell into a torch.nn.RNN-style interface.
    """

    batch_first: bool
    _layer_cells: torch.nn.ModuleList
    _dropout_layer: Optional[torch.nn.Dropout]

    def __init__(
        self,
        layer_cells: List[AdaptiveCellWrapper],
        batch_first: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()

        if not layer_cells:
            raise ValueError("layer_cells must be nonempty.")

        self.batch_first = batch_first
        self._layer_cells = torch.nn.ModuleList(layer_cells)

        if dropout:
            self._dropout_layer = torch.nn.Dropout(dropout)
        else:
            self._dropout_layer = None

    def _apply_layers(
        self, inputs: torch.Tensor, layer_hiddens: List[Optional[torch.Tensor]]
    ) -> Tuple[torch.Tensor, List[torch.Tensor], torch.Tensor]:
        """
        Apply the stack of RNN cells (one per layer) to one timestep of inputs
        and hiddens.
        """
        total_ponder_cost = torch.tensor(0.0, device=inputs.device)
        next_hiddens = []

        for i, (cell, hidden) in enumerate(zip(self._layer_cells, layer_hiddens)):
            if self._dropout_layer and i > 0:  # Applies dropout between every 2 layers
                inputs = self._dropout_layer(inputs)

            inputs, ponder_cost, _ = cell(inputs, hidden)
            next_hiddens.append(inputs)
            total_ponder_cost = total_ponder_cost + ponder_cost

        return inputs, next_hiddens, total_ponder_cost  # type: ignore

    def forward(
        self, inputs: torch.Tensor, hidden: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """
        Returns output, hidden, ponder_cost (docstring shortened in this adaptation).
        """
        if self.batch_first:
            inputs = torch.transpose(inputs, 0, 1)

        timesteps, _, _ = inputs.shape

        if hidden is None:
            layer_hiddens = [None for _ in self._layer_cells]
        else:
            layer_hiddens = [h.squeeze(0) for h in hidden.split(1)]

        total_ponder_cost = torch.tensor(0.0, device=inputs.device)
        outputs = []

        for timestep in range(timesteps):
            output, layer_hiddens, ponder_cost = self._apply_layers(  # type: ignore
                inputs[timestep, :, :], layer_hiddens  # type: ignore
            )
            outputs.append(output)
            total_ponder_cost = total_ponder_cost + ponder_cost

        all_outputs = torch.stack(outputs)  # Stacks timesteps
        all_hiddens = torch.stack(layer_hiddens)  # type: ignore  # Stacks layers

        if self.batch_first:
            all_outputs = torch.transpose(all_outputs, 0, 1)

        return all_outputs, all_hiddens, total_ponder_cost


# torch.nn-style cell interface
class AdaptiveRNNCell(AdaptiveCellWrapper):
    """
    An adaptive-time variant of torch.nn.RNNCell.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        time_penalty: float,
        bias: bool = True,
        nonlinearity: str = "tanh",
        initial_halting_bias: float = -1.0,
        ponder_epsilon: float = 1e-2,
        time_limit: int = 100,
    ):
        # Extra input for the first-step flag
        cell = torch.nn.RNNCell(input_size + 1, hidden_size, bias, nonlinearity)
        super().__init__(
            cell, time_penalty, initial_halting_bias, ponder_epsilon, time_limit
        )


class AdaptiveGRUCell(AdaptiveCellWrapper):
    """
    An adaptive-time variant of torch.nn.GRUCell.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        time_penalty: float,
        bias: bool = True,
        initial_halting_bias: float = -1.0,
        ponder_epsilon: float = 1e-2,
        time_limit: int = 100,
    ):
        # Extra input for the first-step flag
        cell = torch.nn.GRUCell(input_size + 1, hidden_size, bias)
        super().__init__(
            cell, time_penalty, initial_halting_bias, ponder_epsilon, time_limit
        )


class AdaptiveGRU(_CellUnrollWrapper):
    """
    An adaptive-time variant of torch.nn.GRU.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        time_penalty: float,
        bias: bool = True,
        initial_halting_bias: float = -1.0,
        ponder_epsilon: float = 1e-2,
        time_limit: int = 100,
        batch_first: bool = False,
        dropout: float = 0.0,
    ):
        if num_layers <= 0:
            raise ValueError("num_layers must be positive")

        def make_cell(first):
            return AdaptiveGRUCell(
                input_size=input_size if first else hidden_size,
                hidden_size=hidden_size,
                time_penalty=time_penalty,
                bias=bias,
                initial_halting_bias=initial_halting_bias,
                ponder_epsilon=ponder_epsilon,
                time_limit=time_limit,
            )

        cells = [make_cell(True)] + [make_cell(False) for _ in range(num_layers - 1)]
        super().__init__(cells, batch_first, dropout)


# ---- stand-in for pytorch_lightning.LightningModule (not installed)
class LightningModule(torch.nn.Module):
    def save_hyperparameters(self):
        frame = sys._getframe(1)
        self.hparams = argparse.Namespace(**{k: v for k, v in frame.f_locals.items()
                                             if k not in ("self", "__class__")})


# ---- pytorch_adaptive_computation_time/tasks/parity.py
class ParityDataset(torch.utils.data.IterableDataset):  # type: ignore
    """
    An infinite IterableDataset for binary parity problems.
    """

    bits: int

    def __init__(self, bits: int):
        if bits <= 0:
            raise ValueError("bits must be at least one.")

        self.bits = bits

    def __iter__(self):
        while True:
            yield self._make_example()

    def _make_example(self) -> Tuple[torch.Tensor, torch.Tensor]:
        vec = torch.zeros(self.bits, dtype=torch.float32)
        num_bits = random.randint(1, self.bits)
        bits = torch.randint(2, size=(num_bits,)) * 2 - 1
        vec[:num_bits] = bits
        parity = (bits == 1).sum() % 2
        return vec, parity.type(torch.float)


class ParityModel(LightningModule):
    """
    An ACT RNN for parity tasks.
    """

    def __init__(
        self,
        bits: int,
        hidden_size: int,
        time_penalty: float,
        batch_size: int,
        learning_rate: float,
        time_limit: int,
        data_workers: int,
    ):
        super().__init__()
        self.save_hyperparameters()

        self.dataset = ParityDataset(bits)
        self.cell = AdaptiveRNNCell(
            input_size=bits,
            hidden_size=hidden_size,
            time_penalty=time_penalty,
            time_limit=time_limit,
        )
        self.output_layer = torch.nn.Linear(hidden_size, 1)

    def forward(
        self, binary_vector: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden, ponder_cost, steps = self.cell(binary_vector)
        logits = self.output_layer(hidden)
        return logits.squeeze(1), ponder_cost, steps

    def training_step(self, batch, _):
        vectors, targets = batch
        logits, ponder_cost, steps = self.forward(vectors)

        log_loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)
        loss = log_loss + ponder_cost

        accuracy = (logits > 0).eq(targets).type(torch.float).mean().cpu()
        mean_steps = steps.type(torch.float).mean().cpu()

        return {
            "loss": loss,
            "log": {
                "loss/total": loss,
                "loss/classification": log_loss,
                "loss/ponder": ponder_cost,
                "accuracy": accuracy,
                "steps": mean_steps,
            },
        }


def target():
    random.seed(0)
    torch.manual_seed(0)
    model = ParityModel(bits=8, hidden_size=16, time_penalty=1e-3, batch_size=8, learning_rate=1e-4,
                        time_limit=6, data_workers=0)
    examples = [model.dataset._make_example() for _ in range(8)]
    batch = (torch.stack([v for v, _ in examples]), torch.stack([p for _, p in examples]))
    gru = AdaptiveGRU(input_size=3, hidden_size=8, num_layers=2, time_penalty=1e-3,
                      initial_halting_bias=0.5, time_limit=5)
    seq = torch.randn(4, 2, 3)
    return [
        (ParityModel.training_step, (model, batch, 0), {}),
        (gru, (seq,), {}),
    ]


EXPECT = ("rewrite: the early exit `if not continuing_mask.any().item(): break` is the only data-dependent "
          "control flow; running the ponder loop to time_limit with the masks already zeroing finished elements "
          "gives the same result (the for-else tail then applies to the elements still running), so dropping "
          "the break keeps each step's graph whole")
