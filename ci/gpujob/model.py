"""A small causal language model in plain torch, for packed micro-batches.

Attention is *varlen*: the packed row is split at the sample boundaries (host-side lengths,
so no device sync) and each sample gets its own causal ``scaled_dot_product_attention`` call.
A sample therefore attends only to its own earlier tokens, exactly as if it were alone, and
memory stays linear in the number of samples instead of quadratic in the packed length (a
block-diagonal mask over a 16K-token row would be a 16K x 16K tensor per head).

Weights are initialised from an explicit ``torch.Generator`` on the CPU after building the
module on the meta device, so the global RNG is never consumed and the CPU and GPU runs start
from bit-identical weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .collate import IGNORE_INDEX


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model)

    def attention(self, x: torch.Tensor, seq_lens: tuple[int, ...]) -> torch.Tensor:
        t, d = x.shape
        h = self.n_heads
        # (T, 3, H, Dh) -> three (H, T, Dh): SDPA treats the heads as its batch dimension
        q, k, v = self.qkv(x).view(t, 3, h, d // h).permute(1, 2, 0, 3).unbind(0)
        outs = [F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
                for qs, ks, vs in zip(q.split(seq_lens, dim=1), k.split(seq_lens, dim=1), v.split(seq_lens, dim=1))]
        return self.proj(torch.cat(outs, dim=1).transpose(0, 1).reshape(t, d))

    def forward(self, x: torch.Tensor, seq_lens: tuple[int, ...]) -> torch.Tensor:
        x = x + self.attention(self.ln1(x), seq_lens)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyCausalLM(nn.Module):
    """Token + learned position embeddings, pre-norm blocks, an untied output head."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, mlp_ratio: int,
                 max_positions: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be a multiple of n_heads={n_heads}")
        self.max_positions = max_positions
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_positions, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, mlp_ratio) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, seq_lens: tuple[int, ...]) -> torch.Tensor:
        """``input_ids``, ``position_ids``: (T,) for one packed row; returns logits (T, vocab)."""
        if sum(seq_lens) != input_ids.shape[0]:
            raise ValueError(f"seq_lens sum to {sum(seq_lens)} but the packed row has {input_ids.shape[0]} tokens")
        x = self.tok(input_ids) + self.pos(position_ids)
        for block in self.blocks:
            x = block(x, seq_lens)
        return self.head(self.ln_f(x))


def init_weights(model: nn.Module, seed: int) -> None:
    """GPT-2 style init from one seeded CPU generator, parameters in registration order."""
    g = torch.Generator().manual_seed(seed)
    n_layers = sum(1 for m in model.modules() if isinstance(m, Block)) or 1
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("ln_"):
                p.fill_(1.0)
            else:
                # residual projections scaled down with depth, as GPT-2 does, to keep early losses sane
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                p.normal_(0.0, std, generator=g)


def build_model(vocab_size: int, d_model: int, n_layers: int, n_heads: int, mlp_ratio: int, max_positions: int,
                seed: int, device: torch.device) -> TinyCausalLM:
    with torch.device("meta"):
        model = TinyCausalLM(vocab_size, d_model, n_layers, n_heads, mlp_ratio, max_positions)
    model = model.to_empty(device="cpu")
    init_weights(model, seed)
    return model.to(device)


def packed_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy in float32 over the positions whose label is not IGNORE_INDEX.

    Written as log_softmax + gather rather than ``F.cross_entropy``: torch documents NLLLoss on
    CUDA as having no deterministic implementation (it raises under
    ``use_deterministic_algorithms(True)``), while gather's backward has a deterministic path.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    keep = labels != IGNORE_INDEX
    picked = logp.gather(1, torch.where(keep, labels, 0).unsqueeze(1)).squeeze(1)
    return -torch.where(keep, picked, 0.0).sum()
