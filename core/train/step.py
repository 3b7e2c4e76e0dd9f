"""One training step and its schedule: the phase (mlm, simcse, clm) a step belongs to, the
learning rate (warm-up then linear decay within each phase), the losses, and the update."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from core.encoder.pooling import l2_normalize, pool
from core.train.data import collate
from core.train.masking import IGNORE, mask_tokens, special_mask
from core.train.next_token import next_token_labels


class TrainingStep:
    """The schedule and one optimizer step (a part of Trainer)."""

    def _phase_bounds(self) -> list[tuple[str, int, int]]:
        c = self.config
        if c.objective == "mlm+simcse":
            k = min(c.steps - 1, max(1, round(c.steps * c.mlm_fraction))) if c.steps > 1 else c.steps
            return [("mlm", 0, k), ("simcse", k, c.steps)]
        return [(c.objective, 0, c.steps)]

    def _phase(self, step: int) -> str:
        for name, _a, b in self._phase_bounds():
            if step < b:
                return name
        return self._phase_bounds()[-1][0]

    def _lr(self, step: int) -> float:
        """Linear warm-up to the peak, then linear decay to 0, within each phase."""
        bounds = self._phase_bounds()
        _, a, b = next((p for p in bounds if step < p[2]), bounds[-1])
        t, n = step - a, b - a
        w = self.config.warmup
        warm = min(n, max(1, int(w) if w >= 1 else round(w * n)))
        if t < warm:
            return self.peak_lr * (t + 1) / warm
        return self.peak_lr * max(0.0, (n - t) / max(1, n - warm))

    def autocast(self):
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return torch.autocast(device_type=self.device.type, enabled=False)

    def mlm_loss(self, inputs, attn, labels, reduction="mean"):
        out = self.body(inputs, attn)
        sel = labels != IGNORE
        logits = self.model.head(out.last_hidden_state[sel])          # only the picked positions
        return F.cross_entropy(logits.float(), labels[sel], reduction=reduction), logits

    def embed(self, ids, attn):
        h = self.body(ids, attn).last_hidden_state
        return l2_normalize(pool(h.float(), attn, self.config.pooling, query=self.body.pooling_query))

    def _simcse_loss(self, ids, attn):
        """The same sentences twice through dropout: each one's second view is its positive,
        the other sentences of the batch are its negatives."""
        B = ids.shape[0]
        z = self.embed(torch.cat([ids, ids]), torch.cat([attn, attn]))
        sim = z[:B] @ z[B:].T / self.config.temperature                 # (B, B) cosine / tau
        return F.cross_entropy(sim, torch.arange(B, device=sim.device))

    def _log_due(self, step: int, phase: str) -> bool:
        """A step event (and, watching, a grads event) after ``step``."""
        return step % self.config.log_every == 0 or step == self.config.steps or self._phase(step) != phase

    def _train_step(self, phase: str, watch: bool = False):
        c = self.config
        idx = self.sampler.next()
        ids, attn = collate([self.train_ids[i] for i in idx], self.tokenizer.pad_token_id)
        n_tokens = int(attn.sum())                 # counted on the CPU: no GPU sync per step
        if phase == "mlm":
            special = special_mask(ids, self.special_ids)
            inputs, labels = mask_tokens(ids, special, self.tokenizer.mask_token_id,
                                         self.model.config.vocab_size, c.mask_prob, self.mask_gen, self.random_ids)
            inputs, attn, labels = (t.to(self.device, non_blocking=True) for t in (inputs, attn, labels))
            with self.autocast():
                loss, _ = self.mlm_loss(inputs, attn, labels)
            tokens = n_tokens
        elif phase == "clm":
            # the same head and loss as MLM; the targets are the next tokens (core/train/next_token.py)
            labels = next_token_labels(ids, attn, special_mask(ids, self.special_ids))
            ids, attn, labels = (t.to(self.device, non_blocking=True) for t in (ids, attn, labels))
            with self.autocast():
                loss, _ = self.mlm_loss(ids, attn, labels)
            tokens = n_tokens
        else:
            ids, attn = ids.to(self.device), attn.to(self.device)
            with self.autocast():
                loss = self._simcse_loss(ids, attn)
            tokens = 2 * n_tokens
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        watch = watch and self.grad_flow is not None
        if watch:
            self.grad_flow.before_step()
        if c.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip)
        self.opt.step()
        if watch:
            self.grad_flow.after_step()
        return loss, tokens
