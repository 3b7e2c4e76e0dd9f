"""Train the from-scratch encoder: masked-LM, contrastive (unsupervised SimCSE), MLM then SimCSE, or
next-token prediction under a causal mask (clm).

    cfg = TrainConfig(corpus="assets/sample_corpus.txt", out="runs/tiny", steps=500)
    summary = Trainer(cfg).run(progress=print, cancel=threading.Event())

``run`` reports dict events to ``progress`` (see EVENT KINDS below), stops cleanly when
``cancel`` is set (an Event, or a callable returning True) after saving a checkpoint, and returns
the summary dict the CLI prints as its last line.

The output folder is a model folder (``--model OUT`` everywhere): ``model.safetensors`` +
``encoderscope.json`` + tokenizer files, plus ``trainer_state.json`` / ``trainer_state.safetensors``
(optimizer moments, RNG states, data position: no pickle) so that ``resume`` continues the same
run. Checkpoints are written to a temporary folder and renamed into place, so a cancel or a
kill leaves the previous complete checkpoint or the new one, never half of each.

EVENT KINDS (every event has "kind", "step", "total"):
    status      {"message"}                                      setting up (reading, tokenizing ...)
    start       {"device", "precision", "params", "vocab_size", "train_sentences",
                 "heldout_sentences", "objective", "history"}   training begins (history: resumed)
    step        {"phase", "loss", "lr", "tokens_per_s", "elapsed_s", "eta_s"}   every log_every steps
    eval        {"phase", "heldout_loss", "heldout_mlm_loss", "heldout_mlm_accuracy",
                 "heldout_clm_loss", "heldout_clm_accuracy",
                 "unigram_loss", "unigram_accuracy", "heldout_simcse_loss", "alignment",
                 "uniformity", "pair_cosine", "unrelated_cosine"}   (absent metrics are None)
    grads       {"groups", "grad_norm", "update_ratio", "total_grad_norm"}   every log step when watching:
                per parameter group ("embeddings", "layer 1 attention", "layer 1 FFN", ..., "final norm",
                "MLM head"; groups without a gradient that step are left out) the gradient norm after
                backward, before clipping, and the optimizer update's ||w_after - w_before|| / ||w_before||
    probe       {"snapshot", "probe_sentence", "tokens", "entropy", "probe_texts", "probe_cosine",
                 "anisotropy"}   at step 0, every probe_every steps and at the end when watching:
                the probe sentence's tokens and each head's attention entropy (layers x heads, nats,
                mean over its query rows), the probe set's pairwise cosine matrix, the anisotropy
                (mean cosine of all pairs of a fixed sample of training sentences), and the snapshot
                file (relative to the output folder) holding the attentions (core/train/run_folder.py)
    checkpoint  {"path"}
    done        the summary (also returned), with "cancelled": bool

Every event is also appended to ``metrics.jsonl`` in the output folder (core/train/run_folder.py).
"""
from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from core.device import bf16_native, bf16_supported, describe_device, pick_device
from core.encoder.model import Encoder, EncoderConfig, EncoderForMaskedLM
from core.encoder.pooling import l2_normalize, pool
from core.encoder.sources import CHECKPOINT_MARKER, DEFAULT_MODEL
from core.encoder.transformers_import import from_transformers
from core.encoder.weights import load_folder, save_checkpoint
from core.errors import EncoderscopeError, InputError, ModelUnavailable
from core.evaluate.pairs import read_scored_pairs
from core.folder_lock import OutputFolderLock
from core.train import run_folder
from core.train.checkpoint import (
    STATE_JSON,
    STATE_TENSORS,
    STATE_VERSION,
    atomic_folder,
    optimizer_state,
    optimizer_tensors,
    read_trainer_state,
    recover,
)
from core.train.config import TrainConfig, uses_lm_head
from core.train.data import BatchSampler, collate, encode, read_corpus, split_heldout
from core.train.evaluation import Evaluator, HeldOut, read_pairs
from core.train.masking import IGNORE, mask_tokens, special_mask
from core.train.next_token import next_token_labels
from core.train.watch import GradFlow, Probe, probe_every

MLM_EVAL_TARGETS = 2000   # aim to score about this many masked held-out tokens per evaluation
MLM_EVAL_REPEATS = 10     # ... masking the held-out sentences at most this many times over
HELDOUT_LOSS = {"simcse": "heldout_simcse_loss", "clm": "heldout_clm_loss"}   # phase -> its held-out loss (else MLM's)


# ---------------------------------------------------------------------------------------------
# the trainer


class Trainer:
    def __init__(self, config: TrainConfig, read_corpus: Callable[..., list[str]] = read_corpus):
        """read_corpus(source, limit=..., encoding=...) -> sentences: core's file reader by default; the app
        passes index.corpus.read_training_corpus, which reads stores too."""
        self.config = config
        self.read_corpus = read_corpus
        self.model = None           # EncoderForMaskedLM or Encoder, on self.device
        self.tokenizer = None
        self.device = None
        self.precision = None
        self.step = 0
        self.history: dict = {"train": [], "eval": []}
        self.added_head = False     # a fresh MLM head was put on imported weights
        self._progress: Callable = lambda ev: None
        self.metrics = None         # run_folder.MetricsLog: every event, also on disk
        self.grad_flow = None       # GradFlow and Probe while watching
        self.probe = None

    # ---- public ---------------------------------------------------------------------------
    def run(self, progress: Callable[[dict], None] | None = None, cancel=None) -> dict:
        """Train to ``config.steps``; returns the summary (also sent as the "done" event)."""
        self._progress = progress or (lambda ev: None)
        threads = torch.get_num_threads()
        if self.config.threads > 0:
            torch.set_num_threads(self.config.threads)
        try:
            with OutputFolderLock(self.config.out, "train"):
                return self._run(cancel_check(cancel))
        finally:
            torch.set_num_threads(threads)

    def _run(self, is_cancelled) -> dict:
        started = time.perf_counter()
        self._setup()
        c = self.config
        total = c.steps
        self._emit("start", device=describe_device(self.device), precision=self.precision,
                   params=sum(p.numel() for p in self.model.parameters()),
                   vocab_size=len(self.tokenizer), train_sentences=len(self.train_ids),
                   heldout_sentences=len(self.eval_ids), objective=c.objective,
                   history=copy.deepcopy(self.history), out=str(c.out))
        if self.step == 0 and self.eval_ids:
            self._evaluate()
        if self.step == 0 and self.probe:
            self._probe()
        if self.step >= total:
            self._emit("status", message=f"the checkpoint is already at step {self.step} of {total}")

        win_loss, win_n, win_tokens = torch.zeros((), device=self.device), 0, 0
        win_start = time.perf_counter()
        run_start_step, run_start_time = self.step, time.perf_counter()
        cancelled = False
        last_ckpt = self.step if c.resume else -1
        self.model.train()
        while self.step < total:
            if is_cancelled():
                cancelled = True
                break
            phase = self._phase(self.step)
            lr = self._lr(self.step)
            for g in self.opt.param_groups:
                g["lr"] = lr
            loss, tokens = self._train_step(phase, watch=self._log_due(self.step + 1, phase))
            self.step += 1
            win_loss += loss.detach().float()
            win_n += 1
            win_tokens += tokens
            if self._log_due(self.step, phase):
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                now = time.perf_counter()
                mean = float(win_loss) / win_n
                if not math.isfinite(mean):
                    raise EncoderscopeError(f"the loss became {mean} at step {self.step}: lower the "
                                            "learning rate (--lr) or use fp32 (--precision fp32)")
                per_step = (now - run_start_time) / max(1, self.step - run_start_step)
                ev = dict(phase=phase, loss=mean, lr=lr, tokens_per_s=win_tokens / max(now - win_start, 1e-9),
                          elapsed_s=now - started, eta_s=per_step * (total - self.step))
                self.history["train"].append({"step": self.step, "phase": phase, "loss": mean, "lr": lr})
                self._emit("step", **ev)
                if self.grad_flow and (grads := self.grad_flow.report()):
                    self._emit("grads", **grads)
                win_loss.zero_()
                win_n = win_tokens = 0
                win_start = now
            if self.eval_ids and (self.step % self.eval_every == 0 or self.step == total):
                self._evaluate()
                self.model.train()
                win_start = time.perf_counter()
            if self.probe and (self.step % self.probe_every == 0 or self.step == total):
                self._probe()
                win_start = time.perf_counter()
            if c.checkpoint_every and self.step % c.checkpoint_every == 0 and self.step < total:
                self._checkpoint()
                last_ckpt = self.step
                win_start = time.perf_counter()
        if last_ckpt != self.step or not (Path(c.out) / STATE_JSON).is_file():
            self._checkpoint()
        seconds = time.perf_counter() - started
        trained = self.step - run_start_step
        summary = self._summary(cancelled, seconds, trained)
        self._emit("done", **summary)
        return summary

    # ---- setup ----------------------------------------------------------------------------
    def _setup(self) -> None:
        c = self.config
        c.validate()
        try:
            self.device = pick_device(None if c.device in ("", "auto") else c.device)
        except RuntimeError as e:
            raise InputError(str(e)) from None
        if c.precision == "auto":
            self.precision = "bf16" if bf16_native(self.device) else "fp32"
        elif c.precision == "bf16" and not bf16_supported(self.device):
            raise InputError(f"bf16 is not supported on {describe_device(self.device)}; use --precision fp32")
        else:
            self.precision = c.precision
        out = Path(c.out).expanduser()
        recover(out)
        resume = Path(c.resume).expanduser() if c.resume else None
        if out.exists() and not out.is_dir():
            raise InputError(f"output {out} is a file, not a folder")
        if out.is_dir() and any(out.iterdir()):
            same = resume is not None and out.resolve() == resume.resolve()
            if not (out / CHECKPOINT_MARKER).is_file() and not run_folder.only_watch_files(out):
                raise InputError(f"output folder {out} is not empty and holds no Encoderscope checkpoint: "
                                 "choose a new or empty folder")
            if not same and not c.overwrite and (out / CHECKPOINT_MARKER).is_file():
                raise InputError(f"output folder {out} already holds a checkpoint: choose another folder, "
                                 "resume it (--resume), or allow overwriting it")

        saved = read_trainer_state(resume) if resume is not None else None
        self.metrics = run_folder.start_run(out, resume, saved["step"] if saved else 0)
        self._emit("status", message=f"reading {c.corpus}")
        sentences = self.read_corpus(c.corpus, limit=c.max_sentences or None, encoding=c.corpus_encoding or None)
        train, held = split_heldout(sentences, c.heldout, c.seed)
        if resume is not None:
            self._emit("status", message=f"loading checkpoint {resume}")
            self._load_model(resume)
            self.tokenizer = _folder_tokenizer(resume, "cannot resume from")
        else:
            torch.manual_seed(c.seed)
            self._emit("status", message="building the tokenizer and the model")
            self._build_model(train)
        self._apply_model_settings()
        self._check_head()
        tok = self.tokenizer
        self.max_length = min(c.max_length, self.model.config.max_position_embeddings)
        self.special_ids = sorted(set(tok.all_special_ids) | {tok.pad_token_id})
        self._emit("status", message=f"tokenizing {len(train) + len(held):,} sentences")
        self.train_ids = [s for s in encode(tok, train, self.max_length) if len(s) > 2]
        if not self.train_ids:
            raise InputError("no training sentence has any token besides [CLS]/[SEP]")
        self.eval_ids = [s for s in encode(tok, held[:c.eval_sentences], self.max_length) if len(s) > 2]
        self._unigram()
        self.model.to(self.device)

        decay, no_decay = [], []
        for _name, p in self.model.named_parameters():
            if p.requires_grad:
                (decay if p.ndim >= 2 else no_decay).append(p)
        # auto: fresh weights 5e-4; imported weights 5e-5, or 2e-4 when a new MLM head was added
        # (a random head next to a trained body needs the higher rate to catch up).
        self.peak_lr = c.lr or (5e-4 if c.init == "fresh" else 2e-4 if self.added_head else 5e-5)
        if saved and not c.lr:
            self.peak_lr = saved.get("peak_lr", self.peak_lr)
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": c.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=self.peak_lr, betas=(0.9, 0.98), eps=1e-6)
        self.mask_gen = torch.Generator().manual_seed(c.seed)
        self.sampler = BatchSampler(len(self.train_ids), c.batch_size, c.seed)
        self.eval_every = c.eval_every or max(10, c.steps // 20)
        if saved is not None:
            self._restore(resume, saved)
        self._prepare_eval()
        if c.watch:
            self.grad_flow = GradFlow(self.model.named_parameters())
            self.probe = Probe(self, out)
            self.probe_every = probe_every(c)

    def _build_model(self, train: list[str]) -> None:
        c = self.config
        AutoTokenizer = from_transformers("AutoTokenizer")
        if c.init == "fresh":
            if c.tokenizer == "word":
                from core.encoder.wordtok import build_word_tokenizer
                self.tokenizer = build_word_tokenizer(train, c.vocab_size, c.min_frequency, c.max_length)
            else:
                from core.encoder.sources import resolve
                self.tokenizer = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder),
                                                               trust_remote_code=False)
                self.tokenizer.model_max_length = c.max_length
            tok = self.tokenizer
            cfg = EncoderConfig(vocab_size=len(tok), max_position_embeddings=c.max_length, dim=c.dim,
                                n_layers=c.layers, n_heads=c.heads, hidden_dim=c.ffn, dropout=c.dropout,
                                attention_dropout=c.dropout, positions=c.positions, norm=c.norm,
                                type_vocab_size=0, pad_token_id=tok.pad_token_id or 0,
                                attention=c.attention, pooling=c.pooling)
            self.model = EncoderForMaskedLM(cfg) if uses_lm_head(c.objective) else Encoder(cfg)
            return
        if c.init == DEFAULT_MODEL:
            from core.encoder.sources import resolve
            folder = resolve(DEFAULT_MODEL).folder
        else:
            folder = Path(c.init).expanduser()
            if not folder.is_dir():
                raise InputError(f"--init {c.init!r}: use 'fresh', 'minilm' or a model folder")
        try:
            self._load_model(folder)
        except ModelUnavailable as e:
            raise InputError(f"cannot start from {folder}: {e}") from None
        self.tokenizer = _folder_tokenizer(folder, "cannot start from")
        if self.tokenizer.mask_token_id is None and "mlm" in c.objective:
            raise InputError(f"the tokenizer of {folder} has no [MASK] token: it cannot be trained with MLM")

    def _load_model(self, folder: Path) -> None:
        model, cfg, _ = load_folder(Path(folder))
        self.added_head = isinstance(model, Encoder) and uses_lm_head(self.config.objective)
        if self.added_head:
            # A body without a masked-LM head (minilm): add a fresh head, tied to its embeddings.
            wrapped = EncoderForMaskedLM(cfg)
            wrapped.distilbert = model
            wrapped.tie_weights()
            model = wrapped
        self.model = model

    def _apply_model_settings(self) -> None:
        """The run's attention mask and pooling become the model's (saved with it): a model
        started from other weights is trained, and later embeds, the way this run asks."""
        body = self.model.distilbert if isinstance(self.model, EncoderForMaskedLM) else self.model
        body.config.attention = self.config.attention
        body.set_pooling(self.config.pooling)

    def _check_head(self) -> None:
        self.has_mlm = isinstance(self.model, EncoderForMaskedLM)
        self.body = self.model.distilbert if self.has_mlm else self.model
        tok = self.tokenizer
        if tok.pad_token_id is None or tok.cls_token_id is None:
            raise InputError("the tokenizer has no [PAD]/[CLS] token")
        if len(tok) > self.model.config.vocab_size:
            raise InputError(f"the tokenizer has {len(tok)} tokens but the model only {self.model.config.vocab_size}")
        mc = self.model.config
        if "simcse" in self.config.objective and not (mc.dropout > 0 or mc.attention_dropout > 0):
            raise InputError("contrastive (SimCSE) training needs dropout > 0, and this model's "
                             "dropout is 0: the two dropout views of a sentence are its positive pair")

    def _unigram(self) -> None:
        """Token frequencies of the training part: the baseline a model must beat, and the pool
        the 10% "random token" replacements draw from."""
        V = self.model.config.vocab_size
        counts = np.bincount(np.concatenate(self.train_ids), minlength=V).astype(np.float64)
        counts[self.special_ids] = 0
        seen = np.flatnonzero(counts)
        self.random_ids = torch.from_numpy(seen if len(seen) else np.arange(V))
        ordinary = np.ones(V, bool)
        ordinary[self.special_ids] = False
        # Good-Turing style: tokens never seen in training share the probability mass of the
        # tokens seen once (n1 / N); seen tokens keep their frequencies, scaled to make room.
        # (Add-one smoothing would hand most of the mass to a 30k vocabulary's unseen pieces.)
        N = counts.sum()
        unseen = ordinary & (counts == 0)
        probs = counts / max(N, 1.0)
        if unseen.any() and N > 0:
            mass = max(1.0, float((counts == 1).sum())) / N
            probs = probs * (1.0 - mass)
            probs[unseen] = mass / unseen.sum()
        self.unigram_logp = np.log(probs, where=probs > 0, out=np.full(V, -np.inf))
        self.unigram_top = int(np.argmax(counts))

    def _prepare_eval(self) -> None:
        """Fixed held-out batches: the same masks at every evaluation, so the numbers compare.

        A small held-out part is masked several times over (different positions each time, up
        to MLM_EVAL_REPEATS copies) until about MLM_EVAL_TARGETS tokens are scored: 29 held-out
        sentences give ~26 masked tokens once, too few for an accuracy worth reading.
        """
        c = self.config
        self.embed_batches, self.eval_batches = [], []
        gen = torch.Generator().manual_seed(c.seed + 1)
        bs = max(c.batch_size, 64)
        n_tokens = sum(len(s) - 2 for s in self.eval_ids)
        repeats = int(min(MLM_EVAL_REPEATS, max(1, math.ceil(MLM_EVAL_TARGETS / max(1.0, c.mask_prob * n_tokens)))))
        if c.objective == "clm":
            repeats = 1                   # next-token targets are the same every time: score each once
        for r in range(repeats):
            for i in range(0, len(self.eval_ids), bs):
                ids, attn = collate(self.eval_ids[i:i + bs], self.tokenizer.pad_token_id)
                if r == 0:
                    self.embed_batches.append((ids, attn))
                special = special_mask(ids, self.special_ids)
                if c.objective == "clm":
                    inputs, labels = ids, next_token_labels(ids, attn, special)
                else:
                    inputs, labels = mask_tokens(ids, special, self.tokenizer.mask_token_id or 0,
                                                 self.model.config.vocab_size, c.mask_prob, gen, self.random_ids)
                self.eval_batches.append((ids, attn, inputs, labels))
        self.evaluator = Evaluator(self, HeldOut(self.eval_batches, self.embed_batches, self.unigram_logp,
                                                 self.unigram_top, read_pairs(c.pairs) if c.pairs else [],
                                                 _scored_pairs(c.eval_pairs)),
                                   c, self.tokenizer, self.max_length)

    # ---- the schedule ---------------------------------------------------------------------
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

    # ---- one step -------------------------------------------------------------------------
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

    def _evaluate(self) -> dict:
        m = self.evaluator.evaluate()
        phase = self._phase(max(self.step - 1, 0))
        m["heldout_loss"] = m[HELDOUT_LOSS.get(phase, "heldout_mlm_loss")]
        m["phase"] = phase
        self.history["eval"].append({"step": self.step, **m})
        self._emit("eval", **m)
        return m

    def _probe(self) -> None:
        self._emit("probe", **self.probe.run(self.step))

    # ---- checkpoints ----------------------------------------------------------------------
    def _checkpoint(self) -> Path:
        c = self.config
        last_eval = self.history["eval"][-1] if self.history["eval"] else {}
        info = {"objective": c.objective, "step": self.step, "total_steps": c.steps,
                "corpus": str(c.corpus), "device": describe_device(self.device),
                "precision": self.precision, "init": c.init if not c.resume else f"resumed {c.resume}",
                "heldout_mlm_loss": last_eval.get("heldout_mlm_loss"),
                "heldout_mlm_accuracy": last_eval.get("heldout_mlm_accuracy"),
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}

        def write(folder: Path) -> None:
            model = self.model
            save_checkpoint(model, self.tokenizer, folder, extra={"training": info})
            tensors, groups = optimizer_tensors(self.opt)
            tensors["rng.torch"] = torch.get_rng_state()
            tensors["rng.mask"] = self.mask_gen.get_state()
            if self.device.type == "cuda":
                tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
            save_file(tensors, str(folder / STATE_TENSORS))
            state = {"version": STATE_VERSION, "step": self.step, "config": c.to_dict(),
                     "peak_lr": self.peak_lr, "sampler": self.sampler.state(),
                     "param_groups": groups, "history": self.history, "precision": self.precision}
            (folder / STATE_JSON).write_text(json.dumps(state), encoding="utf-8")
            run_folder.carry_over(c.out, folder)

        out = atomic_folder(Path(c.out).expanduser(), write)
        self._emit("checkpoint", path=str(out))
        return out

    def _restore(self, folder: Path, saved: dict) -> None:
        if saved.get("version") != STATE_VERSION:
            raise InputError(f"{folder}: training state version {saved.get('version')} is not supported")
        tensors = load_file(str(folder / STATE_TENSORS))
        state = optimizer_state(tensors, saved["param_groups"])
        try:
            self.opt.load_state_dict(state)
        except (ValueError, KeyError) as e:
            raise InputError(f"the optimizer state in {folder} does not fit the model: {e}") from None
        for st in self.opt.state.values():         # moments live where the parameters do
            for k, v in st.items():
                if torch.is_tensor(v) and k != "step":
                    st[k] = v.to(self.device)
        torch.set_rng_state(tensors["rng.torch"])
        self.mask_gen.set_state(tensors["rng.mask"])
        if self.device.type == "cuda" and "rng.cuda" in tensors:
            torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)
        self.step = int(saved["step"])
        s = saved.get("sampler", {})
        self.sampler = BatchSampler(len(self.train_ids), self.config.batch_size, self.config.seed,
                                    int(s.get("epoch", 0)), min(int(s.get("position", 0)), len(self.train_ids)))
        self.history = saved.get("history") or {"train": [], "eval": []}

    # ---- reporting ------------------------------------------------------------------------
    def _emit(self, kind: str, **data) -> None:
        event = {"kind": kind, "step": self.step, "total": self.config.steps, **data}
        if self.metrics is not None:
            self.metrics.append(event)
        self._progress(event)

    def _summary(self, cancelled: bool, seconds: float, trained: int) -> dict:
        ev = self.history["eval"]
        last = ev[-1] if ev else {}
        first = ev[0] if ev and ev[0]["step"] == 0 else {}
        phase = self._phase(max(self.step - 1, 0))
        tail = [h["loss"] for h in self.history["train"] if h["phase"] == phase][-5:]
        return {
            "steps": self.step,
            "train_loss": float(np.mean(tail)) if tail else None,
            "heldout_mlm_loss": last.get("heldout_mlm_loss"),
            "heldout_mlm_accuracy": last.get("heldout_mlm_accuracy"),
            "heldout_clm_loss": last.get("heldout_clm_loss"),
            "heldout_clm_accuracy": last.get("heldout_clm_accuracy"),
            "unigram_loss": last.get("unigram_loss"),
            "unigram_accuracy": last.get("unigram_accuracy"),
            "initial_heldout_mlm_loss": first.get("heldout_mlm_loss"),
            "heldout_simcse_loss": last.get("heldout_simcse_loss"),
            "alignment": last.get("alignment"),
            "uniformity": last.get("uniformity"),
            "pair_cosine": last.get("pair_cosine"),
            "unrelated_cosine": last.get("unrelated_cosine"),
            "objective": self.config.objective,
            "device": describe_device(self.device),
            "precision": self.precision,
            "seconds": round(seconds, 2),
            "steps_this_run": trained,
            "out": str(Path(self.config.out).expanduser()),
            "mlm_head": self.has_mlm,
            "cancelled": cancelled,
        }


# ---------------------------------------------------------------------------------------------


def _folder_tokenizer(folder: Path, doing: str):
    """The tokenizer saved beside a model's weights; InputError naming what is missing."""
    from core.encoder.tokenizer import load_tokenizer
    try:
        return load_tokenizer(Path(folder))
    except ModelUnavailable as e:
        raise InputError(f"{doing} {folder}: {e}") from None


def _scored_pairs(path: str):
    """The graded pairs to rank at each evaluation, or None."""
    if not path:
        return None
    return read_scored_pairs(path, remedy="give the header row a, b, score (or sentence1, sentence2, similarity)")


def cancel_check(cancel) -> Callable[[], bool]:
    """``cancel`` (None, a threading.Event, or a callable returning True) as one callable."""
    if cancel is None:
        return lambda: False
    if hasattr(cancel, "is_set"):
        return cancel.is_set
    return cancel
