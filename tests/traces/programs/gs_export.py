# torch.export only: no Dynamo frame compile in the log.
import torch


class M(torch.nn.Module):
    def forward(self, x):
        return x.sin() + 1


if __name__ == "__main__":
    torch.export.export(M(), (torch.ones(3),))
