"""Train a TopK sparse autoencoder on a model's activations at one site, streamed from sentences.

    result = train_sae(backend, sentences, TrainConfig(site="L3.resid", width=3072, k=32,
                       tokens=1_000_000), "my-sae", progress=print)

The recipe is Gao et al. 2024 ("Scaling and evaluating sparse autoencoders"): TopK activation,
decoder rows kept at unit norm after every step (and the gradient along them removed), the
decoder bias started at the geometric median of the first activations, the encoder tied to the
decoder at the start, and an auxiliary loss (AuxK) that makes latents silent for ``dead_tokens``
tokens reconstruct what the live ones miss, so few stay dead. Activations are divided by one
scale (their root-mean-square entry) while training; the scale is folded into the saved weights.

Streaming: the training sentences (those not in the held-out split) go round by round
(ROUND_SENTENCES at a time, in a seeded order per epoch); a round's activations are collected,
shuffled with a generator seeded by (seed, epoch, round) and cut into batches (a training split
whose activations fit CACHE_BYTES is collected once and kept for the later epochs). Everything is
seeded: the same seed, corpus and machine give the same SAE, and a run stopped and resumed gives
the same SAE as one that ran through (the optimiser's state is saved with the weights).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from torch import nn

from core.errors import Cancelled, InputError
from core.features.collect import check_site, default_site, iter_activations, parse_feature_site
from core.features.sae import SparseAutoencoder
from core.features.saved import META_FILE, SaeMeta, save_sae
from core.files.atomic import atomic_write

STATE_FILE = "train_state.safetensors"
STATE_JSON = "train_state.json"
ROUND_SENTENCES = 2048        # sentences whose activations are shuffled together
CHECKPOINT_SECONDS = 60.0     # the state is saved at least this often (and at the end, or when stopped)
CACHE_BYTES = 512 * 2**20     # a small corpus's activations are kept across epochs up to this size


@dataclass(frozen=True)
class TrainConfig:
    site: str | None = None            # None: the middle layer's residual (collect.default_site)
    width: int | None = None           # None: 8 x the model's width
    k: int = 32
    tokens: int = 1_000_000            # training tokens seen in all (epochs over the corpus as needed)
    seed: int = 0
    lr: float | None = None            # None: 2e-4 x sqrt(16384 / width) (Gao et al.'s scaling)
    batch: int = 4096                  # tokens per optimiser step
    held_out_fraction: float = 0.1     # sentences kept apart for quality (core/features/quality.py)
    aux_k: int | None = None           # None: min(512, width // 2)
    aux_coef: float = 1 / 32
    dead_tokens: int | None = None     # silent this many tokens = dead; None: min(tokens // 10, 10M)
    collect_batch: int = 64            # sentences per forward pass

    def resolved(self, d_in: int, n_layers: int) -> TrainConfig:
        """Every None filled in for a model of width d_in and n_layers blocks, checked."""
        site = self.site or default_site(n_layers)
        check_site(parse_feature_site(site), n_layers, site)
        width = self.width or 8 * d_in
        cfg = TrainConfig(site=site, width=width, k=self.k, tokens=self.tokens, seed=self.seed,
                          lr=self.lr if self.lr is not None else 2e-4 * math.sqrt(16384 / width),
                          batch=self.batch, held_out_fraction=self.held_out_fraction,
                          aux_k=self.aux_k or min(512, max(1, width // 2)), aux_coef=self.aux_coef,
                          dead_tokens=self.dead_tokens or max(1, min(self.tokens // 10, 10_000_000)),
                          collect_batch=self.collect_batch)
        for name in ("width", "k", "tokens", "batch", "collect_batch"):
            if int(getattr(cfg, name)) < 1:
                raise InputError(f"{name} must be at least 1, not {getattr(cfg, name)}")
        if cfg.k > cfg.width:
            raise InputError(f"k ({cfg.k}) cannot be more than the width ({cfg.width})")
        if not 0 <= cfg.held_out_fraction < 1:
            raise InputError(f"the held-out fraction is from 0 to below 1, not {cfg.held_out_fraction}")
        if not cfg.lr > 0:
            raise InputError(f"the learning rate must be above 0, not {cfg.lr}")
        return cfg

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class TrainResult:
    folder: Path
    meta: SaeMeta
    tokens_trained: int
    steps: int
    train_fvu: float          # normalised MSE over the last steps (training tokens)
    dead_fraction: float      # latents silent for dead_tokens tokens at the end
    seconds: float            # this call's
    resumed: bool             # continued a run found in the folder
    finished: bool            # reached config.tokens (False: stopped, resumable)


def held_out_mask(n_sentences: int, fraction: float, seed: int) -> np.ndarray:
    """Which sentences are kept apart (bool, n): a seeded draw per sentence, the same in every
    call; at least one sentence on each side when there are two or more and fraction > 0."""
    if n_sentences == 0:
        return np.zeros(0, dtype=bool)
    u = np.random.default_rng([seed, 0x5AE]).random(n_sentences)
    mask = u < fraction
    if fraction > 0 and n_sentences >= 2:
        if not mask.any():
            mask[int(np.argmin(u))] = True
        if mask.all():
            mask[int(np.argmax(u))] = False
    return mask


def corpus_hash(sentences) -> str:
    h = hashlib.sha256()
    for s in sentences:
        h.update(s.encode("utf-8", "surrogatepass"))
        h.update(b"\n\x00")
    return h.hexdigest()


def geometric_median(x: torch.Tensor, iters: int = 30) -> torch.Tensor:
    """Weiszfeld's iteration from the mean: the point of least summed distance to the rows of x."""
    m = x.mean(0)
    for _ in range(iters):
        w = 1.0 / (x - m).norm(dim=1).clamp_min(1e-8)
        m = (w[:, None] * x).sum(0) / w.sum()
    return m


def fold_scale(sae: SparseAutoencoder, scale: float) -> SparseAutoencoder:
    """An SAE on raw activations from one trained on activations / scale: the codes are scale x
    the scaled SAE's (TopK keeps the same latents), the decoder rows stay unit vectors."""
    raw = SparseAutoencoder(sae.d_in, sae.width, sae.k)
    with torch.no_grad():
        raw.W_enc.copy_(sae.W_enc)
        raw.W_dec.copy_(sae.W_dec)
        raw.b_enc.copy_(sae.b_enc * scale)
        raw.b_dec.copy_(sae.b_dec * scale)
    return raw.eval()


class _Trainer:
    """One training run's state: the SAE (on scaled activations), Adam, the dead-latent clocks and
    where in the stream it stands."""

    def __init__(self, cfg: TrainConfig, d_in: int, device):
        self.cfg, self.device = cfg, device
        gen = torch.Generator().manual_seed(cfg.seed)
        self.sae = SparseAutoencoder(d_in, cfg.width, cfg.k, generator=gen).to(device)
        self.opt = torch.optim.Adam(self.sae.parameters(), lr=cfg.lr, eps=6.25e-10)
        self.since_fired = torch.zeros(cfg.width, dtype=torch.long, device=device)
        self.scale = 0.0               # 0: not yet set (the first round sets it)
        self.tokens = self.steps = 0
        self.epoch = self.round = self.batch_in_round = 0
        self.recent_fvu: list[float] = []

    def start(self, x: torch.Tensor) -> None:
        """Scale and b_dec from the first round's activations."""
        self.scale = float(x.pow(2).mean().sqrt().clamp_min(1e-12))
        xs = x / self.scale
        with torch.no_grad():
            self.sae.b_dec.copy_(geometric_median(xs[:65536]))
            self.sae.b_enc.copy_(-(self.sae.b_dec @ self.sae.W_enc))

    def step(self, x: torch.Tensor) -> None:
        cfg, sae = self.cfg, self.sae
        xs = x / self.scale
        pre = sae.pre_activations(xs)
        values, idx = sae.topk_parts(pre)
        x_hat = sae.decode_topk(values, idx)
        err = xs - x_hat
        mse = err.pow(2).sum(-1).mean()
        variance = (xs - xs.mean(0)).pow(2).sum(-1).mean().clamp_min(1e-12)
        loss = mse
        dead = self.since_fired >= cfg.dead_tokens
        n_dead = int(dead.sum())
        if n_dead:
            aux_values, aux_idx = pre.masked_fill(~dead, float("-inf")).topk(min(cfg.aux_k, n_dead), dim=-1)
            e_hat = nn.functional.embedding_bag(aux_idx, sae.W_dec, per_sample_weights=aux_values.relu(), mode="sum")
            target = err.detach()
            aux = (e_hat - target).pow(2).sum(-1).mean() / target.pow(2).sum(-1).mean().clamp_min(1e-12)
            loss = loss + cfg.aux_coef * aux * mse.detach()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        sae.drop_parallel_gradient()
        torch.nn.utils.clip_grad_norm_(sae.parameters(), 1.0)
        self.opt.step()
        sae.normalise_decoder()
        with torch.no_grad():
            self.since_fired += len(x)
            self.since_fired[idx[values > 0]] = 0
        self.tokens += len(x)
        self.steps += 1
        self.recent_fvu = (self.recent_fvu + [float(mse.detach() / variance)])[-20:]

    # -- the state on disk --------------------------------------------------------------------
    def state_tensors(self) -> dict:
        t = {f"sae.{n}": p.detach().cpu().contiguous() for n, p in self.sae.named_parameters()}
        t["since_fired"] = self.since_fired.cpu()
        names = dict(enumerate(n for n, _ in self.sae.named_parameters()))
        for i, s in self.opt.state_dict()["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                t[f"adam.{names[i]}.{key}"] = s[key].cpu().contiguous()
            t[f"adam.{names[i]}.step"] = torch.as_tensor(s["step"]).reshape(1).float().cpu()
        return t

    def load_state(self, t: dict, where: dict) -> None:
        with torch.no_grad():
            for n, p in self.sae.named_parameters():
                p.copy_(t[f"sae.{n}"])
        self.since_fired = t["since_fired"].to(self.device)
        names = [n for n, _ in self.sae.named_parameters()]
        if f"adam.{names[0]}.exp_avg" in t:
            sd = self.opt.state_dict()
            sd["state"] = {i: {"step": t[f"adam.{n}.step"].reshape(()).clone(),
                               "exp_avg": t[f"adam.{n}.exp_avg"].to(self.device),
                               "exp_avg_sq": t[f"adam.{n}.exp_avg_sq"].to(self.device)}
                           for i, n in enumerate(names)}
            self.opt.load_state_dict(sd)
        self.scale = float(where["scale"])
        self.tokens, self.steps = int(where["tokens"]), int(where["steps"])
        self.epoch, self.round, self.batch_in_round = int(where["epoch"]), int(where["round"]), \
            int(where["batch_in_round"])
        self.recent_fvu = list(where.get("recent_fvu", []))

    def where(self) -> dict:
        return {"scale": self.scale, "tokens": self.tokens, "steps": self.steps, "epoch": self.epoch,
                "round": self.round, "batch_in_round": self.batch_in_round, "recent_fvu": self.recent_fvu}


def _save_state(folder: Path, trainer: _Trainer, identity: dict) -> None:
    from safetensors.torch import save
    atomic_write(folder / STATE_FILE, save(trainer.state_tensors()))
    atomic_write(folder / STATE_JSON, json.dumps({**identity, "where": trainer.where()}, indent=1).encode())


def _load_state(folder: Path) -> tuple[dict, dict] | None:
    if not (folder / STATE_JSON).is_file():
        return None
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        info = json.loads((folder / STATE_JSON).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / STATE_FILE))
        info["where"]["tokens"]  # noqa: B018 - present
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as e:
        raise InputError(f"the training state in {folder} cannot be read ({e}): "
                         "train into a new folder") from None
    return info, tensors


def _meta(backend, cfg: TrainConfig, trainer: _Trainer, n: int, chash: str, d_in: int) -> SaeMeta:
    # the model's location (a folder's absolute path, a packaged model's name): what loads it again
    where = getattr(backend, "model_location", None) or getattr(backend, "model_name", "?")
    return SaeMeta(site=cfg.site, model=where,
                   model_sha256=getattr(backend, "weights_sha256", ""), d_in=d_in, width=cfg.width,
                   k=cfg.k, seed=cfg.seed, tokens_trained=trainer.tokens,
                   held_out_fraction=cfg.held_out_fraction, n_sentences=n, corpus_sha256=chash,
                   scale=trainer.scale, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   precision=getattr(backend, "precision", "fp32"),
                   extra={"train": cfg.to_dict(), "steps": trainer.steps,
                          "train_fvu": trainer.recent_fvu[-1] if trainer.recent_fvu else None})


def _collect_all(model, sentences, train_ids, cfg: TrainConfig, d_in: int, should_stop) -> dict | None:
    """{sentence id: its activations (n_tokens, d_in)} of every training sentence when they fit
    CACHE_BYTES (counted from the token ids first), else None."""
    texts = [sentences[i] for i in train_ids]
    tokens = sum(len(x) - 2 for x in model.encode_ids(texts)[0])
    if tokens * d_in * 4 > CACHE_BYTES:
        return None
    cache: dict = {}
    for batch in iter_activations(model, texts, cfg.site, cfg.collect_batch, should_stop=should_stop):
        order = torch.argsort(batch.sentence_ids * 100_000 + batch.positions)
        sid, acts = batch.sentence_ids[order], batch.acts[order]
        for local in torch.unique(sid).tolist():
            cache[int(train_ids[local])] = acts[sid == local]
    for i in train_ids:
        cache.setdefault(int(i), torch.zeros(0, d_in, device=model.device))
    return cache


def train_sae(model, sentences, config: TrainConfig, out_folder, progress=None,
              should_stop=None) -> TrainResult:
    """Train (or continue training) an SAE on ``model``'s activations over ``sentences``, saving
    it into ``out_folder`` (core/features/saved.py's layout, plus the training state, so a call
    on the same folder continues where the last one stopped). progress(tokens done, total,
    note); should_stop() -> True stops at the next step, saving first (TrainResult.finished
    False). The SAE is on the model's device while it trains."""
    t0 = time.perf_counter()
    sentences = list(sentences)
    d_in, n_layers = int(model.dim), int(model.n_layers)
    cfg = config.resolved(d_in, n_layers)
    folder = Path(out_folder)
    n = len(sentences)
    if n == 0:
        raise InputError("no sentences to train on")
    chash = corpus_hash(sentences)
    identity = {"model_sha256": getattr(model, "weights_sha256", ""), "corpus_sha256": chash,
                "n_sentences": n, "config": {**cfg.to_dict(), "tokens": None}}
    device = model.device
    trainer = _Trainer(cfg, d_in, device)
    state = _load_state(folder) if folder.is_dir() else None
    resumed = state is not None
    if state is not None:
        info, tensors = state
        mine = {k: info.get(k) for k in identity}
        if mine != identity:
            differ = [k for k in identity if k != "config" and info.get(k) != identity[k]]
            theirs = info.get("config") or {}
            differ += [k for k in identity["config"] if theirs.get(k) != identity["config"][k]]
            raise InputError(f"{folder} holds a training run of another {', '.join(differ)}: "
                             "train into a new folder, or give the same model, corpus and settings to continue it")
        trainer.load_state(tensors, info["where"])
    elif folder.is_dir() and (folder / META_FILE).exists():
        raise InputError(f"{folder} already holds an SAE with no training state to continue: train into a new folder")
    folder.mkdir(parents=True, exist_ok=True)
    held = held_out_mask(n, cfg.held_out_fraction, cfg.seed)
    train_ids = np.flatnonzero(~held)
    if len(train_ids) == 0:
        raise InputError("every sentence is held out: lower the held-out fraction or give more sentences")
    rounds = -(-len(train_ids) // ROUND_SENTENCES)
    last_save = time.perf_counter()
    stopped = False
    # A training split whose activations fit CACHE_BYTES is collected once, in one pass in a fixed
    # order (so a resumed run reads the very same numbers), and kept for every epoch; a larger one
    # streams, round by round.
    try:
        cache = _collect_all(model, sentences, train_ids, cfg, d_in, should_stop)
    except Cancelled:
        raise Cancelled("training stopped before its first step: nothing was saved") from None

    def save_all():
        _save_state(folder, trainer, identity)
        save_sae(folder, fold_scale(trainer.sae, trainer.scale), _meta(model, cfg, trainer, n, chash, d_in))

    while trainer.tokens < cfg.tokens and not stopped:
        order = train_ids[np.random.default_rng([cfg.seed, trainer.epoch]).permutation(len(train_ids))]
        while trainer.round < rounds and trainer.tokens < cfg.tokens:
            ids = order[trainer.round * ROUND_SENTENCES:(trainer.round + 1) * ROUND_SENTENCES]
            chunk = [sentences[i] for i in ids]
            if cache is not None:
                acts = torch.cat([cache[int(i)] for i in ids])
            else:
                try:
                    acts = torch.cat([b.acts for b in iter_activations(model, chunk, cfg.site, cfg.collect_batch,
                                                                       should_stop=should_stop)])
                except Cancelled:
                    stopped = True
                    break
            if trainer.scale == 0.0:
                trainer.start(acts)
            gen = torch.Generator().manual_seed(int(np.random.default_rng(
                [cfg.seed, trainer.epoch, trainer.round]).integers(2**62)))
            acts = acts[torch.randperm(len(acts), generator=gen).to(acts.device)]
            batches = range(0, len(acts), cfg.batch)
            for b in list(batches)[trainer.batch_in_round:]:
                if trainer.tokens >= cfg.tokens:
                    break
                if should_stop is not None and should_stop():
                    stopped = True
                    break
                trainer.step(acts[b:b + cfg.batch])
                trainer.batch_in_round += 1
                if progress is not None:
                    progress(min(trainer.tokens, cfg.tokens), cfg.tokens,
                             f"normalised MSE {trainer.recent_fvu[-1]:.3f}")
                if time.perf_counter() - last_save > CHECKPOINT_SECONDS:
                    save_all()
                    last_save = time.perf_counter()
            if stopped:
                break
            if trainer.batch_in_round >= len(batches):
                trainer.round, trainer.batch_in_round = trainer.round + 1, 0
        if trainer.round >= rounds:
            trainer.epoch, trainer.round, trainer.batch_in_round = trainer.epoch + 1, 0, 0
    if trainer.tokens == 0:
        raise Cancelled("training stopped before its first step: nothing was saved")
    save_all()
    meta = _meta(model, cfg, trainer, n, chash, d_in)
    dead = float((trainer.since_fired >= cfg.dead_tokens).float().mean())
    return TrainResult(folder, meta, trainer.tokens, trainer.steps,
                       trainer.recent_fvu[-1] if trainer.recent_fvu else float("nan"), dead,
                       time.perf_counter() - t0, resumed, not stopped)


def train_on_activations(x: torch.Tensor, config: TrainConfig, progress=None) -> tuple[SparseAutoencoder, TrainResult]:
    """Train on activations already in memory (n, d_in), epoch after epoch in seeded orders: the
    same steps as train_sae, for synthetic data with a known answer (tests) and small studies.
    Returns the SAE on raw activations and a TrainResult (folder and meta empty)."""
    t0 = time.perf_counter()
    # no model here: the site is only a label
    labelled = TrainConfig.from_dict({**config.to_dict(), "site": config.site or "L1.resid"})
    cfg = labelled.resolved(int(x.shape[1]), 10**6)
    trainer = _Trainer(cfg, int(x.shape[1]), x.device)
    trainer.start(x)
    while trainer.tokens < cfg.tokens:
        gen = torch.Generator().manual_seed(int(np.random.default_rng([cfg.seed, trainer.epoch]).integers(2**62)))
        shuffled = x[torch.randperm(len(x), generator=gen).to(x.device)]
        for b in range(0, len(shuffled), cfg.batch):
            if trainer.tokens >= cfg.tokens:
                break
            trainer.step(shuffled[b:b + cfg.batch])
            if progress is not None:
                progress(trainer.tokens, cfg.tokens, "")
        trainer.epoch += 1
    dead = float((trainer.since_fired >= cfg.dead_tokens).float().mean())
    result = TrainResult(Path(), None, trainer.tokens, trainer.steps, trainer.recent_fvu[-1], dead,
                         time.perf_counter() - t0, False, True)
    return fold_scale(trainer.sae, trainer.scale), result
