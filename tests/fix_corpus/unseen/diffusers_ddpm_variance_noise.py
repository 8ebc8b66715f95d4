"""DDPM step drawing its variance noise through randn_tensor(generator=...) (diffusers DDPMScheduler.step)."""
import torch


def randn_tensor(shape, generator=None, device=None, dtype=None):
    rand_device = device
    batch_size = shape[0]
    if generator is not None:
        gen_device_type = generator.device.type if not isinstance(generator, list) else generator[0].device.type
        if gen_device_type != device.type and gen_device_type == "cpu":
            rand_device = "cpu"
    if isinstance(generator, list):
        shape = (1,) + tuple(shape[1:])
        latents = [torch.randn(shape, generator=generator[i], device=rand_device, dtype=dtype)
                   for i in range(batch_size)]
        latents = torch.cat(latents, dim=0).to(device)
    else:
        latents = torch.randn(shape, generator=generator, device=rand_device, dtype=dtype).to(device)  # BREAK
    return latents


class DDPMStep(torch.nn.Module):
    def __init__(self, train_steps=50):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, train_steps)
        self.register_buffer("alphas_cumprod", torch.cumprod(1.0 - betas, 0))
        self.register_buffer("betas", betas)

    def forward(self, model_output, t, sample, generator=None):
        alpha_prod_t = self.alphas_cumprod[t]
        alpha_prod_t_prev = self.alphas_cumprod[t - 1] if t > 0 else torch.tensor(1.0)
        beta_prod_t = 1 - alpha_prod_t
        current_beta_t = self.betas[t]
        pred_original_sample = (sample - beta_prod_t ** 0.5 * model_output) / alpha_prod_t ** 0.5
        coeff_orig = (alpha_prod_t_prev ** 0.5 * current_beta_t) / beta_prod_t
        coeff_cur = (1 - current_beta_t) ** 0.5 * (1 - alpha_prod_t_prev) / beta_prod_t
        pred_prev_sample = coeff_orig * pred_original_sample + coeff_cur * sample
        variance = 0
        if t > 0:
            variance_noise = randn_tensor(model_output.shape, generator=generator, device=model_output.device,
                                          dtype=model_output.dtype)
            var = (1 - alpha_prod_t_prev) / (1 - alpha_prod_t) * current_beta_t
            variance = var.clamp(min=1e-20) ** 0.5 * variance_noise
        return pred_prev_sample + variance


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    return [(DDPMStep(), (torch.randn(2, 4), 10, torch.randn(2, 4)), {"generator": gen})]


EXPECT = ("caller: the torch.Generator argument cannot enter a graph, so the caller should draw the variance noise "
          "(or pass generator=None and seed globally); a split that keeps randn_tensor eager also verifies")
