"""Euler-style scheduler step that looks up its sigma index with nonzero() + .item() (diffusers)."""
import torch


class EulerStep(torch.nn.Module):
    def __init__(self, steps=10, train_steps=1000):
        super().__init__()
        ts = torch.linspace(0, train_steps - 1, steps).flip(0).round()
        sigmas = torch.linspace(1.0, 0.05, steps)
        self.register_buffer("timesteps", ts)
        self.register_buffer("sigmas", torch.cat([sigmas, torch.zeros(1)]))

    def index_for_timestep(self, timestep, schedule_timesteps=None):
        if schedule_timesteps is None:
            schedule_timesteps = self.timesteps
        indices = (schedule_timesteps == timestep).nonzero()  # BREAK
        # first step takes the second match, if there are two (img2img starts mid-schedule)
        pos = 1 if len(indices) > 1 else 0
        return indices[pos].item()  # BREAK

    def forward(self, model_output, timestep, sample):
        step_index = self.index_for_timestep(timestep)
        sigma = self.sigmas[step_index]
        sigma_next = self.sigmas[step_index + 1]
        pred_original = sample - sigma * model_output
        derivative = (sample - pred_original) / sigma
        return sample + derivative * (sigma_next - sigma)


def target():
    torch.manual_seed(0)
    m = EulerStep()
    t = m.timesteps[3].clone()
    return [(m, (torch.randn(2, 4), t, torch.randn(2, 4)), {})]


EXPECT = ("config: capture_dynamic_output_shape_ops + capture_scalar_outputs trace nonzero and .item(); a rewrite "
          "(argmax over the match mask) is possible but must keep the 'second match' rule")
