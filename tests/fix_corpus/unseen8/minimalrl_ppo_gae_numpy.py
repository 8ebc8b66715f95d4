"""A minimal PPO update: `make_batch` turns the stored transitions (Python lists and floats) into tensors with
`torch.tensor(s_lst, dtype=torch.float)` etc. and clears `self.data`, then per epoch the TD errors go to the host
(`delta = delta.detach().numpy()`), the GAE advantages are accumulated in a reversed Python loop over the NumPy rows
(`advantage = self.gamma * self.lmbda * advantage + delta_t[0]`, appended to a list, `reverse()`d) and come back with
`torch.tensor(advantage_lst, dtype=torch.float)` before the clipped surrogate and the smooth-L1 value loss
(seungeunrho/minimalRL ppo.py: `PPO.__init__/pi/v/put_data/make_batch/train`; the transitions are stored by `main`'s
rollout loop as `(s, a, r/100.0, s_prime, prob[a].item(), done)`).
Adaptations: there is no Gym environment; the call stores a given list of CartPole-shaped transitions with `put_data`
(as `main` does) and runs `train`; `loss.mean().backward()` and the optimizer step are left out (the census runs
without autograd), so `train` returns the mean loss of each of the `K` epochs instead (the epochs then see the same
parameters). The network keeps its sizes (4 -> 256 -> 2 / 1). `make_batch` empties `self.data`, so a call run twice
gives the same result."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class PPO(nn.Module):
    def __init__(self):
        super(PPO, self).__init__()
        self.data = []
        self.gamma = 0.98
        self.lmbda = 0.95
        self.eps = 0.1
        self.K = 2 #epoch

        self.fc1 = nn.Linear(4,256)
        self.fc_pi = nn.Linear(256,2)
        self.fc_v = nn.Linear(256,1)
        self.optimizer = optim.Adam(self.parameters(), lr=0.0005)

    def pi(self, x, softmax_dim = 0):
        x = F.relu(self.fc1(x))
        x = self.fc_pi(x)
        prob = F.softmax(x, dim=softmax_dim)
        return prob

    def v(self, x):
        x = F.relu(self.fc1(x))
        v = self.fc_v(x)
        return v

    def put_data(self, transition):
        self.data.append(transition)

    def make_batch(self):
        s_lst, a_lst, r_lst, s_prime_lst, prob_a_lst, done_lst = [], [], [], [], [], []
        for item in self.data:
            s, a, r, s_prime, prob_a, done = item

            s_lst.append(s)
            a_lst.append([a])
            r_lst.append([r])
            s_prime_lst.append(s_prime)
            prob_a_lst.append([prob_a])
            done_mask = 0 if done else 1
            done_lst.append([done_mask])

        s,a,r,s_prime,done_mask, prob_a = torch.tensor(s_lst, dtype=torch.float), torch.tensor(a_lst), \
                                          torch.tensor(r_lst), torch.tensor(s_prime_lst, dtype=torch.float), \
                                          torch.tensor(done_lst, dtype=torch.float), torch.tensor(prob_a_lst)
        self.data = []
        return s,a,r,s_prime,done_mask, prob_a

    def train(self):
        s,a,r,s_prime,done_mask, prob_a = self.make_batch()
        losses = []

        for i in range(self.K):
            td_target = r + self.gamma * self.v(s_prime) * done_mask
            delta = td_target - self.v(s)
            delta = delta.detach().numpy()  # NO BREAK in torch 2.13

            advantage_lst = []
            advantage = 0
            for delta_t in delta[::-1]:
                advantage = self.gamma * self.lmbda * advantage + delta_t[0]
                advantage_lst.append([advantage])
            advantage_lst.reverse()
            advantage = torch.tensor(advantage_lst, dtype=torch.float)

            pi = self.pi(s,softmax_dim=1)
            pi_a = pi.gather(1,a)
            ratio = torch.exp(torch.log(pi_a) - torch.log(prob_a))  # a/b == exp(log(a)-log(b))

            surr1 = ratio * advantage
            surr2 = torch.clamp(ratio, 1-self.eps, 1+self.eps) * advantage
            loss = -torch.min(surr1, surr2) + F.smooth_l1_loss(td_target.detach(), self.v(s))

            losses.append(loss.mean())
        return losses


def train_on(model, transitions):
    for transition in transitions:
        model.put_data(transition)
    return model.train()


def _rollout(gen, T):
    out = []
    s = [float(x) for x in (torch.rand(4, generator=gen) * 0.1 - 0.05)]
    for t in range(T):
        s_prime = [float(x) for x in (torch.tensor(s) + torch.randn(4, generator=gen) * 0.05)]
        a = int(torch.randint(0, 2, (1,), generator=gen))
        prob_a = float(torch.rand(1, generator=gen) * 0.5 + 0.25)
        done = t == T - 1
        out.append((s, a, 1.0 / 100.0, s_prime, prob_a, done))
        s = s_prime
    return out


def target():
    torch.manual_seed(0)
    model = PPO()
    gen = torch.Generator().manual_seed(0)
    transitions1 = _rollout(gen, 20)
    transitions2 = _rollout(gen, 12)
    return [
        (train_on, (model, transitions1), {}),
        (train_on, (model, transitions2), {}),
    ]


EXPECT = ("rewrite: compute the GAE on tensors: keep `delta` a tensor and run the reversed recursion with tensor "
          "ops (`advantage = gamma * lmbda * advantage + delta[t]` into a preallocated tensor, or a loop over a "
          "constant-length range), dropping `.numpy()`, the Python list and `torch.tensor(advantage_lst)`; "
          "`make_batch`'s `torch.tensor(...)` of Python lists is host-side data preparation (caller: move it out of "
          "the compiled region if it breaks)")
