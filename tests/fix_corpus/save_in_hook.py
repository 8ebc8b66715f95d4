"""`torch.save` of activations in a forward hook (activation dumping for debugging)."""
import os
import tempfile

import torch

DUMP = os.path.join(tempfile.mkdtemp(prefix="corpus-dump-"), "act.pt")


def dump_hook(module, inputs, output):
    torch.save(output.detach(), DUMP)  # BREAK


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x).relu()
        self.dump(h)
        return self.b(h)

    def dump(self, h):
        dump_hook(self, (), h)


def target():
    torch.manual_seed(0)
    return [(Net(), (torch.randn(3, 4),), {})]


EXPECT = ('split: forward becomes eager glue; torch.save runs in a disabled method between two compiled parts '
          '(the file write is checked: same files written in the same order)')
