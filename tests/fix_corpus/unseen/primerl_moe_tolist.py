"""MoE experts run in a for-loop over `num_tokens_per_expert.tolist()` splits (prime-rl / torchtitan MoE)."""
import torch


class GroupedExperts(torch.nn.Module):
    def __init__(self, dim, hidden, num_experts):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(num_experts, dim, hidden) * 0.1)
        self.w2 = torch.nn.Parameter(torch.randn(num_experts, hidden, dim) * 0.1)
        self.w3 = torch.nn.Parameter(torch.randn(num_experts, dim, hidden) * 0.1)

    def _run_experts_for_loop(self, x, num_tokens_per_expert):
        # a host-device sync: the split sizes must be Python ints
        num_tokens_per_expert = num_tokens_per_expert.tolist()  # BREAK
        num_padding = x.shape[0] - sum(num_tokens_per_expert)
        x = torch.split(x[: sum(num_tokens_per_expert)], split_size_or_sections=num_tokens_per_expert, dim=0)
        out_experts_splits = []
        for expert_idx, x_expert in enumerate(x):
            h = torch.nn.functional.silu(x_expert @ self.w1[expert_idx])
            h = h * (x_expert @ self.w3[expert_idx])
            out_experts_splits.append(h @ self.w2[expert_idx])
        out = torch.cat(out_experts_splits, dim=0)
        return torch.vstack((out, out.new_zeros((num_padding, out.shape[-1]))))

    def forward(self, x, num_tokens_per_expert):
        return self._run_experts_for_loop(x, num_tokens_per_expert)


class MoE(torch.nn.Module):
    def __init__(self, dim=4, hidden=8, num_experts=3):
        super().__init__()
        self.router = torch.nn.Linear(dim, num_experts, bias=False)
        self.experts = GroupedExperts(dim, hidden, num_experts)
        self.num_experts = num_experts

    def forward(self, x):
        scores = self.router(x).softmax(-1)
        top_scores, selected = scores.max(-1)
        num_tokens_per_expert = torch.histc(selected.float(), bins=self.num_experts, min=0,
                                            max=self.num_experts - 1).int()
        order = selected.argsort(stable=True)
        routed = x[order] * top_scores[order, None]
        out = self.experts(routed, num_tokens_per_expert)
        return torch.empty_like(out).index_copy(0, order, out)


def target():
    torch.manual_seed(0)
    return [(MoE(), (torch.randn(10, 4),), {})]


EXPECT = ("config: capture_scalar_outputs=True makes tolist() unbacked ints that split can take; failing that, "
          "the loop over experts runs eagerly (split or hatch); no rewrite can keep Python-int split sizes")
